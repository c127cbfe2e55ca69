// Interposed pread / preadv2 / io_uring_submit(_and_wait) / posix_memalign / pthread_create
// and the replaced global operator new / delete (see
// fault_injection.h for the knobs and why each function is the one interposed).
#include "io/fault_injection.h"

#include <dlfcn.h>
#include <liburing.h>
#include <malloc.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <functional>
#include <new>
#include <utility>
#include <vector>

namespace lsio_test {

Faults& GetFaults() {
  static Faults f;
  return f;
}

void ResetFaults() {
  Faults& f = GetFaults();
  f.max_bytes = 0;
  f.eintr_every = 0;
  f.eagain_every = 0;
  f.eio_every = 0;
  f.nowait_budget = -1;
  f.pread_calls = 0;
  f.preadv2_calls = 0;
  f.mincore_calls = 0;
  f.uring_max_bytes = 0;
  f.uring_eintr_every = 0;
  f.uring_eagain_every = 0;
  f.uring_eio_every = 0;
  f.uring_eof_every = 0;
  f.uring_eio_fd = -1;
  f.uring_reads = 0;
  f.uring_injected = 0;
  f.uring_submit_fail_after = -1;
  f.uring_submit_fail_count = 1;
  f.uring_submit_errno = EBADF;
  f.uring_submits = 0;
  f.uring_submit_failed = 0;
  f.alloc_fail_nth = 0;
  f.alloc_fail_min_bytes = 0;
  f.alloc_calls = 0;
  f.alloc_failed = 0;
  f.new_fail_nth = 0;
  f.new_fail_min_bytes = 0;
  f.new_calls = 0;
  f.new_failed = 0;
  f.pthread_create_fail = 0;
  f.pthread_create_failed = 0;
}

void ArmNewFailure(uint64_t nth, uint64_t min_bytes) {
  Faults& f = GetFaults();
  f.new_fail_nth = 0;  // disarmed while the counters change
  f.new_calls = 0;
  f.new_failed = 0;
  f.new_fail_min_bytes = min_bytes;
  f.new_fail_nth = nth;
}

void ArmAllocFailure(uint64_t nth, uint64_t min_bytes) {
  Faults& f = GetFaults();
  f.alloc_fail_nth = 0;  // disarmed while the counters change
  f.alloc_calls = 0;
  f.alloc_failed = 0;
  f.alloc_fail_min_bytes = min_bytes;
  f.alloc_fail_nth = nth;
}

namespace {

// Returns -1 with errno set when this call should fail by injection.
int InjectError(uint64_t call) {
  Faults& f = GetFaults();
  const int ei = f.eintr_every.load();
  if (ei > 0 && call % static_cast<uint64_t>(ei) == 0) {
    errno = EINTR;
    return -1;
  }
  const int ea = f.eagain_every.load();
  if (ea > 0 && call % static_cast<uint64_t>(ea) == 0) {
    errno = EAGAIN;
    return -1;
  }
  const int eio = f.eio_every.load();
  if (eio > 0 && call % static_cast<uint64_t>(eio) == 0) {
    errno = EIO;
    return -1;
  }
  return 0;
}

bool Every(int n, uint64_t call) { return n > 0 && call % static_cast<uint64_t>(n) == 0; }

bool UringFaultsArmed() {
  Faults& f = GetFaults();
  return f.uring_max_bytes.load() != 0 || f.uring_eintr_every.load() != 0 || f.uring_eagain_every.load() != 0 ||
         f.uring_eio_every.load() != 0 || f.uring_eof_every.load() != 0 || f.uring_eio_fd.load() >= 0;
}

// The completion result to inject for the read SQE counted as `call` on `fd`, or 1 for
// none (a read result is never 1 here by injection).
int UringInjection(uint64_t call, int fd) {
  Faults& f = GetFaults();
  if (fd >= 0 && fd == f.uring_eio_fd.load()) return -EIO;
  if (Every(f.uring_eintr_every.load(), call)) return -EINTR;
  if (Every(f.uring_eagain_every.load(), call)) return -EAGAIN;
  if (Every(f.uring_eio_every.load(), call)) return -EIO;
  if (Every(f.uring_eof_every.load(), call)) return 0;
  return 1;
}

// (user_data, result) of NOPs submitted in place of faulted reads whose completions were
// not rewritten yet. One ring per thread in the engine, so per thread here too.
thread_local std::vector<std::pair<uint64_t, int>> t_pending;

}  // namespace
}  // namespace lsio_test

