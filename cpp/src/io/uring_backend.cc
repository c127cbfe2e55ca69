// io_uring backend: one ring per thread, many reads in flight, short reads resumed.
//
// Rings live in thread-local holders stamped with the fork generation. In a forked child
// the inherited holder is abandoned: its mapping was never copied (io_uring_ring_dontfork),
// so the child only closes the inherited ring fd and sets up a fresh ring. It never submits
// to, reaps from or unmaps the parent's ring.
#include <fcntl.h>
#include <liburing.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <vector>

#include "io/io_backend.h"
#include "util/process_local.h"

namespace lsio {
namespace {

// Linux caps one read at about 2 GiB; larger requests continue as short reads.
constexpr uint64_t kMaxSqeBytes = 1ull << 30;

struct ThreadRing {
  io_uring ring{};
  uint64_t gen = 0;
  unsigned entries = 0;
  bool ready = false;

  ~ThreadRing() {
    if (ready && gen == ForkGeneration()) io_uring_queue_exit(&ring);
  }

  // Returns 0 or a negative errno.
  int Ensure(unsigned want_entries) {
    const uint64_t cur = ForkGeneration();
    if (ready && gen != cur) {
      // Inherited from the parent: abandon without touching the ring memory.
      close(ring.ring_fd);
      ready = false;
    }
    if (ready && entries >= want_entries) return 0;
    if (ready) {
      io_uring_queue_exit(&ring);
      ready = false;
    }
    io_uring_params p{};
    p.flags = IORING_SETUP_COOP_TASKRUN;
    int r = io_uring_queue_init_params(want_entries, &ring, &p);
    if (r == -EINVAL) {  // kernels before 5.19 lack COOP_TASKRUN
      p = io_uring_params{};
      r = io_uring_queue_init_params(want_entries, &ring, &p);
    }
    if (r < 0) return r;
    r = io_uring_ring_dontfork(&ring);
    if (r < 0) {
      io_uring_queue_exit(&ring);
      return r;
    }
    gen = cur;
    entries = want_entries;
    ready = true;
    return 0;
  }
};

thread_local ThreadRing t_ring;

class UringBackend final : public IoBackend {
 public:
  UringBackend(unsigned qd, bool nowait_first) : qd_(qd), nowait_first_(nowait_first) {}

  const char* name() const override { return nowait_first_ ? "uring+nowait" : "uring"; }

  void Read(std::span<ReadRequest> requests,
            const std::function<void(size_t)>& on_done) override {
    const size_t n = requests.size();
    if (n == 0) return;
    std::vector<uint64_t> done(n, 0);
    std::vector<size_t> to_ring;
    std::vector<size_t> hits;
    to_ring.reserve(n);

    for (size_t i = 0; i < n; ++i) {
      ReadRequest& r = requests[i];
      r.status = Status::Ok();
      if (r.length == 0) {
        hits.push_back(i);
      } else if (nowait_first_ && nowait_supported_.load(std::memory_order_relaxed) &&
                 TryNowait(r, &done[i])) {
        hits.push_back(i);
      } else {
        to_ring.push_back(i);
      }
    }

    if (to_ring.empty()) {
      for (size_t i : hits) on_done(i);
      return;
    }

    const int err = t_ring.Ensure(std::max(8u, qd_));
    if (err < 0) {
      // Cannot happen after a successful probe unless resources ran out: serve the rest
      // with pread so the call still completes.
      for (size_t i : hits) on_done(i);
      for (size_t i : to_ring) {
        ReadRequest& r = requests[i];
        r.status = PreadFully(r.fd, r.offset + done[i], r.length - done[i], r.dst + done[i]);
        on_done(i);
      }
      return;
    }
    io_uring* ring = &t_ring.ring;
    const unsigned depth = std::min<unsigned>(qd_, t_ring.entries);

    size_t next = 0;  // next index into to_ring not yet submitted
    std::vector<size_t> retry;
    size_t inflight = 0;
    size_t remaining = to_ring.size();
    bool hits_reported = false;

    auto prep = [&](size_t i) -> bool {
      io_uring_sqe* sqe = io_uring_get_sqe(ring);
      if (sqe == nullptr) return false;
      ReadRequest& r = requests[i];
      const uint64_t len = std::min(r.length - done[i], kMaxSqeBytes);
      io_uring_prep_read(sqe, r.fd, r.dst + done[i], static_cast<unsigned>(len),
                         r.offset + done[i]);
      io_uring_sqe_set_data64(sqe, i);
      ++inflight;
      return true;
    };

    while (remaining > 0) {
      while (inflight < depth && (!retry.empty() || next < to_ring.size())) {
        size_t i;
        if (!retry.empty()) {
          i = retry.back();
          if (!prep(i)) break;
          retry.pop_back();
        } else {
          i = to_ring[next];
          if (!prep(i)) break;
          ++next;
        }
      }
      int r = io_uring_submit_and_wait(ring, 1);
      if (r < 0 && r != -EINTR && r != -EAGAIN && r != -EBUSY) {
        FailOutstanding(requests, r, ring, &inflight, to_ring, next, retry, &done, on_done);
        // Hits are still good data.
        if (!hits_reported) for (size_t i : hits) on_done(i);
        return;
      }
      // Report inline hits once the first ring batch is in flight, so their decode overlaps
      // with the kernel's work on the misses.
      if (!hits_reported) {
        hits_reported = true;
        for (size_t i : hits) on_done(i);
      }
      io_uring_cqe* cqe = nullptr;
      while (io_uring_peek_cqe(ring, &cqe) == 0) {
        const size_t i = static_cast<size_t>(io_uring_cqe_get_data64(cqe));
        const int res = cqe->res;
        io_uring_cqe_seen(ring, cqe);
        --inflight;
        ReadRequest& rq = requests[i];
        if (res == -EINTR || res == -EAGAIN) {
          retry.push_back(i);
          continue;
        }
        if (res < 0) {
          rq.status = Status::IoError("read failed", -res).WithRange(rq.offset, rq.length);
        } else if (res == 0) {
          rq.status = Status::DataLoss("unexpected end of file after " +
                                       std::to_string(done[i]) + " of " +
                                       std::to_string(rq.length) + " bytes")
                          .WithRange(rq.offset, rq.length);
        } else {
          done[i] += static_cast<uint64_t>(res);
          if (done[i] < rq.length) {  // short read: resume the rest
            retry.push_back(i);
            continue;
          }
        }
        --remaining;
        on_done(i);
      }
    }
  }

