// Decode-side micro-benchmarks, one core, data in CPU caches where it would be in a read:
//   - CodecChain::Decode of bytes+zstd(3) float32 chunks: 64 KiB (128,128) and tiny 2 KiB
//     (16,32); next to them raw ZSTD_decompressDCtx on the very same frames, so the chain's
//     overhead (per-chunk bookkeeping, size checks) is the difference of the two rows;
//   - the transpose codec (order [1,0] on a (128,128) float32 chunk, element-wise scatter);
//   - CopyStrided of a decoded (128,128) float32 chunk into a (1024,1024) output row stride
//     (the scratch-path scatter of every chunk that cannot be decoded in place);
//   - DecodeShardIndex of a 4096-entry index with crc32c, and Crc32c throughput.
// bytes/s counts decoded (output) bytes; items/s counts chunks or index entries.
// 16 different frames are cycled so the branch predictor cannot learn one frame.
//
// Run: build/bench/benchmarks/cpp/lsio_microbench --benchmark_filter='Decode|Zstd|Copy|Crc|Index'
#include <zstd.h>

#include <cstdint>
#include <vector>

#include <benchmark/benchmark.h>
#include <nlohmann/json.hpp>

#include "bench_fixture.h"
#include "codec/chain.h"
#include "codec/registry.h"
#include "codec/codec.h"
#include "util/strided_copy.h"
#include "zarr/shard_index.h"
#include "zarr/sharding_config.h"

namespace {

using lsio_bench::Bytes;

constexpr int kFrames = 16;

struct ChunkSet {
  std::unique_ptr<lsio::CodecChain> chain;
  std::vector<Bytes> frames;
  size_t raw_bytes = 0;
  size_t stored_bytes = 0;
};

// kFrames float32 chunks of `shape` (different places of the field), encoded with `codecs`
// ("zstd": bytes + zstd-3; "raw": bytes only; "transpose": transpose [1,0] + bytes).
ChunkSet MakeChunks(const std::vector<int64_t>& shape, const std::string& codecs) {
  ChunkSet s;
  lsio::ChunkSpec spec;
  spec.shape = shape;
  spec.itemsize = 4;
  spec.swap_unit = 4;
  nlohmann::json j;
  if (codecs == "zstd") j = nlohmann::json::parse(R"(["bytes", {"name": "zstd", "configuration": {"level": 3}}])");
  else if (codecs == "transpose") j = nlohmann::json::parse(R"([{"name": "transpose", "configuration": {"order": [1, 0]}}, "bytes"])");
  else j = nlohmann::json::parse(R"(["bytes"])");
  auto c = lsio::ParseCodecChain(j, spec);
  if (!c.ok()) lsio_bench::Die(c.status().ToString());
  s.chain = std::move(c).value();
  for (int i = 0; i < kFrames; ++i) {
    const std::vector<float> v = lsio_bench::WeatherBox({i, 37 * i, 11 * i}, {1, shape[0], shape[1]});
    s.raw_bytes = v.size() * sizeof(float);
    if (codecs == "zstd") {
      s.frames.push_back(lsio_bench::ZstdFrame(v.data(), s.raw_bytes, 3));
    } else {
      // The stored layout of a transposed chunk is just another float32 block here.
      const auto* p = reinterpret_cast<const uint8_t*>(v.data());
      s.frames.emplace_back(p, p + s.raw_bytes);
    }
    s.stored_bytes += s.frames.back().size();
  }
  return s;
}

void Report(benchmark::State& state, const ChunkSet& s) {
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(s.raw_bytes));
  state.SetItemsProcessed(state.iterations());
  state.counters["ratio"] = static_cast<double>(s.raw_bytes) * kFrames / static_cast<double>(s.stored_bytes);
}

