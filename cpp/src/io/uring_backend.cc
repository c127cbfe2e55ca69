// io_uring backend: one ring per thread, many reads in flight, short reads resumed.
//
// With nowait_first (io="auto") it is a hybrid: each request is first tried inline with
// preadv2(RWF_NOWAIT); a page-cache hit is handed to on_done at once (decoded while hot in
// this core's cache), a miss is queued on the ring and submitted before the next hit is
// decoded, so the kernel reads misses while the caller works. Buffered io_uring reads of
// cached data are several times slower than pread on this kernel generation
// (performance.md), which is why hits never go through the ring. ReadRequest::inline_hit
// tells the caller which path served a request. Requests on O_DIRECT descriptors are never
// tried inline; those with a buffered twin (ReadRequest::cache_fd, direct="auto" on data
// larger than the page cache) are served from the twin when cachestat says the page cache
// holds the whole range (TryFromPageCache), else queued on the ring as O_DIRECT reads.
//
// Error paths. A Read's SQEs and completions point into the caller's buffers and carry the
// caller's request indices, so no Read may leave any of them behind: when the ring fails
// hard (a submit error other than EINTR/EAGAIN/EBUSY) or on_done throws, Pass's destructor
// waits for every read the kernel took (they write into caller memory), and if any prepared
// SQE was not taken (liburing may already have published it at the kernel-visible SQ tail
// before the failed enter, where the next enter would pick it up) it tears the ring down so
// that the next Read sets up a fresh one. Each Read also tags its SQEs with a per-thread
// call generation (user_data high 32 bits); a completion of another call is never taken
// for one of this call's requests.
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

#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#endif

namespace lsio {
namespace {

// Linux caps one read at about 2 GiB; larger requests continue as short reads.
constexpr uint64_t kMaxSqeBytes = 1ull << 30;

// ThreadSanitizer builds only (empty inline functions otherwise). liburing maps and unmaps
// the rings with raw syscalls that TSan does not see, so TSan keeps the shadow state of a
// ring's pages after they are unmapped; when another thread's ring is later mapped onto the
// same pages, the two threads' accesses look like a race although the kernel ordered them
// (munmap, then mmap). GCC 12's libtsan offers no working way to reset shadow memory
// (AnnotateNewMemory and the munmap syscall hooks are no-ops), so this models the kernel's
// order instead: a ring's pages are released before it is unmapped and a new ring's pages
// acquired after it is mapped, page by page, so only threads whose rings shared a page are
// synchronized, and races on anything else (or on a ring shared by mistake) still report.
#if defined(__SANITIZE_THREAD__)
void TsanRingPages(const io_uring& ring, void (*sync)(void*)) {
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  auto each_page = [&](const void* p, size_t n) {
    if (p == nullptr || n == 0) return;
    const uintptr_t a = reinterpret_cast<uintptr_t>(p);
    for (uintptr_t q = a & ~(page - 1); q < a + n; q += page) sync(reinterpret_cast<void*>(q));
  };
  each_page(ring.sq.ring_ptr, ring.sq.ring_sz);
  each_page(ring.cq.ring_ptr, ring.cq.ring_sz);
  each_page(ring.sq.sqes, ring.sq.ring_entries * sizeof(io_uring_sqe));
}
void TsanRingMapped(const io_uring& ring) { TsanRingPages(ring, __tsan_acquire); }
void TsanRingUnmapping(const io_uring& ring) { TsanRingPages(ring, __tsan_release); }
#else
inline void TsanRingMapped(const io_uring&) {}
inline void TsanRingUnmapping(const io_uring&) {}
#endif

struct ThreadRing {
  io_uring ring{};
  uint64_t gen = 0;
  unsigned entries = 0;
  bool ready = false;
  bool busy = false;          // a Pass on this thread is using the ring
  uint32_t call_gen = 0;      // tag of the latest Pass (user_data high 32 bits)
  uint64_t stale_cqes = 0;    // completions seen with another call's tag (none expected)

