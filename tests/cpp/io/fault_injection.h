// Fault injection for the I/O and read tests. A test binary that links fault_injection.cc
// defines pread(), preadv2(), mincore(), io_uring_submit(), io_uring_submit_and_wait(),
// posix_memalign() and pthread_create(), and replaces the global operator new / delete; the
// engine's static libraries then call those instead of libc's / liburing's / libstdc++'s (a
// definition in the executable wins at link time; the real functions are found with
// dlsym(RTLD_NEXT)). With every knob at its default they behave exactly like the real
// functions.
//
// pread / preadv2 knobs:
//   max_bytes        > 0: each call transfers at most this many bytes (short reads)
//   eintr_every      > 0: every Nth call fails with EINTR before doing anything
//   eagain_every     > 0: every Nth call fails with EAGAIN before doing anything
//   eio_every        > 0: every Nth call fails with EIO before doing anything
//   nowait_budget    >= 0: preadv2(RWF_NOWAIT) serves this many bytes in total, then
//                    fails with EAGAIN (a partly cached file); -1 = unlimited
// Counters: pread_calls, preadv2_calls (calls that reached the interposer).
//
// mincore (FileMap::Resident, the check before a range is read in place from a mapping):
// while nowait_budget is 0 it reports no page resident, so a page cache that refuses inline
// reads refuses mapped ones too, and those reads reach the backend. Counter: mincore_calls.
//
// io_uring knobs. The engine reaps completions with liburing's inline peek functions, which
// read the CQ ring directly and cannot be interposed; so faults are injected at submission:
// io_uring_submit() and io_uring_submit_and_wait() rewrite the prepared, not yet submitted
// read SQEs. A faulted read becomes a NOP (nothing is read, nothing written to its buffer)
// whose completion's `res` is set to the injected result before the call returns, i.e.
// before the engine can see it. Reads are counted in submission order (retries and resumed short reads count).
//   uring_max_bytes    > 0: each read SQE asks the kernel for at most this many bytes, so
//                      the completion is a genuine short read
//   uring_eintr_every  > 0: every Nth read completes with -EINTR
//   uring_eagain_every > 0: every Nth read completes with -EAGAIN
//   uring_eio_every    > 0: every Nth read completes with -EIO
//   uring_eof_every    > 0: every Nth read completes with 0 (end of file)
//   uring_eio_fd       >= 0: every read of this descriptor completes with -EIO
// Counters: uring_reads (read SQEs seen), uring_injected (completions rewritten).
//   uring_submit_fail_after >= 0: the submission calls (io_uring_submit and
//                      io_uring_submit_and_wait together) numbered above this fail hard
//                      with -uring_submit_errno, `uring_submit_fail_count` of them (then the
//                      knob is spent). Like liburing before a failing io_uring_enter, the
//                      failing call first publishes the prepared SQEs at the kernel-visible
//                      SQ tail, where the next enter on that ring would take them; -1 = off.
//   uring_submit_errno errno of the injected failure (default EBADF)
// Counters: uring_submits (submission calls counted), uring_submit_failed.
//
// Allocation knobs (posix_memalign, which lsio::AlignedBuffer uses for read arenas, shard
// index buffers and decode scratch; nothing else in the engine calls it):
//   alloc_fail_nth       > 0: the Nth call asking for >= alloc_fail_min_bytes fails with
//                        ENOMEM (counted from the last ResetFaults / ArmAllocFailure)
//   alloc_fail_min_bytes calls below this size are neither counted nor failed
// Counters: alloc_calls (counted calls), alloc_failed (calls failed).
//
// operator new knobs (the binary replaces the global throwing operator new / new[], plain
// and aligned, with malloc-based ones, and operator delete to match, so std containers,
// std::function, std::string and make_shared throw std::bad_alloc on demand):
//   new_fail_nth       > 0: the Nth operator new of at least new_fail_min_bytes, on any
//                      thread, throws std::bad_alloc (counted from ArmNewFailure)
// Counters: new_calls (counted calls), new_failed (calls failed).
//
// Thread creation (pthread_create, which std::thread calls):
//   pthread_create_fail > 0: the next this-many pthread_create calls fail with EAGAIN,
//                      as when RLIMIT_AS leaves no room for a thread stack
// Counter: pthread_create_failed.
#pragma once

#include <atomic>
#include <cstdint>

namespace lsio_test {

struct Faults {
  std::atomic<uint64_t> max_bytes{0};
  std::atomic<int> eintr_every{0};
  std::atomic<int> eagain_every{0};
  std::atomic<int> eio_every{0};
  std::atomic<int64_t> nowait_budget{-1};
  std::atomic<uint64_t> pread_calls{0};
  std::atomic<uint64_t> preadv2_calls{0};
  std::atomic<uint64_t> mincore_calls{0};

  std::atomic<uint32_t> uring_max_bytes{0};
  std::atomic<int> uring_eintr_every{0};
  std::atomic<int> uring_eagain_every{0};
  std::atomic<int> uring_eio_every{0};
  std::atomic<int> uring_eof_every{0};
  std::atomic<int> uring_eio_fd{-1};
  std::atomic<uint64_t> uring_reads{0};
  std::atomic<uint64_t> uring_injected{0};
  std::atomic<int64_t> uring_submit_fail_after{-1};
  std::atomic<int> uring_submit_fail_count{1};
  std::atomic<int> uring_submit_errno{9};  // EBADF
  std::atomic<uint64_t> uring_submits{0};
  std::atomic<uint64_t> uring_submit_failed{0};

  std::atomic<uint64_t> alloc_fail_nth{0};
  std::atomic<uint64_t> alloc_fail_min_bytes{0};
  std::atomic<uint64_t> alloc_calls{0};
  std::atomic<uint64_t> alloc_failed{0};

  std::atomic<uint64_t> new_fail_nth{0};
  std::atomic<uint64_t> new_fail_min_bytes{0};
  std::atomic<uint64_t> new_calls{0};
  std::atomic<uint64_t> new_failed{0};

  std::atomic<int> pthread_create_fail{0};
  std::atomic<uint64_t> pthread_create_failed{0};
};

Faults& GetFaults();
void ResetFaults();

/// Fails the `nth` posix_memalign call of at least `min_bytes` from now on (resets the
/// allocation counters first).
void ArmAllocFailure(uint64_t nth, uint64_t min_bytes);

/// Makes the `nth` operator new of at least `min_bytes` from now on throw std::bad_alloc
/// (resets the operator new counters first); nth 0 disarms.
void ArmNewFailure(uint64_t nth, uint64_t min_bytes);

}  // namespace lsio_test
