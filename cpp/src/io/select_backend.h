// Choosing an I/O backend: "auto", "uring" or "pread".
//
// Usage:
//   1. LSIO_ASSIGN_OR_RETURN(IoMode mode, ParseIoMode("auto"));  // at open(): no syscalls
//   2. LSIO_ASSIGN_OR_RETURN(auto backend, MakeBackend(mode, queue_depth));  // first read
//
// "auto" probes io_uring once per process (a throwaway ring). Where the kernel allows it,
// auto means io_uring with page-cache hits served inline by preadv2(RWF_NOWAIT) (buffered
// io_uring reads of cached data are several times slower than pread on this kernel
// generation; see performance.md). Where ring setup fails with EPERM (seccomp,
// kernel.io_uring_disabled) or ENOSYS, auto falls back to pread and UringSupport() says why.
// "uring" forces plain io_uring and fails with kUnavailable (errno) where it cannot work.
#pragma once

#include <memory>
#include <string>

#include "io/io_backend.h"

namespace lsio {

enum class IoMode { kAuto, kUring, kPread };

Result<IoMode> ParseIoMode(const std::string& name);
const char* IoModeName(IoMode mode);

struct UringSupportInfo {
  bool available = false;
  int error = 0;        ///< positive errno when unavailable
  std::string reason;   ///< empty when available
};

/// Probed once per process (again in a forked child).
UringSupportInfo UringSupport();

/// Builds the backend for `mode`. Fails with kUnavailable for kUring where io_uring cannot
/// be used. With `direct` (O_DIRECT descriptors), auto skips the inline RWF_NOWAIT attempt:
/// a direct read never hits the page cache, and a synchronous one would stall the worker
/// instead of queueing on the ring.
Result<std::unique_ptr<IoBackend>> MakeBackend(IoMode mode, unsigned queue_depth, bool direct = false);

}  // namespace lsio
