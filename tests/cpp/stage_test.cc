// Array::StageBoxes (lsio/stage.h, read/stage.h): the device plan of a batch. Its frames hold exactly the
// stored zstd frames (or CPU-decoded chunks), a fill frame stands for missing chunks, and
// performing the plan (decode each frame, run each op) gives what ReadBoxes gives; a staging
// buffer that is too small says how much suffices. Also which chains the GPU may decode.
#include "lsio/stage.h"

#include <zstd.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "codec/chain.h"
#include "lsio/array.h"
#include "test_util.h"
#include "zarr/metadata.h"

namespace lsio {
namespace {

using lsio_test::Bytes;
using lsio_test::TempDir;

// uint16 (6, 10), chunks (2, 4): a 3 x 3 grid; chunk (1, 1) is missing (fill 7).
std::string Json(const std::string& codecs) {
  return R"({"zarr_format": 3, "node_type": "array", "shape": [6, 10], "data_type": "uint16",
    "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2, 4]}},
    "chunk_key_encoding": {"name": "default"}, "fill_value": 7, "codecs": )" + codecs + "}";
}

Bytes Chunk(int r, int c) {
  Bytes b;
  for (int i = 0; i < 8; ++i) lsio_test::PutLE<uint16_t>(b, static_cast<uint16_t>(1000 * r + 100 * c + i));
  return b;
}

Bytes Zstd(const Bytes& raw, bool checksum) {
  ZSTD_CCtx* cx = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(cx, ZSTD_c_checksumFlag, checksum ? 1 : 0);
  Bytes out(ZSTD_compressBound(raw.size()));
  const size_t n = ZSTD_compress2(cx, out.data(), out.size(), raw.data(), raw.size());
  ZSTD_freeCCtx(cx);
  EXPECT_FALSE(ZSTD_isError(n));
  out.resize(n);
  return out;
}

struct Written {
  TempDir dir;
  std::vector<Bytes> stored;  // per chunk, C order of the grid (empty: missing)
};

std::unique_ptr<Written> Write(bool checksum) {
  auto w = std::make_unique<Written>();
  w->dir.Write("zarr.json", Json(R"(["bytes", {"name": "zstd", "configuration": {"level": 1}}])"));
  for (int r = 0; r < 3; ++r) {
    for (int c = 0; c < 3; ++c) {
      Bytes b = (r == 1 && c == 1) ? Bytes{} : Zstd(Chunk(r, c), checksum);
      if (!b.empty()) w->dir.Write("c/" + std::to_string(r) + "/" + std::to_string(c), b);
      w->stored.push_back(b);
    }
  }
  return w;
}

// Performs a plan on the CPU as an executor would (decode area after the staging bytes).
std::vector<uint8_t> Perform(const StagedBatch& p, const std::vector<uint8_t>& staging, size_t out_bytes) {
  const size_t base = (p.staging_used + 255) / 256 * 256;
  std::vector<uint8_t> work(base + p.decoded_bytes);
  std::memcpy(work.data(), staging.data(), p.staging_used);
  const size_t nf = p.frames.size() / kFrameCols;
  std::vector<int64_t> at(nf);
  for (size_t f = 0; f < nf; ++f) {
    const int64_t* row = &p.frames[f * kFrameCols];
    at[f] = row[kFrameStagingOffset];
    if (row[kFrameCodec] != 0) {
      at[f] = static_cast<int64_t>(base) + row[kFrameDecodedOffset];
      Status st = DecodeStagedFrame(row[kFrameCodec],
                                    std::span<const uint8_t>(work.data() + row[kFrameStagingOffset],
                                                             static_cast<size_t>(row[kFrameStoredBytes])),
                                    std::span<uint8_t>(work.data() + at[f], static_cast<size_t>(row[kFrameDecodedBytes])));
      EXPECT_TRUE(st.ok()) << st.ToString();
    }
  }
  std::vector<uint8_t> out(out_bytes, 0xEE);
  for (size_t k = 0; k < p.ops.size() / kOpCols; ++k) {
    const int64_t* o = &p.ops[k * kOpCols];
    for (int64_t i2 = 0; i2 < o[kOpN2]; ++i2) {
      for (int64_t i1 = 0; i1 < o[kOpN1]; ++i1) {
        const int64_t s = at[static_cast<size_t>(o[kOpFrame])] + o[kOpSrcOffset] + i2 * o[kOpSrcStride2] + i1 * o[kOpSrcStride1];
        const int64_t d = o[kOpDstOffset] + i2 * o[kOpDstStride2] + i1 * o[kOpDstStride1];
        EXPECT_LE(static_cast<size_t>(d + o[kOpRunBytes]), out.size());
        std::memcpy(out.data() + d, work.data() + s, static_cast<size_t>(o[kOpRunBytes]));
      }
    }
  }
  return out;
}