extern "C" ssize_t pread(int fd, void* buf, size_t n, off_t off) {
  using lsio_test::GetFaults;
  const uint64_t call = GetFaults().pread_calls.fetch_add(1) + 1;
  if (lsio_test::InjectError(call) < 0) return -1;
  const uint64_t cap = GetFaults().max_bytes.load();
  if (cap > 0) n = std::min<size_t>(n, cap);
  return syscall(SYS_pread64, fd, buf, n, off);
}

extern "C" ssize_t preadv2(int fd, const struct iovec* iov, int iovcnt, off_t off, int flags) {
  using lsio_test::GetFaults;
  lsio_test::Faults& f = GetFaults();
  const uint64_t call = f.preadv2_calls.fetch_add(1) + 1;
  if (lsio_test::InjectError(call) < 0) return -1;
  // Only single-iovec calls are made by the engine; shorten that one when asked.
  struct iovec one = iov[0];
  uint64_t cap = f.max_bytes.load();
  if ((flags & RWF_NOWAIT) != 0) {
    const int64_t budget = f.nowait_budget.load();
    if (budget == 0) {
      errno = EAGAIN;
      return -1;
    }
    if (budget > 0) cap = cap == 0 ? static_cast<uint64_t>(budget) : std::min<uint64_t>(cap, static_cast<uint64_t>(budget));
  }
  if (cap > 0) one.iov_len = std::min<size_t>(one.iov_len, cap);
  const long r = syscall(SYS_preadv2, fd, iovcnt == 1 ? &one : iov, iovcnt, static_cast<long>(off), 0L, flags);
  if (r > 0 && (flags & RWF_NOWAIT) != 0 && f.nowait_budget.load() > 0) f.nowait_budget.fetch_sub(r);
  return r;
}

extern "C" int mincore(void* addr, size_t length, unsigned char* vec) {
  lsio_test::Faults& f = lsio_test::GetFaults();
  f.mincore_calls.fetch_add(1);
  const long r = syscall(SYS_mincore, addr, length, vec);
  if (r == 0 && f.nowait_budget.load() == 0) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    std::memset(vec, 0, (length + page - 1) / page);
  }
  return static_cast<int>(r);
}

namespace lsio_test {
namespace {

// Rewrites the read SQEs prepared since the last submission (ring->sq.sqe_head ..
// sqe_tail, not yet visible to the kernel) per the knobs, runs the real submission, then
// gives the NOPs' completions their injected results before returning. NOPs complete during
// the submission itself, but the loop waits for one that is late, so the engine can never
// peek an unrewritten one.
int FaultySubmit(io_uring* ring, const std::function<int()>& real) {
  Faults& f = GetFaults();
  const int64_t fail_after = f.uring_submit_fail_after.load();
  if (fail_after >= 0) {
    const uint64_t call = f.uring_submits.fetch_add(1) + 1;
    if (call > static_cast<uint64_t>(fail_after) && f.uring_submit_fail_count.fetch_sub(1) > 0) {
      // What liburing's __io_uring_flush_sq does before io_uring_enter: publish the SQEs.
      ring->sq.sqe_head = ring->sq.sqe_tail;
      __atomic_store_n(ring->sq.ktail, ring->sq.sqe_tail, __ATOMIC_RELEASE);
      f.uring_submit_failed.fetch_add(1);
      if (f.uring_submit_fail_count.load() <= 0) f.uring_submit_fail_after = -1;
      return -f.uring_submit_errno.load();
    }
  }
  if (!UringFaultsArmed() && t_pending.empty()) return real();
  const uint32_t cap = f.uring_max_bytes.load();
  for (unsigned idx = ring->sq.sqe_head; idx != ring->sq.sqe_tail; ++idx) {
    io_uring_sqe* sqe = &ring->sq.sqes[idx & ring->sq.ring_mask];
    if (sqe->opcode != IORING_OP_READ) continue;
    const uint64_t call = f.uring_reads.fetch_add(1) + 1;
    const int res = UringInjection(call, sqe->fd);
    if (res <= 0) {
      const uint64_t user_data = sqe->user_data;
      io_uring_prep_nop(sqe);
      sqe->user_data = user_data;
      t_pending.emplace_back(user_data, res);
      continue;
    }
    if (cap > 0 && sqe->len > cap) sqe->len = cap;  // the kernel reads less: a real short read
  }
  const int r = real();
  if (r < 0) {
    // Nothing learned about the NOPs; the engine fails what is outstanding anyway.
    t_pending.clear();
    return r;
  }
  while (!t_pending.empty()) {
    const unsigned head = *ring->cq.khead;
    const unsigned tail = __atomic_load_n(ring->cq.ktail, __ATOMIC_ACQUIRE);
    for (unsigned i = head; i != tail; ++i) {
      io_uring_cqe* cqe = &ring->cq.cqes[i & ring->cq.ring_mask];
      auto it = std::find_if(t_pending.begin(), t_pending.end(),
                             [&](const auto& p) { return p.first == cqe->user_data; });
      if (it == t_pending.end()) continue;
      cqe->res = it->second;
      f.uring_injected.fetch_add(1);
      t_pending.erase(it);
    }
    if (t_pending.empty()) break;
    // Wait until one more completion than now has arrived.
    const long w = syscall(__NR_io_uring_enter, ring->ring_fd, 0u, tail - head + 1, IORING_ENTER_GETEVENTS,
                           nullptr, 0L);
    if (w < 0 && errno != EINTR && errno != EAGAIN && errno != EBUSY) {
      t_pending.clear();
      break;
    }
  }
  return r;
}

}  // namespace
}  // namespace lsio_test

