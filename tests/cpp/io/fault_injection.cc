// Interposed pread / preadv2 (see fault_injection.h).
#include "io/fault_injection.h"

#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

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