// Three (3, 5) crops with origins (0, 0), (2, 3), (3, 5): every chunk row, the missing chunk.
struct Crops {
  std::vector<int64_t> starts{0, 0, 2, 3, 3, 5};
  std::vector<int64_t> counts{3, 5};
  std::vector<int64_t> strides{10, 2};  // bytes of a (3, 5) uint16 crop
  BoxBatch Batch() const {
    BoxBatch b;
    b.ndim = 2;
    b.size = 3;
    b.starts = starts.data();
    b.starts_stride = 2;
    b.counts = counts.data();
    b.dst_strides = strides.data();
    b.dst_box_stride = 30;
    return b;
  }
};

std::vector<uint8_t> ReadCrops(Array& a, const Crops& c) {
  std::vector<uint8_t> out(90);
  BoxBatch b = c.Batch();
  b.dst = out.data();
  Status st = a.ReadBoxes(b);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return out;
}

TEST(StageTest, FramesAreTheStoredBytesAndThePlanReadsAsReadBoxes) {
  auto w = Write(/*checksum=*/false);
  auto a = Array::Open(w->dir.path(), OpenOptions{});
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  Crops c;
  std::vector<uint8_t> staging(4096);
  StagedBatch p;
  ASSERT_TRUE((*a)->StageBoxes(c.Batch(), staging, /*gpu_codecs=*/true, &p).ok());
  ASSERT_EQ(p.needed, 0u);
  EXPECT_EQ(p.max_decoded, 16u);
  const size_t nf = p.frames.size() / kFrameCols;
  size_t fills = 0;
  for (size_t f = 0; f < nf; ++f) {
    const int64_t* row = &p.frames[f * kFrameCols];
    EXPECT_EQ(row[kFrameStagingOffset] % static_cast<int64_t>(kStageAlign), 0);
    if (row[kFrameFile] < 0) {
      ++fills;
      EXPECT_EQ(row[kFrameCodec], 0);
      for (int64_t i = 0; i < 8; ++i) EXPECT_EQ(staging[static_cast<size_t>(row[kFrameStagingOffset] + 2 * i)], 7);
      continue;
    }
    EXPECT_EQ(row[kFrameCodec], static_cast<int64_t>(GpuCodec::kZstd));
    const int64_t r = p.coords[f * 2], col = p.coords[f * 2 + 1];
    const Bytes& want = w->stored[static_cast<size_t>(r * 3 + col)];
    ASSERT_EQ(static_cast<size_t>(row[kFrameStoredBytes]), want.size());
    EXPECT_EQ(0, std::memcmp(staging.data() + row[kFrameStagingOffset], want.data(), want.size()));
  }
  EXPECT_EQ(fills, 1u);
  EXPECT_EQ(Perform(p, staging, 90), ReadCrops(**a, c));
}

TEST(StageTest, ChecksummedFramesAndCpuOnlyPlansAreStagedDecoded) {
  for (bool checksum : {true, false}) {
    auto w = Write(checksum);
    auto a = Array::Open(w->dir.path(), OpenOptions{});
    ASSERT_TRUE(a.ok());
    Crops c;
    std::vector<uint8_t> staging(4096);
    StagedBatch p;
    // With a checksum the GPU never gets the frame; gpu_codecs=false stages every chunk decoded.
    ASSERT_TRUE((*a)->StageBoxes(c.Batch(), staging, /*gpu_codecs=*/checksum, &p).ok());
    for (size_t f = 0; f < p.frames.size() / kFrameCols; ++f) EXPECT_EQ(p.frames[f * kFrameCols + kFrameCodec], 0);
    EXPECT_EQ(p.decoded_bytes, 0u);
    EXPECT_EQ(Perform(p, staging, 90), ReadCrops(**a, c));
  }
}

