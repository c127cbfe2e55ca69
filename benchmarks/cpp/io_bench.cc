// I/O backend micro-benchmarks: IoBackend::Read of random ranges from one temp file whose
// pages are all in the page cache (written, then read once), so this measures the
// hot-data path: syscall and copy cost, and io_uring's punting of buffered reads to
// kernel workers (performance.md §1: QD>1 buffered io_uring is ~4x slower than pread on
// hot data; nowait_first serves such hits inline with preadv2(RWF_NOWAIT)).
// Backends: pread, uring (nowait_first=false), uring_nowait (nowait_first=true), queue
// depth 64. Ranges: 4 KiB and 64 KiB at random 4 KiB-aligned offsets; batch = requests per
// Read call (1, 8, 64). bytes/s = bytes read; items/s = requests. One thread.
// io_uring cases are reported as errors (skipped) when ProbeUringSetup() fails here.
// Cold-cache numbers need a dropped page cache or O_DIRECT and are not measured here.
//
// Run: build/bench/benchmarks/cpp/lsio_microbench --benchmark_filter=IoRead
// Environment: LSIO_BENCH_IO_MIB (default 256) sets the file size; LSIO_BENCH_DIR its place.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "bench_fixture.h"
#include "io/io_backend.h"

namespace {

enum class Backend { kPread, kUring, kUringNowait };

struct IoFile {
  std::string path;
  uint64_t size = 0;
  int fd = -1;
};

// Written on first use only, so that a --benchmark_filter without I/O cases costs nothing.
const IoFile& SharedIoFile() {
  static const IoFile f = [] {
    IoFile r;
    const char* mib = std::getenv("LSIO_BENCH_IO_MIB");
    r.size = static_cast<uint64_t>(mib != nullptr && *mib != '\0' ? std::atoll(mib) : 256) << 20;
    if (r.size < (1 << 20)) lsio_bench::Die("LSIO_BENCH_IO_MIB must be >= 1");
    r.path = lsio_bench::BenchDir::Shared().Join("io_bench.bin");
    const int wfd = open(r.path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (wfd < 0) lsio_bench::Die("cannot create " + r.path);
    std::vector<uint8_t> block(4 << 20);
    for (uint64_t off = 0; off < r.size; off += block.size()) {
      for (size_t i = 0; i < block.size(); i += 8) {
        const uint64_t v = lsio_bench::SplitMix64(off + i);
        std::memcpy(block.data() + i, &v, 8);
      }
      const size_t n = static_cast<size_t>(std::min<uint64_t>(block.size(), r.size - off));
      if (write(wfd, block.data(), n) != static_cast<ssize_t>(n)) lsio_bench::Die("short write to " + r.path);
    }
    close(wfd);
    lsio_bench::WarmPageCache(r.path);
    r.fd = open(r.path.c_str(), O_RDONLY | O_CLOEXEC);
    if (r.fd < 0) lsio_bench::Die("cannot open " + r.path);
    return r;
  }();
  return f;
}

void BM_IoRead(benchmark::State& state, Backend which) {
  const uint64_t length = static_cast<uint64_t>(state.range(0));
  const size_t batch = static_cast<size_t>(state.range(1));
  std::unique_ptr<lsio::IoBackend> backend;
  if (which == Backend::kPread) {
    backend = lsio::MakePreadBackend();
  } else {
    const int probe = lsio::ProbeUringSetup();
    if (probe != 0) {
      state.SkipWithError(("io_uring unavailable here (errno " + std::to_string(-probe) + ")").c_str());
      return;
    }
    auto b = lsio::MakeUringBackend(64, which == Backend::kUringNowait);
    if (!b.ok()) {
      lsio_bench::Fail(state, b.status().ToString());
      return;
    }
    backend = std::move(b).value();
  }
  const IoFile& f = SharedIoFile();

  // A fixed ring of random offsets, long enough to spread over the whole file.
  constexpr size_t kOffsets = 1 << 14;
  std::mt19937_64 rng(42 + length + batch);
  const uint64_t pages = (f.size - length) / 4096 + 1;
  std::vector<uint64_t> offsets(kOffsets);
  for (uint64_t& o : offsets) o = (rng() % pages) * 4096;

  std::vector<uint8_t> buf(batch * length);
  std::vector<lsio::ReadRequest> reqs(batch);
  for (size_t i = 0; i < batch; ++i) {
    reqs[i].fd = f.fd;
    reqs[i].length = length;
    reqs[i].dst = buf.data() + i * length;
  }
  size_t next = 0;
  bool failed = false;
  auto issue = [&] {
    for (lsio::ReadRequest& r : reqs) {
      r.offset = offsets[next++ % kOffsets];
      r.status = lsio::Status::Ok();
    }
    backend->Read(reqs, [&](size_t i) { failed |= !reqs[i].status.ok(); });
  };
  issue();  // creates this thread's ring outside the timed loop
  for (auto _ : state) {
    issue();
    benchmark::DoNotOptimize(buf.data());
  }
  if (failed) lsio_bench::Fail(state, "a read failed");
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(batch * length));
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(batch));
}

void IoArgs(benchmark::internal::Benchmark* b) {
  // Wall time: io_uring work done by kernel workers is not CPU time of this thread.
  b->ArgNames({"bytes", "batch"})->ArgsProduct({{4 << 10, 64 << 10}, {1, 8, 64}})->UseRealTime();
}
BENCHMARK_CAPTURE(BM_IoRead, pread, Backend::kPread)->Apply(IoArgs);
BENCHMARK_CAPTURE(BM_IoRead, uring, Backend::kUring)->Apply(IoArgs);
BENCHMARK_CAPTURE(BM_IoRead, uring_nowait, Backend::kUringNowait)->Apply(IoArgs);

}  // namespace
