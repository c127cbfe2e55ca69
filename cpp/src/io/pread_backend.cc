// The pread backend: a plain loop over requests, reading on the calling thread.
#include <cerrno>
#include <unistd.h>

#include "io/io_backend.h"

namespace lsio {

Status PreadFully(int fd, uint64_t offset, uint64_t length, uint8_t* dst) {
  uint64_t done = 0;
  while (done < length) {
    // Linux reads at most ~2 GiB per call; larger requests loop like short reads.
    const size_t want = static_cast<size_t>(std::min<uint64_t>(length - done, 1ull << 30));
    const ssize_t n = pread(fd, dst + done, want, static_cast<off_t>(offset + done));
    if (n > 0) {
      done += static_cast<uint64_t>(n);
    } else if (n == 0) {
      return Status::DataLoss("unexpected end of file after " + std::to_string(done) + " of " +
                              std::to_string(length) + " bytes")
          .WithRange(offset, length);
    } else if (errno != EINTR && errno != EAGAIN) {
      return Status::IoError("read failed", errno).WithRange(offset, length);
    }
  }
  return Status::Ok();
}

namespace {

class PreadBackend final : public IoBackend {
 public:
  const char* name() const override { return "pread"; }
  void Read(std::span<ReadRequest> requests,
            const std::function<void(size_t)>& on_done) override {
    for (size_t i = 0; i < requests.size(); ++i) {
      ReadRequest& r = requests[i];
      r.status = PreadFully(r.fd, r.offset, r.length, r.dst);
      on_done(i);
    }
  }
};

}  // namespace

std::unique_ptr<IoBackend> MakePreadBackend() { return std::make_unique<PreadBackend>(); }

}  // namespace lsio
