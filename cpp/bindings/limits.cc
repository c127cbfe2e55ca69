// lsio._core._limits: machine-limit micro-benchmarks for the benchmark suite
// (benchmarks/python/limits.py). Private: not part of the lsio API, may change any time.
//
// Each function measures one physical limit of the machine on the exact inputs a benchmark
// workload uses, so the suite can print "what the hardware allows" beside each reader:
//
//   raw_read(paths, files, offsets, lengths, io="pread", threads=1, queue_depth=64) -> s
//       Reads byte range i = [offsets[i], offsets[i] + lengths[i]) of paths[files[i]] through
//       the engine's own I/O layer (io/io_backend.h: MakePreadBackend or
//       MakeUringBackend(queue_depth, nowait_first=false)), so the limit uses the same syscalls
//       lsio does. The ranges are sorted by (file, offset) and split into `threads` contiguous
//       shares of about equal bytes; each std::thread reads its share in batches of
//       `queue_depth` requests (one IoBackend::Read call per batch) into its own reused,
//       pre-touched buffer. Files are opened and rings set up before the clock starts.
//       Returns the wall time from releasing all threads to the last one finishing.
//   zstd_decode(frames, decoded_size, repeats=1) -> s
//       Single thread: decodes every frame with ZSTD_decompressDCtx and one reused DCtx
//       into one reused buffer of `decoded_size` bytes; one untimed warm-up pass, then
//       `repeats` timed passes; returns their total time.
//   memcpy(nbytes, repeats=1) -> s
//       One thread copies nbytes between two pre-touched buffers; one untimed warm-up copy,
//       then `repeats` timed copies; returns their total time.
//
// All three release the GIL while they run. Errors raise the usual lsio exceptions
// (StorageError for I/O, CorruptDataError for a bad frame, ValueError for bad arguments).
#include <fcntl.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "errors.h"
#include "gil.h"
#include "io/io_backend.h"

namespace py = pybind11;