// The engine's two submission calls (liburing exports both; the peek/wait helpers it reaps
// with are inline and read the ring directly).
extern "C" int io_uring_submit(struct io_uring* ring) {
  using Fn = int (*)(io_uring*);
  static const Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "io_uring_submit"));
  return lsio_test::FaultySubmit(ring, [&] { return real(ring); });
}

extern "C" int io_uring_submit_and_wait(struct io_uring* ring, unsigned wait_nr) {
  using Fn = int (*)(io_uring*, unsigned);
  static const Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "io_uring_submit_and_wait"));
  return lsio_test::FaultySubmit(ring, [&] { return real(ring, wait_nr); });
}

// AlignedBuffer's allocator. The real work is done by memalign(), which every sanitizer
// runtime intercepts, so sanitizer builds still track these blocks.
extern "C" int posix_memalign(void** memptr, size_t alignment, size_t size) {
  using namespace lsio_test;
  if (alignment < sizeof(void*) || (alignment & (alignment - 1)) != 0) return EINVAL;
  Faults& f = GetFaults();
  const uint64_t nth = f.alloc_fail_nth.load();
  if (nth > 0 && size >= f.alloc_fail_min_bytes.load()) {
    if (f.alloc_calls.fetch_add(1) + 1 == nth) {
      f.alloc_failed.fetch_add(1);
      return ENOMEM;
    }
  }
  void* p = memalign(alignment, size);
  if (p == nullptr && size != 0) return ENOMEM;
  *memptr = p;
  return 0;
}

// std::thread's pthread_create (the real one, or a sanitizer's interceptor, via RTLD_NEXT).
extern "C" int pthread_create(pthread_t* thread, const pthread_attr_t* attr, void* (*start)(void*), void* arg) {
  using Fn = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
  static const Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "pthread_create"));
  lsio_test::Faults& f = lsio_test::GetFaults();
  if (f.pthread_create_fail.load() > 0 && f.pthread_create_fail.fetch_sub(1) > 0) {
    f.pthread_create_failed.fetch_add(1);
    return EAGAIN;
  }
  return real(thread, attr, start, arg);
}

// Global operator new / delete: malloc-based (sanitizers intercept malloc and free, and the
// pairs stay matched), with the new_fail_nth knob.
namespace {

void* CountedNew(size_t size, size_t align) {
  lsio_test::Faults& f = lsio_test::GetFaults();
  const uint64_t nth = f.new_fail_nth.load(std::memory_order_relaxed);
  if (nth > 0 && size >= f.new_fail_min_bytes.load(std::memory_order_relaxed)) {
    if (f.new_calls.fetch_add(1) + 1 == nth) {
      f.new_failed.fetch_add(1);
      throw std::bad_alloc();
    }
  }
  if (size == 0) size = 1;
  void* p = align <= alignof(std::max_align_t) ? malloc(size) : memalign(align, size);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

}  // namespace

void* operator new(size_t n) { return CountedNew(n, 0); }
void* operator new[](size_t n) { return CountedNew(n, 0); }
void* operator new(size_t n, std::align_val_t a) { return CountedNew(n, static_cast<size_t>(a)); }
void* operator new[](size_t n, std::align_val_t a) { return CountedNew(n, static_cast<size_t>(a)); }
void* operator new(size_t n, const std::nothrow_t&) noexcept {
  try {
    return CountedNew(n, 0);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](size_t n, const std::nothrow_t&) noexcept {
  try {
    return CountedNew(n, 0);
  } catch (...) {
    return nullptr;
  }
}
void operator delete(void* p) noexcept { free(p); }
void operator delete[](void* p) noexcept { free(p); }
void operator delete(void* p, size_t) noexcept { free(p); }
void operator delete[](void* p, size_t) noexcept { free(p); }
void operator delete(void* p, std::align_val_t) noexcept { free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { free(p); }
void operator delete(void* p, size_t, std::align_val_t) noexcept { free(p); }
void operator delete[](void* p, size_t, std::align_val_t) noexcept { free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { free(p); }
