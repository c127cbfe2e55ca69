// Fault injection for the I/O tests: this test binary defines pread() and preadv2(), which
// the engine's static lsio_io library then calls instead of libc's (the executable's
// definition wins at link time). With every knob at zero they are plain system calls.
//
// Knobs (reset by ResetFaults()):
//   max_bytes        > 0: each call transfers at most this many bytes (short reads)
//   eintr_every      > 0: every Nth call fails with EINTR before doing anything
//   eagain_every     > 0: every Nth call fails with EAGAIN before doing anything
//   eio_every        > 0: every Nth call fails with EIO before doing anything
//   nowait_budget    >= 0: preadv2(RWF_NOWAIT) serves this many bytes in total, then
//                    fails with EAGAIN (a partly cached file); -1 = unlimited
// Counters: pread_calls, preadv2_calls (calls that reached the interposer).
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
};

Faults& GetFaults();
void ResetFaults();

}  // namespace lsio_test