void BM_ChainDecode(benchmark::State& state, std::vector<int64_t> shape, std::string codecs) {
  const ChunkSet s = MakeChunks(shape, codecs);
  std::vector<uint8_t> out(s.raw_bytes);
  lsio::DecodeScratch& scratch = lsio::ThreadDecodeScratch();
  size_t i = 0;
  for (auto _ : state) {
    const Bytes& f = s.frames[i++ % kFrames];
    lsio::Status st = s.chain->Decode(f, out.data(), scratch);
    if (!st.ok()) {
      lsio_bench::Fail(state, st.ToString());
      break;
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  Report(state, s);
}
BENCHMARK_CAPTURE(BM_ChainDecode, zstd_64KiB, std::vector<int64_t>{128, 128}, std::string("zstd"));
BENCHMARK_CAPTURE(BM_ChainDecode, zstd_2KiB, std::vector<int64_t>{16, 32}, std::string("zstd"));
BENCHMARK_CAPTURE(BM_ChainDecode, transpose_64KiB, std::vector<int64_t>{128, 128}, std::string("transpose"));

// The floor under BM_ChainDecode/zstd_*: libzstd alone, one reused context.
void BM_RawZstdDecompress(benchmark::State& state, std::vector<int64_t> shape) {
  const ChunkSet s = MakeChunks(shape, "zstd");
  std::vector<uint8_t> out(s.raw_bytes);
  ZSTD_DCtx* dctx = ZSTD_createDCtx();
  size_t i = 0;
  for (auto _ : state) {
    const Bytes& f = s.frames[i++ % kFrames];
    const size_t n = ZSTD_decompressDCtx(dctx, out.data(), out.size(), f.data(), f.size());
    if (n != out.size()) {
      lsio_bench::Fail(state, "ZSTD_decompressDCtx failed");
      break;
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  ZSTD_freeDCtx(dctx);
  Report(state, s);
}
BENCHMARK_CAPTURE(BM_RawZstdDecompress, zstd_64KiB, std::vector<int64_t>{128, 128});
BENCHMARK_CAPTURE(BM_RawZstdDecompress, zstd_2KiB, std::vector<int64_t>{16, 32});

// A decoded (128,128) float32 chunk into a (1024,1024) float32 output (row stride 4 KiB).
void BM_CopyStrided_ChunkIntoRows(benchmark::State& state) {
  const std::vector<float> src = lsio_bench::WeatherBox({0, 0, 0}, {1, 128, 128});
  std::vector<uint8_t> dst(128 * 1024 * 4);
  const int64_t shape[2] = {128, 128};
  const int64_t src_strides[2] = {128 * 4, 4};
  const int64_t dst_strides[2] = {1024 * 4, 4};
  for (auto _ : state) {
    lsio::CopyStrided(dst.data() + 64 * 4, dst_strides, reinterpret_cast<const uint8_t*>(src.data()), src_strides,
                      shape, 2, 4, 1);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * 128 * 128 * 4);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_CopyStrided_ChunkIntoRows);

// A shard index of 4096 entries (a (1,4096,4096) shard of (1,64,64) chunks), bytes + crc32c.
void BM_DecodeShardIndex_4096(benchmark::State& state) {
  nlohmann::json cfg = {{"chunk_shape", {1, 64, 64}}, {"index_codecs", {"bytes", "crc32c"}}};
  auto sl = lsio::ParseShardLayout(cfg, {1, 4096, 4096});
  if (!sl.ok()) lsio_bench::Die(sl.status().ToString());
  const lsio::ShardLayout& layout = sl.value();
  const uint64_t stored = 64 * 64 * 4 * 100 / 129;
  Bytes index;
  for (uint64_t i = 0; i < layout.num_entries; ++i) {
    const uint64_t e[2] = {i * stored, stored};
    const auto* p = reinterpret_cast<const uint8_t*>(e);
    index.insert(index.end(), p, p + sizeof(e));
  }
  const uint32_t crc = lsio::Crc32c(index.data(), index.size());
  const auto* cb = reinterpret_cast<const uint8_t*>(&crc);
  index.insert(index.end(), cb, cb + 4);
  if (index.size() != layout.index_size) lsio_bench::Die("index size mismatch");
  const uint64_t shard_size = layout.num_entries * stored + index.size();
  for (auto _ : state) {
    auto r = lsio::DecodeShardIndex(index, layout, shard_size);
    if (!r.ok()) {
      lsio_bench::Fail(state, r.status().ToString());
      break;
    }
    benchmark::DoNotOptimize(r.value().data());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(index.size()));
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(layout.num_entries));
}
BENCHMARK(BM_DecodeShardIndex_4096);

void BM_Crc32c(benchmark::State& state) {
  const Bytes data = [&] {
    Bytes b(static_cast<size_t>(state.range(0)));
    for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<uint8_t>(lsio_bench::SplitMix64(i));
    return b;
  }();
  for (auto _ : state) benchmark::DoNotOptimize(lsio::Crc32c(data.data(), data.size()));
  state.SetBytesProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_Crc32c)->Arg(4 << 10)->Arg(64 << 10)->Arg(1 << 20);

}  // namespace
