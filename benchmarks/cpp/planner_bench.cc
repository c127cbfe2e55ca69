// Planner micro-benchmarks: BuildTasks (selections -> deduplicated chunk tasks) followed by
// Coalesce (tasks -> I/O units), the pure CPU part of every read call, with no file I/O.
// Tasks are "resolved" between the two steps as the executor would from shard indexes
// (adjacent inner chunks of ~1/1.29 of their raw size), so Coalesce merges realistically.
// items/s = read chunks planned per second; compare with the decode rate (decode_bench.cc)
// to see whether planning could ever be the bottleneck.
//
// Cases (float32):
//   Batch16Crops  16 random crops (4,256,256) of a (8,1024,1024) array, shards (8,512,512)
//                 of (1,128,128) inner chunks: the training-loop batch (~36 chunks per crop)
//   FullRead      one selection covering a (256,1024,1024) array, same shards: 16384 chunks
//   TinyChunks    a (512,512) crop of a (4096,4096) array, shards (1024,1024) of (32,32)
//                 inner chunks, chunk-aligned: 256 chunks of 4 KiB
//
// Run: build/bench/benchmarks/cpp/lsio_microbench --benchmark_filter=Planner
#include <cstdint>
#include <vector>

#include <benchmark/benchmark.h>

#include "bench_fixture.h"
#include "read/planner.h"

namespace {

using lsio_bench::BenchLayout;

// What the executor's resolve step fills in, without touching files.
void FakeResolve(const lsio::ArrayLayout& l, lsio::Plan* plan) {
  const uint64_t stored = l.chain->decoded_size() * 100 / 129;
  for (lsio::ChunkTask& t : plan->tasks) {
    t.file = t.shard;
    t.offset = t.local * stored;
    t.nbytes = stored;
  }
}

void RunPlanner(benchmark::State& state, const BenchLayout& layout, const std::vector<lsio::Selection>& sels,
                const std::vector<lsio::DstView>& views) {
  const lsio::PlanOptions opts;
  size_t tasks = 0;
  size_t units = 0;
  for (auto _ : state) {
    lsio::Plan plan;
    lsio::BuildTasks(layout.l, sels, views, &plan);
    FakeResolve(layout.l, &plan);
    lsio::Coalesce(layout.l, opts, 0, static_cast<uint32_t>(plan.tasks.size()), &plan);
    benchmark::DoNotOptimize(plan.units.data());
    tasks = plan.tasks.size();
    units = plan.units.size();
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(tasks));
  state.counters["chunks"] = static_cast<double>(tasks);
  state.counters["io_units"] = static_cast<double>(units);
}

void BM_Planner_Batch16Crops(benchmark::State& state) {
  const BenchLayout layout = lsio_bench::MakeShardedLayout({8, 1024, 1024}, {8, 512, 512}, {1, 128, 128});
  const std::vector<int64_t> crop = {4, 256, 256};
  const auto sels = lsio_bench::RandomCrops(layout.l.shape, crop, 16, /*seed=*/1);
  const size_t crop_bytes = 4 * 256 * 256 * 4;
  lsio_bench::ReservedRegion out(16 * crop_bytes);
  std::vector<lsio::DstView> views;
  for (size_t i = 0; i < sels.size(); ++i) views.push_back(lsio_bench::ContiguousView(out.data() + i * crop_bytes, crop, 4));
  RunPlanner(state, layout, sels, views);
}
BENCHMARK(BM_Planner_Batch16Crops);

void BM_Planner_FullRead(benchmark::State& state) {
  const BenchLayout layout = lsio_bench::MakeShardedLayout({256, 1024, 1024}, {8, 512, 512}, {1, 128, 128});
  lsio_bench::ReservedRegion out(size_t{256} * 1024 * 1024 * 4);
  RunPlanner(state, layout, {lsio_bench::Box({0, 0, 0}, layout.l.shape)},
             {lsio_bench::ContiguousView(out.data(), layout.l.shape, 4)});
}
BENCHMARK(BM_Planner_FullRead)->Unit(benchmark::kMillisecond);

void BM_Planner_TinyChunks(benchmark::State& state) {
  // 3-d with a unit leading dimension, like the other layouts (and the e2e tiny store).
  const BenchLayout layout = lsio_bench::MakeShardedLayout({1, 4096, 4096}, {1, 1024, 1024}, {1, 32, 32});
  const std::vector<int64_t> crop = {1, 512, 512};
  lsio_bench::ReservedRegion out(512 * 512 * 4);
  RunPlanner(state, layout, lsio_bench::RandomCrops(layout.l.shape, crop, 1, /*seed=*/2, /*align=*/32),
             {lsio_bench::ContiguousView(out.data(), crop, 4)});
}
BENCHMARK(BM_Planner_TinyChunks);

}  // namespace