TEST(StageTest, TooSmallAStagingBufferSaysWhatSuffices) {
  auto w = Write(false);
  auto a = Array::Open(w->dir.path(), OpenOptions{});
  ASSERT_TRUE(a.ok());
  Crops c;
  std::vector<uint8_t> small(32, 0xAB);
  StagedBatch p;
  ASSERT_TRUE((*a)->StageBoxes(c.Batch(), small, true, &p).ok());
  ASSERT_GT(p.needed, small.size());
  EXPECT_TRUE(p.frames.empty() && p.ops.empty());
  std::vector<uint8_t> staging(p.needed);
  StagedBatch q;
  ASSERT_TRUE((*a)->StageBoxes(c.Batch(), staging, true, &q).ok());
  EXPECT_EQ(q.needed, 0u);
  EXPECT_LE(q.staging_used, staging.size());
  EXPECT_EQ(Perform(q, staging, 90), ReadCrops(**a, c));
}

TEST(StageTest, OutOfRangeBoxesAreRefusedBeforeReading) {
  auto w = Write(false);
  auto a = Array::Open(w->dir.path(), OpenOptions{});
  ASSERT_TRUE(a.ok());
  Crops c;
  c.starts = {0, 0, 4, 6, 0, 0};  // (4, 6) + (3, 5) leaves the (6, 10) array
  std::vector<uint8_t> staging(4096);
  StagedBatch p;
  EXPECT_EQ((*a)->StageBoxes(c.Batch(), staging, true, &p).code(), StatusCode::kOutOfRange);
}

TEST(StageTest, OnlyHostOrderChainsOfOneGpuCompressorAreGpuDecodable) {
  const struct {
    const char* codecs;
    GpuCodec want;
  } cases[] = {
      {R"(["bytes", "zstd"])", GpuCodec::kZstd},
      {R"(["bytes", "zstd", "crc32c"])", GpuCodec::kZstd},
      {R"([{"name": "bytes", "configuration": {"endian": "big"}}, "zstd"])", GpuCodec::kNone},
      {R"([{"name": "transpose", "configuration": {"order": [1, 0]}}, "bytes", "zstd"])", GpuCodec::kNone},
      {R"(["bytes", "gzip"])", GpuCodec::kDeflate},
      {R"(["bytes", "gzip", "crc32c"])", GpuCodec::kDeflate},
      {R"(["bytes", {"name": "numcodecs.zlib", "configuration": {"level": 1}}])", GpuCodec::kDeflate},
      {R"([{"name": "bytes", "configuration": {"endian": "big"}}, "gzip"])", GpuCodec::kNone},
      {R"([{"name": "transpose", "configuration": {"order": [1, 0]}}, "bytes", "gzip"])", GpuCodec::kNone},
      {R"(["bytes", "crc32c", "gzip"])", GpuCodec::kNone},
      {R"(["bytes", "gzip", "zstd"])", GpuCodec::kNone},
      {R"(["bytes", {"name": "numcodecs.lz4", "configuration": {"acceleration": 1}}])", GpuCodec::kLz4},
      {R"(["bytes", {"name": "numcodecs.lz4"}, "crc32c"])", GpuCodec::kLz4},
      {R"([{"name": "bytes", "configuration": {"endian": "big"}}, {"name": "numcodecs.lz4"}])", GpuCodec::kNone},
      {R"(["bytes", {"name": "numcodecs.shuffle", "configuration": {"elementsize": 2}}, {"name": "numcodecs.lz4"}])",
       GpuCodec::kNone},
      {R"(["bytes", {"name": "blosc", "configuration": {"cname": "lz4", "clevel": 5, "shuffle": "noshuffle", "typesize": 2}}])",
       GpuCodec::kNone},
      {R"(["bytes"])", GpuCodec::kNone},
      {R"(["bytes", "crc32c", "zstd"])", GpuCodec::kNone},
  };
  for (const auto& k : cases) {
    auto m = ParseArrayMetadata(Json(k.codecs));
    ASSERT_TRUE(m.ok()) << k.codecs << ": " << m.status().ToString();
    ASSERT_NE(m->chain, nullptr);
    EXPECT_EQ(m->chain->gpu_codec(), k.want) << k.codecs;
  }
}

}  // namespace
}  // namespace lsio
