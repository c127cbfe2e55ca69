// The pread backend: a plain loop over requests, reading on the calling thread.
#include <cerrno>
#include <unistd.h>

#include <sys/uio.h>

#include "io/fd_cache.h"  // kDirectAlignment
#include "io/io_backend.h"
#include "io/page_cache.h"

namespace lsio {

namespace {

// Reads until `length` bytes, EOF or an error; *done counts the bytes read.
Status PreadLoop(int fd, uint64_t offset, uint64_t length, uint8_t* dst, uint64_t* done_io) {
  uint64_t& done = *done_io;
  while (done < length) {
    // Linux reads at most ~2 GiB per call; larger requests loop like short reads.
    const size_t want = static_cast<size_t>(std::min<uint64_t>(length - done, 1ull << 30));
    const ssize_t n = pread(fd, dst + done, want, static_cast<off_t>(offset + done));
    if (n > 0) {
      done += static_cast<uint64_t>(n);
    } else if (n == 0) {
      return Status::DataLoss("unexpected end of file");  // caller decides (min_length)
    } else if (errno != EINTR && errno != EAGAIN) {
      return Status::IoError("read failed", errno).WithRange(offset, length);
    }
  }
  return Status::Ok();
}

}  // namespace

Status EofStatus(const ReadRequest& r, uint64_t done) {
  if (r.min_length > 0 && done >= r.min_length) return Status::Ok();
  return Status::DataLoss("unexpected end of file after " + std::to_string(done) + " of " +
                          std::to_string(r.length) + " bytes")
      .WithRange(r.offset, r.length);
}

Status PreadFully(int fd, uint64_t offset, uint64_t length, uint8_t* dst) {
  ReadRequest r;
  r.fd = fd;
  r.offset = offset;
  r.length = length;
  r.dst = dst;
  PreadRequest(&r);
  return r.status;
}

void PreadRequest(ReadRequest* r, uint64_t already) {
  uint64_t done = already;
  Status st = PreadLoop(r->fd, r->offset, r->length, r->dst, &done);
  if (st.code() == StatusCode::kDataLoss) st = EofStatus(*r, done);
  r->status = std::move(st);
  r->transferred = done;
}

bool TryFromPageCache(ReadRequest* r, uint64_t* done) {
  if (r->cache_fd < 0 || CachedState(r->cache_fd, r->offset, r->length, r->file_size) != Cached::kAll) return false;
  // RWF_NOWAIT: a page evicted since the check must not block this thread on the disk.
  while (*done < r->length) {
    iovec iov{r->dst + *done, static_cast<size_t>(std::min<uint64_t>(r->length - *done, 1ull << 30))};
    const ssize_t n = preadv2(r->cache_fd, &iov, 1, static_cast<off_t>(r->offset + *done), RWF_NOWAIT);
    if (n > 0) {
      *done += static_cast<uint64_t>(n);
      continue;
    }
    if (n == 0) {
      r->status = EofStatus(*r, *done);
      return true;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EOPNOTSUPP || errno == EINVAL || errno == ENOSYS) {
      *done &= ~(kDirectAlignment - 1);  // O_DIRECT goes on from an aligned offset
      return false;
    }
    r->status = Status::IoError("read failed", errno).WithRange(r->offset, r->length);
    return true;
  }
  return true;
}

namespace {

class PreadBackend final : public IoBackend {
 public:
  const char* name() const override { return "pread"; }
  void Read(std::span<ReadRequest> requests,
            const std::function<void(size_t)>& on_done) override {
    for (size_t i = 0; i < requests.size(); ++i) {
      ReadRequest& r = requests[i];
      uint64_t done = 0;
      r.status = Status::Ok();
      r.inline_hit = false;
      if (r.length > 0 && TryFromPageCache(&r, &done)) {
        r.transferred = done;
        r.inline_hit = true;
      } else {
        PreadRequest(&r, done);
      }
      on_done(i);
    }
  }
};

}  // namespace

std::unique_ptr<IoBackend> MakePreadBackend() { return std::make_unique<PreadBackend>(); }

}  // namespace lsio