 private:
  // One inline attempt; true when the request is complete (or failed for good).
  bool TryNowait(ReadRequest& r, uint64_t* done) {
    while (*done < r.length) {
      iovec iov{r.dst + *done, static_cast<size_t>(std::min(r.length - *done, kMaxSqeBytes))};
      const ssize_t n = preadv2(r.fd, &iov, 1, static_cast<off_t>(r.offset + *done), RWF_NOWAIT);
      if (n > 0) {
        *done += static_cast<uint64_t>(n);
        continue;
      }
      if (n == 0) {
        r.status = Status::DataLoss("unexpected end of file after " + std::to_string(*done) +
                                    " of " + std::to_string(r.length) + " bytes")
                       .WithRange(r.offset, r.length);
        return true;
      }
      if (errno == EINTR) continue;
      if (errno == EOPNOTSUPP || errno == EINVAL || errno == ENOSYS) {
        nowait_supported_.store(false, std::memory_order_relaxed);
        return false;
      }
      if (errno == EAGAIN) return false;
      r.status = Status::IoError("read failed", errno).WithRange(r.offset, r.length);
      return true;
    }
    return true;
  }

  // The ring itself failed: wait for what is in flight (it targets caller memory), then
  // fail every request not finished yet.
  void FailOutstanding(std::span<ReadRequest> requests, int err, io_uring* ring,
                       size_t* inflight, const std::vector<size_t>& to_ring, size_t next,
                       const std::vector<size_t>& retry, std::vector<uint64_t>* done,
                       const std::function<void(size_t)>& on_done) {
    std::vector<bool> finished(requests.size(), false);
    while (*inflight > 0) {
      io_uring_cqe* cqe = nullptr;
      const int w = io_uring_wait_cqe(ring, &cqe);
      if (w == -EINTR) continue;
      if (w < 0) break;  // nothing more can be learned; memory may still be written
      const size_t i = static_cast<size_t>(io_uring_cqe_get_data64(cqe));
      io_uring_cqe_seen(ring, cqe);
      --*inflight;
      (void)i;
    }
    auto fail = [&](size_t i) {
      if (finished[i]) return;
      finished[i] = true;
      ReadRequest& r = requests[i];
      r.status = Status::IoError("io_uring submission failed", -err).WithRange(r.offset, r.length);
      on_done(i);
    };
    for (size_t k = 0; k < next; ++k) {
      const size_t i = to_ring[k];
      if (requests[i].status.ok() && (*done)[i] < requests[i].length) fail(i);
    }
    for (size_t i : retry) fail(i);
    for (size_t k = next; k < to_ring.size(); ++k) fail(to_ring[k]);
  }

  unsigned qd_;
  bool nowait_first_;
  std::atomic<bool> nowait_supported_{true};
};

}  // namespace

Result<std::unique_ptr<IoBackend>> MakeUringBackend(unsigned queue_depth, bool nowait_first) {
  if (queue_depth == 0) return Status::InvalidArgument("io_uring queue depth must be >= 1");
  InstallForkHandler();  // the thread-local rings rely on the fork generation
  return std::unique_ptr<IoBackend>(new UringBackend(queue_depth, nowait_first));
}

int ProbeUringSetup() {
  // A throwaway ring: the probe must not leave a ring behind (open() creates none).
  io_uring ring{};
  const int r = io_uring_queue_init(4, &ring, 0);
  if (r < 0) return r;
  io_uring_queue_exit(&ring);
  return 0;
}

}  // namespace lsio