namespace lsio_py {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// Closes the opened files on every exit path.
struct Fds {
  std::vector<int> fds;
  ~Fds() {
    for (int fd : fds) {
      if (fd >= 0) close(fd);
    }
  }
};

double RawRead(const std::vector<std::string>& paths, py::array_t<int64_t> files_arr,
               py::array_t<uint64_t> offsets_arr, py::array_t<uint64_t> lengths_arr,
               const std::string& io, int threads, unsigned queue_depth) {
  if (io != "pread" && io != "uring") {
    ThrowStatus(lsio::Status::InvalidArgument("io must be 'pread' or 'uring', got '" + io + "'"));
  }
  if (threads < 1) ThrowStatus(lsio::Status::InvalidArgument("threads must be >= 1"));
  if (queue_depth < 1) ThrowStatus(lsio::Status::InvalidArgument("queue_depth must be >= 1"));
  auto files = files_arr.unchecked<1>();
  auto offsets = offsets_arr.unchecked<1>();
  auto lengths = lengths_arr.unchecked<1>();
  const size_t n = static_cast<size_t>(files.shape(0));
  if (static_cast<size_t>(offsets.shape(0)) != n || static_cast<size_t>(lengths.shape(0)) != n) {
    ThrowStatus(lsio::Status::InvalidArgument("files, offsets and lengths must have the same length"));
  }
  for (size_t i = 0; i < n; ++i) {
    if (files(i) < 0 || static_cast<size_t>(files(i)) >= paths.size()) {
      ThrowStatus(lsio::Status::InvalidArgument("files[" + std::to_string(i) + "] is not an index into paths"));
    }
  }

  // Copy the inputs so the GIL can be released.
  struct Range {
    int64_t file;
    uint64_t offset, length;
  };
  std::vector<Range> ranges(n);
  for (size_t i = 0; i < n; ++i) ranges[i] = {files(i), offsets(i), lengths(i)};

  std::unique_ptr<lsio::IoBackend> backend;
  if (io == "pread") {
    backend = lsio::MakePreadBackend();
  } else {
    const int probe = lsio::ProbeUringSetup();
    if (probe != 0) {
      ThrowStatus(lsio::Status::Unavailable("io_uring cannot be used here", -probe));
    }
    auto made = lsio::MakeUringBackend(queue_depth, /*nowait_first=*/false);
    if (!made.ok()) ThrowStatus(made.status());
    backend = std::move(made).value();
  }

  Fds fds;
  for (const std::string& p : paths) {
    const int fd = open(p.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      lsio::Status st = lsio::Status::IoError("cannot open file", errno);
      st.WithPath(p);
      ThrowStatus(st);
    }
    fds.fds.push_back(fd);
  }
  const int warm_fd = open("/dev/zero", O_RDONLY | O_CLOEXEC);  // sets up each thread's ring
  if (warm_fd < 0) ThrowStatus(lsio::Status::IoError("cannot open /dev/zero", errno));
  fds.fds.push_back(warm_fd);

  double seconds = 0;
  lsio::Status first_error;
  WithoutGil([&] {
    std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) {
      return a.file != b.file ? a.file < b.file : a.offset < b.offset;
    });
    // Contiguous shares of about equal bytes.
    const uint64_t total = std::accumulate(ranges.begin(), ranges.end(), uint64_t{0},
                                           [](uint64_t s, const Range& r) { return s + r.length; });
    const size_t nthreads = static_cast<size_t>(threads);
    std::vector<size_t> bounds(nthreads + 1, n);
    bounds[0] = 0;
    {
      uint64_t acc = 0;
      size_t t = 1;
      for (size_t i = 0; i < n && t < nthreads; ++i) {
        acc += ranges[i].length;
        while (t < nthreads && acc * nthreads >= total * t) bounds[t++] = i + 1;
      }
    }

    std::atomic<int> ready{0};
    std::atomic<bool> go{false};
    std::vector<lsio::Status> errors(nthreads);
    std::vector<std::thread> pool;
    pool.reserve(nthreads);
    for (size_t t = 0; t < nthreads; ++t) {
      pool.emplace_back([&, t] {
        const size_t begin = bounds[t], end = bounds[t + 1];
        // Buffer for the largest batch of this share, touched before the clock starts.
        uint64_t cap = 1;
        for (size_t b = begin; b < end; b += queue_depth) {
          uint64_t s = 0;
          for (size_t i = b; i < std::min(end, b + queue_depth); ++i) s += ranges[i].length;
          cap = std::max(cap, s);
        }
        std::vector<uint8_t> buf(cap, 1);
        std::vector<lsio::ReadRequest> reqs;
        reqs.reserve(queue_depth);
        {
          uint8_t one = 0;
          lsio::ReadRequest warm;
          warm.fd = warm_fd;
          warm.length = 1;
          warm.dst = &one;
          backend->Read(std::span<lsio::ReadRequest>(&warm, 1), [](size_t) {});
        }
        ready.fetch_add(1);
        while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
        for (size_t b = begin; b < end; b += queue_depth) {
          reqs.clear();
          uint64_t pos = 0;
          for (size_t i = b; i < std::min(end, b + queue_depth); ++i) {
            lsio::ReadRequest r;
            r.fd = fds.fds[static_cast<size_t>(ranges[i].file)];
            r.offset = ranges[i].offset;
            r.length = ranges[i].length;
            r.dst = buf.data() + pos;
            pos += ranges[i].length;
            reqs.push_back(r);
          }
          backend->Read(std::span<lsio::ReadRequest>(reqs.data(), reqs.size()), [](size_t) {});
          for (size_t i = 0; i < reqs.size() && errors[t].ok(); ++i) {
            if (!reqs[i].status.ok()) {
              errors[t] = reqs[i].status;
              errors[t].WithPath(paths[static_cast<size_t>(ranges[b + i].file)]);
            }
          }
        }
      });
    }
    while (ready.load() < threads) std::this_thread::yield();
    const auto t0 = Clock::now();
    go.store(true, std::memory_order_release);
    for (auto& th : pool) th.join();
    seconds = Seconds(t0, Clock::now());
    for (const auto& e : errors) {
      if (!e.ok()) {
        first_error = e;
        break;
      }
    }
    return 0;
  });
  if (!first_error.ok()) ThrowStatus(first_error);
  return seconds;
}

