// The pread backend: a plain loop over requests, reading on the calling thread.
#include <cerrno>
#include <unistd.h>

#include "io/io_backend.h"

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

namespace {

class PreadBackend final : public IoBackend {
 public:
  const char* name() const override { return "pread"; }
  void Read(std::span<ReadRequest> requests,
            const std::function<void(size_t)>& on_done) override {
    for (size_t i = 0; i < requests.size(); ++i) {
      PreadRequest(&requests[i]);
      on_done(i);
    }
  }
};

}  // namespace

std::unique_ptr<IoBackend> MakePreadBackend() { return std::make_unique<PreadBackend>(); }

}  // namespace lsio
