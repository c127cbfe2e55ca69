// IoBackend: the one batch primitive of the I/O layer.
//
// "Read these (fd, offset, length) ranges into these buffers, with a status per request."
//
// Usage:
//   1. Fill a vector<ReadRequest> (fd from FdCache, dst with room for `length` bytes).
//   2. backend->Read(requests, on_done): returns once every request has completed;
//      on_done(i) runs on the calling thread as soon as request i is finished (ok or not),
//      so the caller can decode it while other reads are still in flight.
//   3. Check requests[i].status: kIoError carries the errno; reaching end-of-file before
//      `length` bytes is kDataLoss ("unexpected end of file"); the caller adds the path.
//      With min_length set (O_DIRECT reads rounded up to the block size), end-of-file after
//      at least min_length bytes ends the request successfully; `transferred` says how many.
//
// Contract for every backend (checked by the shared conformance suite, tests/cpp/io/):
//   - short reads are resumed until `length` bytes or EOF; EINTR and EAGAIN are retried;
//   - a request never writes outside [dst, dst + length);
//   - zero-length requests succeed without a syscall;
//   - requests are independent: one failure does not stop the others;
//   - when Read returns, and also when it unwinds because on_done threw (the exception
//     propagates to the caller unchanged), no read of the call is still in flight and
//     nothing of it stays queued: the caller may free every dst buffer at once, and a later
//     Read on the same thread never sees this call's reads or completions. A request whose
//     on_done was not reached when on_done threw has an unspecified status and dst content.
//
// Thread-safety: a backend object may be used from many threads at once; backends that
// keep per-thread state (io_uring rings) keep it thread-local and fork-generation checked.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "lsio/status.h"

namespace lsio {

struct ReadRequest {
  int fd = -1;
  uint64_t offset = 0;
  uint64_t length = 0;
  uint8_t* dst = nullptr;
  /// 0: all `length` bytes must exist. Else end-of-file after at least this many bytes is
  /// success (an aligned O_DIRECT read may run past the end of the file).
  uint64_t min_length = 0;
  Status status;             ///< set by the backend before on_done runs
  uint64_t transferred = 0;  ///< bytes read, set by the backend before on_done runs
  bool inline_hit = false;   ///< served from the page cache by the inline RWF_NOWAIT attempt
  /// Queued to the kernel (io_uring) after the page cache was asked and could not serve it
  /// (RWF_NOWAIT), or read past the page cache (O_DIRECT): the caller waited on the device.
  /// False where that is not known: plain pread, io="uring" (no inline attempt), file systems
  /// without RWF_NOWAIT.
  bool waited = false;
  /// `fd` is still O_NONBLOCK (a file opened for this one read, OpenOnce): a backend clears
  /// the flag before any read that could block, since io_uring answers EAGAIN on such a
  /// descriptor instead of waiting. Reads served inline (RWF_NOWAIT) and plain pread,
  /// which ignores the flag on regular files, never need the extra fcntl.
  bool fd_nonblocking = false;
  /// direct="auto" on data larger than the page cache (FdCache's DirectMode::kMisses): `fd`
  /// is O_DIRECT and cache_fd a buffered descriptor of the same file. When the page cache
  /// holds the whole range (cachestat, io/page_cache.h), it is read from cache_fd inline
  /// (inline_hit); otherwise from `fd`. No RWF_NOWAIT attempt is made on a miss: it would
  /// start readahead of the range, which the O_DIRECT read then reads again.
  int cache_fd = -1;
  uint64_t file_size = 0;  ///< with cache_fd: the file's size (the cache holds nothing past it)
  /// `fd` is O_DIRECT: never tried with RWF_NOWAIT inline (that would be a synchronous
  /// device read on the calling thread, reported as a page-cache hit).
  bool direct = false;
};

class IoBackend {
 public:
  virtual ~IoBackend() = default;
  /// "pread", "uring" or "uring+nowait".
  virtual const char* name() const = 0;
  /// Reads every request (see the contract above). An exception from on_done (or a
  /// std::bad_alloc while building a status message) propagates once the backend has
  /// drained its reads.
  virtual void Read(std::span<ReadRequest> requests,
                    const std::function<void(size_t)>& on_done) = 0;
};

/// Plain pread loop; also the reference backend in tests.
std::unique_ptr<IoBackend> MakePreadBackend();

/// io_uring backend with one lazily created ring per thread. `queue_depth` bounds the reads
/// in flight per thread. With `nowait_first`, each read is first tried inline with
/// preadv2(RWF_NOWAIT), which serves page-cache hits at memory speed, and only misses
/// go to the ring. Creates no ring itself; call ProbeUringSetup() first to know whether
/// rings work here (if a ring later cannot be set up, reads fall back to pread).
Result<std::unique_ptr<IoBackend>> MakeUringBackend(unsigned queue_depth, bool nowait_first);

/// Sets up and tears down a small ring: 0 if io_uring works here, else a negative errno
/// (-EPERM under seccomp or kernel.io_uring_disabled, -ENOSYS on old kernels).
int ProbeUringSetup();

/// Shared helper: one read of [offset, offset+length) with short reads resumed, EINTR and
/// EAGAIN retried, EOF reported as kDataLoss.
Status PreadFully(int fd, uint64_t offset, uint64_t length, uint8_t* dst);

/// PreadFully for a request: honours min_length (EOF after it is success) and resumes from
/// `already` bytes; sets r->status and r->transferred.
void PreadRequest(ReadRequest* r, uint64_t already = 0);

/// With r->cache_fd: serves `r` from the page cache when it holds the whole range (true:
/// complete, or failed for good, r->status set). False: read it from r->fd from *done on,
/// a multiple of kDirectAlignment (a range evicted during the read resumes aligned).
bool TryFromPageCache(ReadRequest* r, uint64_t* done);

/// What an end-of-file after `done` bytes means for `r`: Ok when min_length allows it.
Status EofStatus(const ReadRequest& r, uint64_t done);

}  // namespace lsio