double ZstdDecode(const std::vector<py::bytes>& frames, size_t decoded_size, int repeats) {
  if (repeats < 1) ThrowStatus(lsio::Status::InvalidArgument("repeats must be >= 1"));
  // The caller's bytes objects stay alive (the argument vector holds references) and are
  // immutable, so their buffers can be read with the GIL released; nothing is copied.
  struct Frame {
    const char* data;
    size_t size;
  };
  std::vector<Frame> data;
  data.reserve(frames.size());
  for (const auto& f : frames) {
    char* p = nullptr;
    Py_ssize_t n = 0;
    if (PyBytes_AsStringAndSize(f.ptr(), &p, &n) != 0) throw py::error_already_set();
    data.push_back({p, static_cast<size_t>(n)});
  }
  double seconds = 0;
  std::string error;
  WithoutGil([&] {
    std::vector<uint8_t> dst(std::max<size_t>(decoded_size, 1), 0);
    std::unique_ptr<ZSTD_DCtx, size_t (*)(ZSTD_DCtx*)> dctx(ZSTD_createDCtx(), ZSTD_freeDCtx);
    auto pass = [&]() -> bool {
      for (const auto& f : data) {
        const size_t r = ZSTD_decompressDCtx(dctx.get(), dst.data(), dst.size(), f.data, f.size);
        if (ZSTD_isError(r)) {
          error = ZSTD_getErrorName(r);
          return false;
        }
      }
      return true;
    };
    if (!dctx) {
      error = "ZSTD_createDCtx failed";
    } else if (pass()) {
      const auto t0 = Clock::now();
      for (int i = 0; i < repeats && error.empty(); ++i) pass();
      seconds = Seconds(t0, Clock::now());
    }
    return 0;
  });
  if (!error.empty()) ThrowStatus(lsio::Status::DataLoss("zstd: " + error));
  return seconds;
}

double Memcpy(size_t nbytes, int repeats) {
  if (repeats < 1) ThrowStatus(lsio::Status::InvalidArgument("repeats must be >= 1"));
  double seconds = 0;
  WithoutGil([&] {
    const size_t n = std::max<size_t>(nbytes, 1);
    std::vector<uint8_t> src(n, 1), dst(n, 0);
    std::memcpy(dst.data(), src.data(), n);
    const auto t0 = Clock::now();
    for (int i = 0; i < repeats; ++i) {
      std::memcpy(dst.data(), src.data(), n);
      asm volatile("" : : "r"(dst.data()) : "memory");  // keep every copy
    }
    seconds = Seconds(t0, Clock::now());
    return 0;
  });
  return seconds;
}

}  // namespace

void BindLimits(py::module_& m) {
  py::module_ l = m.def_submodule("_limits", "machine-limit micro-benchmarks (private; for benchmarks/python)");
  l.def("raw_read", &RawRead, py::arg("paths"), py::arg("files"), py::arg("offsets"), py::arg("lengths"),
        py::arg("io") = "pread", py::arg("threads") = 1, py::arg("queue_depth") = 64,
        "Reads the byte ranges with the engine's pread or io_uring backend; returns seconds.");
  l.def("zstd_decode", &ZstdDecode, py::arg("frames"), py::arg("decoded_size"), py::arg("repeats") = 1,
        "Single-thread ZSTD_decompressDCtx of every frame, `repeats` times; returns seconds.");
  l.def("memcpy", &Memcpy, py::arg("nbytes"), py::arg("repeats") = 1,
        "Single-thread memcpy of nbytes, `repeats` times; returns seconds.");
}

}  // namespace lsio_py
