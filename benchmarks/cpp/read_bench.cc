// End-to-end read micro-benchmarks through the public C++ API (lsio::Array::Open +
// ReadBatch / Read) on stores written by the fixture, page cache hot:
//   - ReadBatch16: 16 random (4,256,256) float32 crops per call (16 MiB out) from a
//     (8,1024,1024) array, shards (8,512,512) of (1,128,128) zstd-3 chunks (~1.29x), the
//     training-loop call; io=auto and io=pread, threads = 1 and 2;
//   - TinyCrop: one chunk-aligned (512,512) crop of a (2048,2048) float32 array, shards
//     (1024,1024) of (32,32) zstd-3 chunks: 256 chunks of 4 KiB per call, per-chunk
//     overhead dominates; threads = 1 and 2.
// The Array is opened once per case and warmed by one call (shard indexes cached, files
// open), which is the steady state of a data loader. Wall time is used (UseRealTime), since
// pool threads and io_uring kernel workers do work the calling thread's CPU time misses.
// items/s = crops; bytes/s = output bytes; chunks/s = distinct read chunks decoded.
// Compare ReadBatch16 chunks/s with decode_bench's BM_ChainDecode/zstd_64KiB x threads to
// see what the executor adds on top of decoding.
//
// Run: build/bench/benchmarks/cpp/lsio_microbench --benchmark_filter=Read
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "bench_fixture.h"
#include "lsio/array.h"

namespace {

const lsio_bench::StoreSpec kWeather = {{8, 1024, 1024}, {8, 512, 512}, {1, 128, 128}, 3};
const lsio_bench::StoreSpec kTiny = {{1, 2048, 2048}, {1, 1024, 1024}, {1, 32, 32}, 3};

// Stores are written on first use, so that filters without read cases cost nothing.
const std::string& StorePath(const lsio_bench::StoreSpec& spec, const char* name) {
  static std::string weather, tiny;
  std::string& p = &spec == &kWeather ? weather : tiny;
  if (p.empty()) {
    p = lsio_bench::WriteShardedStore(lsio_bench::BenchDir::Shared(), name, spec);
    lsio_bench::WarmTree(p);
  }
  return p;
}

std::unique_ptr<lsio::Array> OpenOrSkip(benchmark::State& state, const std::string& path, const char* io,
                                        int threads) {
  lsio::OpenOptions o;
  o.io = io;
  o.threads = threads;
  auto a = lsio::Array::Open(path, o);
  if (!a.ok()) {
    lsio_bench::Fail(state, a.status().ToString());
    return nullptr;
  }
  auto backend = a.value()->BackendName();
  if (!backend.ok()) {
    lsio_bench::Fail(state, backend.status().ToString());
    return nullptr;
  }
  state.SetLabel("io=" + backend.value());
  return std::move(a).value();
}

void BM_ReadBatch16(benchmark::State& state, const char* io) {
  const int threads = static_cast<int>(state.range(0));
  const std::string& path = StorePath(kWeather, "weather");
  auto arr = OpenOrSkip(state, path, io, threads);
  if (arr == nullptr) return;
  const std::vector<int64_t> crop = {4, 256, 256};
  const size_t crop_bytes = 4 * 256 * 256 * 4;
  constexpr size_t kBatches = 32;  // cycled; different crops every call
  std::vector<std::vector<lsio::Selection>> batches;
  std::vector<int64_t> batch_chunks;
  for (size_t b = 0; b < kBatches; ++b) {
    batches.push_back(lsio_bench::RandomCrops(kWeather.shape, crop, 16, 100 + b));
    batch_chunks.push_back(lsio_bench::DistinctChunks(batches.back(), kWeather.shape, kWeather.inner));
  }
  std::vector<uint8_t> out(16 * crop_bytes);
  std::memset(out.data(), 0, out.size());  // fault the pages in before timing
  std::vector<lsio::DstView> views;
  for (size_t i = 0; i < 16; ++i) views.push_back(lsio_bench::ContiguousView(out.data() + i * crop_bytes, crop, 4));

  int64_t chunks = 0;
  size_t next = 0;
  auto call = [&]() -> bool {
    const size_t b = next++ % kBatches;
    lsio::Status st = arr->ReadBatch(batches[b], views);
    if (!st.ok()) {
      lsio_bench::Fail(state, st.ToString());
      return false;
    }
    chunks += batch_chunks[b];
    return true;
  };
  if (!call()) return;  // warm-up: indexes cached, files open, pool started
  chunks = 0;
  for (auto _ : state) {
    if (!call()) break;
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * 16);
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(out.size()));
  state.counters["chunks/s"] = benchmark::Counter(static_cast<double>(chunks), benchmark::Counter::kIsRate);
}
BENCHMARK_CAPTURE(BM_ReadBatch16, io_auto, "auto")->ArgName("threads")->Arg(1)->Arg(2)->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_ReadBatch16, io_pread, "pread")->ArgName("threads")->Arg(1)->Arg(2)->UseRealTime()
    ->Unit(benchmark::kMillisecond);

void BM_ReadTinyCrop(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  const std::string& path = StorePath(kTiny, "tiny");
  auto arr = OpenOrSkip(state, path, "auto", threads);
  if (arr == nullptr) return;
  const std::vector<int64_t> crop = {1, 512, 512};
  const auto sels = lsio_bench::RandomCrops(kTiny.shape, crop, 64, 7, /*align=*/32);
  std::vector<uint8_t> out(512 * 512 * 4);
  std::memset(out.data(), 0, out.size());
  const lsio::DstView view = lsio_bench::ContiguousView(out.data(), crop, 4);
  size_t next = 0;
  int64_t chunks = 0;
  auto call = [&]() -> bool {
    const lsio::Selection& s = sels[next++ % sels.size()];
    lsio::Status st = arr->Read(s, view);
    if (!st.ok()) {
      lsio_bench::Fail(state, st.ToString());
      return false;
    }
    chunks += lsio_bench::DistinctChunks({s}, kTiny.shape, kTiny.inner);
    return true;
  };
  if (!call()) return;
  chunks = 0;
  for (auto _ : state) {
    if (!call()) break;
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(out.size()));
  state.counters["chunks/s"] = benchmark::Counter(static_cast<double>(chunks), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_ReadTinyCrop)->ArgName("threads")->Arg(1)->Arg(2)->UseRealTime();

}  // namespace