  ~ThreadRing() {
    if (ready && gen == ForkGeneration()) {
      TsanRingUnmapping(ring);
      io_uring_queue_exit(&ring);
    }
  }

  // Drops the ring of this process (the next Ensure sets up a fresh one). Only after every
  // read the kernel took has completed: closing a ring does not wait for its reads.
  void Teardown() {
    if (!ready) return;
    if (gen == ForkGeneration()) {
      TsanRingUnmapping(ring);
      io_uring_queue_exit(&ring);
    } else {
      close(ring.ring_fd);
    }
    ready = false;
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
      TsanRingUnmapping(ring);
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
    TsanRingMapped(ring);
    r = io_uring_ring_dontfork(&ring);
    if (r < 0) {
      TsanRingUnmapping(ring);
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

// Per-request bookkeeping of a Read call, kept per thread so that a call (often a single
// request while reads hit the page cache) allocates nothing once the vectors have grown.
struct PassVectors {
  std::vector<uint64_t> done;     // bytes read per request
  std::vector<size_t> retry;      // short or EAGAIN/EINTR completions to resubmit
  std::vector<uint8_t> in_ring;   // handed to the ring and not finished
  bool busy = false;              // a Read on this thread is using them (never nested today)
};
thread_local PassVectors t_vectors;

// The state of one Read call's ring traffic. Its destructor drains the ring (see the header
// comment), so the same cleanup runs when the call returns, fails or unwinds.
struct Pass {
  std::span<ReadRequest> requests;
  const std::function<void(size_t)>& on_done;
  unsigned qd;
  PassVectors own;                // used only if a Read ever nests on one thread
  PassVectors& v;
  std::vector<uint64_t>& done;
  std::vector<size_t>& retry;
  std::vector<uint8_t>& in_ring;
  io_uring* ring = nullptr;
  unsigned depth = 0;
  uint32_t tag = 0;               // this call's generation on the thread's ring
  size_t inflight = 0;            // SQEs prepared and not yet completed
  size_t unsubmitted = 0;         // SQEs prepared and not yet submitted
  size_t remaining = 0;           // requests in the ring not finished
  int ring_error = 0;             // the hard error that stopped the ring

  Pass(std::span<ReadRequest> reqs, const std::function<void(size_t)>& cb, unsigned queue_depth)
      : requests(reqs),
        on_done(cb),
        qd(queue_depth),
        v(t_vectors.busy ? own : t_vectors),
        done(v.done),
        retry(v.retry),
        in_ring(v.in_ring) {
    // Marked busy only once nothing can throw (the vectors may grow): a constructor that
    // throws runs no destructor, and t_vectors would stay busy for the thread's life.
    done.assign(reqs.size(), 0);
    in_ring.assign(reqs.size(), 0);
    retry.clear();
    v.busy = true;
  }
  ~Pass() {
    Drain();
    if (&v == &t_vectors) t_vectors.busy = false;
  }
  Pass(const Pass&) = delete;
  Pass& operator=(const Pass&) = delete;

  // False when no ring can be used: setup failed, or a Read nested in on_done while the
  // outer one owns the thread's ring (never done today); the caller then uses pread.
  bool EnsureRing() {
    if (ring != nullptr) return true;
    if (t_ring.busy || t_ring.Ensure(std::max(8u, qd)) < 0) return false;
    t_ring.busy = true;
    ring = &t_ring.ring;
    depth = std::min<unsigned>(qd, t_ring.entries);
    tag = ++t_ring.call_gen;
    return true;
  }

  // Request indices fit the low 32 bits: 2^32 ReadRequests would need hundreds of GiB.
  uint64_t UserData(size_t i) const { return (static_cast<uint64_t>(tag) << 32) | static_cast<uint64_t>(i); }

  // Waits for every read the kernel took from this call, discards prepared SQEs it did not
  // take (by tearing the ring down) and releases the thread's ring. Idempotent; never throws.
  void Drain() {
    if (ring == nullptr) return;
    // SQEs prepared but not consumed by the kernel, whether or not liburing published them.
    const size_t untaken = io_uring_sq_ready(ring);
    size_t taken = inflight > untaken ? inflight - untaken : 0;
    bool lost = false;
    while (taken > 0) {
      io_uring_cqe* cqe = nullptr;
      const int w = io_uring_wait_cqe(ring, &cqe);
      if (w == -EINTR || w == -EAGAIN || w == -EBUSY) continue;
      if (w < 0) {  // the ring cannot tell more; nothing left to wait with
        lost = true;
        break;
      }
      if (static_cast<uint32_t>(io_uring_cqe_get_data64(cqe) >> 32) == tag) --taken;
      else ++t_ring.stale_cqes;
      io_uring_cqe_seen(ring, cqe);
    }
    // Untaken SQEs cannot be withdrawn (published ones sit past the kernel's SQ head), so
    // the ring goes, and the kernel drops them with it. After a failed wait (no such case is
    // known) reads may still be in flight: the ring goes too, which is the best left to do.
    if (untaken > 0 || lost || ring_error != 0) t_ring.Teardown();
    inflight = 0;
    unsubmitted = 0;
    t_ring.busy = false;
    ring = nullptr;
  }

  void Prep(size_t i) {
    io_uring_sqe* sqe = io_uring_get_sqe(ring);  // never null: inflight <= depth <= entries
    ReadRequest& r = requests[i];
    const uint64_t len = std::min(r.length - done[i], kMaxSqeBytes);
    io_uring_prep_read(sqe, r.fd, r.dst + done[i], static_cast<unsigned>(len), r.offset + done[i]);
    io_uring_sqe_set_data64(sqe, UserData(i));
    ++inflight;
    ++unsubmitted;
  }

  void Queue(size_t i) {
    in_ring[i] = 1;
    ++remaining;
    Prep(i);
  }

  // Submits what is prepared without waiting; false on a hard ring error.
  bool Flush() {
    if (unsubmitted == 0) return true;
    const int r = io_uring_submit(ring);
    if (r >= 0) {
      unsubmitted -= std::min<size_t>(unsubmitted, static_cast<size_t>(r));
      return true;
    }
    return r == -EINTR || r == -EAGAIN || r == -EBUSY || Stop(r);
  }

  // Resubmits retries, submits, and handles every completion available (waiting for at
  // least one when `wait`); false on a hard ring error.
  bool Reap(bool wait) {
    if (ring == nullptr) return true;
    while (!retry.empty() && inflight < depth) {
      Prep(retry.back());
      retry.pop_back();
    }
    if (wait && inflight > 0) {
      const int r = io_uring_submit_and_wait(ring, 1);
      if (r >= 0) unsubmitted = 0;
      else if (r != -EINTR && r != -EAGAIN && r != -EBUSY) return Stop(r);
    } else if (!Flush()) {
      return false;
    }
    io_uring_cqe* cqe = nullptr;
    while (io_uring_peek_cqe(ring, &cqe) == 0) {
      const uint64_t data = io_uring_cqe_get_data64(cqe);
      const int res = cqe->res;
      io_uring_cqe_seen(ring, cqe);
      if (static_cast<uint32_t>(data >> 32) != tag) {  // another call's: not ours to count
        ++t_ring.stale_cqes;
        continue;
      }
      const size_t i = static_cast<size_t>(data & 0xffffffffu);
      --inflight;
      ReadRequest& rq = requests[i];
      if (res == -EINTR || res == -EAGAIN) {
        retry.push_back(i);
        continue;
      }
      if (res < 0) {
        rq.status = Status::IoError("read failed", -res).WithRange(rq.offset, rq.length);
      } else if (res == 0) {
        rq.status = EofStatus(rq, done[i]);
      } else {
        done[i] += static_cast<uint64_t>(res);
        if (done[i] < rq.length) {  // short read: resume the rest
          retry.push_back(i);
          continue;
        }
      }
      Finish(i);
    }
    return true;
  }

  void Finish(size_t i) {
    in_ring[i] = 0;
    --remaining;
    requests[i].transferred = done[i];
    on_done(i);
  }

  bool Stop(int err) {
    ring_error = err;
    return false;
  }

  // The ring itself failed: drain it (the kernel's reads target caller memory; the SQEs it
  // did not take must never reach a later call), then fail every request handed to the ring
  // and not finished, and every request from `unvisited` on.
  void FailAll(size_t unvisited) {
    Drain();
    auto fail = [&](size_t i) {
      ReadRequest& r = requests[i];
      r.status = Status::IoError("io_uring submission failed", -ring_error).WithRange(r.offset, r.length);
      r.transferred = done[i];
      on_done(i);
    };
    for (size_t i = 0; i < requests.size(); ++i) {
      if (in_ring[i]) fail(i);
    }
    for (size_t i = unvisited; i < requests.size(); ++i) fail(i);
  }
};

class UringBackend final : public IoBackend {
 public:
  UringBackend(unsigned qd, bool nowait_first) : qd_(qd), nowait_first_(nowait_first) {}

  const char* name() const override { return nowait_first_ ? "uring+nowait" : "uring"; }

  // One pass over the requests in order. With nowait_first, each is first tried inline
  // (preadv2 RWF_NOWAIT); a hit is handed to on_done at once, so the caller decodes it while
  // it is still in this core's cache, and a miss goes to the ring, whose reads proceed while
  // later hits are decoded. Completions are reaped between hits and at the end.
  void Read(std::span<ReadRequest> requests,
            const std::function<void(size_t)>& on_done) override {
    const size_t n = requests.size();
    if (n == 0) return;
    Pass pass(requests, on_done, qd_);
    for (size_t i = 0; i < n; ++i) {
      ReadRequest& r = requests[i];
      r.status = Status::Ok();
      r.transferred = 0;
      r.inline_hit = false;
      r.waited = false;
      if (r.length == 0) {
        on_done(i);
        continue;
      }
      const bool tried_inline = r.cache_fd < 0 && !r.direct && nowait_first_ &&
                                nowait_supported_.load(std::memory_order_relaxed);
      const bool hit = r.cache_fd >= 0 ? TryFromPageCache(&r, &pass.done[i])
                                       : tried_inline && TryNowait(r, &pass.done[i]);
      if (hit) {
        r.transferred = pass.done[i];
        r.inline_hit = true;
        // Start the kernel on misses queued so far before spending time on this hit.
        const bool flushed = pass.Flush();
        on_done(i);
        if (!flushed || !pass.Reap(/*wait=*/false)) return pass.FailAll(i + 1);
        continue;
      }
      // A miss goes to the ring (or to pread): the descriptor must block from here on.
      if (r.fd_nonblocking) {
        if (fcntl(r.fd, F_SETFL, 0) != 0) {
          r.status = Status::IoError("fcntl failed", errno).WithRange(r.offset, r.length);
          on_done(i);
          continue;
        }
        r.fd_nonblocking = false;
      }
      if (!pass.EnsureRing()) {
        // Cannot happen after a successful probe unless resources ran out: serve this miss
        // with pread so the call still completes.
        PreadRequest(&r, pass.done[i]);
        on_done(i);
        continue;
      }
      while (pass.inflight >= pass.depth) {
        if (!pass.Reap(/*wait=*/true)) return pass.FailAll(i);
      }
      // Waits on the device for sure only when the page cache was asked and missed, or the
      // read bypasses it (O_DIRECT; a direct file's buffered twin that was not cached).
      r.waited = r.direct || r.cache_fd >= 0 || (tried_inline && nowait_supported_.load(std::memory_order_relaxed));
      pass.Queue(i);
    }
    while (pass.remaining > 0) {
      if (!pass.Reap(/*wait=*/true)) return pass.FailAll(n);
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
        r.status = EofStatus(r, *done);
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
