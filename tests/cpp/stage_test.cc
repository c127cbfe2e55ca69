// Array::StageBoxes (lsio/stage.h, read/stage.h): the device plan of a batch. Its frames hold exactly the
// stored zstd frames, the raw deflate bodies of gzip members (with their CRC-32 to check) and
// the raw blocks of numcodecs lz4 chunks (or CPU-decoded chunks), a fill frame stands for
// missing chunks, and performing the plan (decode each frame, run each op) gives what
// ReadBoxes gives; a staging buffer that is too small says how much suffices. Also which
// chains the GPU may decode, and DecodeStagedFrame's checks.
#include "lsio/stage.h"

#include <lz4.h>
#include <zlib.h>
#include <zstd.h>

#include <functional>

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

// The array of Json(codecs), every chunk but (1, 1) stored as encode(its raw bytes).
std::unique_ptr<Written> WriteWith(const std::string& codecs, const std::function<Bytes(const Bytes&)>& encode) {
  auto w = std::make_unique<Written>();
  w->dir.Write("zarr.json", Json(codecs));
  for (int r = 0; r < 3; ++r) {
    for (int c = 0; c < 3; ++c) {
      Bytes b = (r == 1 && c == 1) ? Bytes{} : encode(Chunk(r, c));
      if (!b.empty()) w->dir.Write("c/" + std::to_string(r) + "/" + std::to_string(c), b);
      w->stored.push_back(b);
    }
  }
  return w;
}

std::unique_ptr<Written> Write(bool checksum) {
  return WriteWith(R"(["bytes", {"name": "zstd", "configuration": {"level": 1}}])",
                   [&](const Bytes& raw) { return Zstd(raw, checksum); });
}

// zlib's deflate with windowBits `bits` (15 + 16: gzip, 15: zlib, -15: raw); `header` adds
// the optional gzip header fields.
Bytes Deflate(const Bytes& raw, int bits, gz_header* header = nullptr) { return lsio_test::DeflateBits(raw, bits, header); }

// numcodecs' lz4: the 4-byte little-endian size, then one raw block.
Bytes Lz4(const Bytes& raw) {
  Bytes out;
  lsio_test::PutLE<uint32_t>(out, static_cast<uint32_t>(raw.size()));
  out.resize(4 + static_cast<size_t>(LZ4_compressBound(static_cast<int>(raw.size()))));
  const int n = LZ4_compress_default(reinterpret_cast<const char*>(raw.data()), reinterpret_cast<char*>(out.data() + 4),
                                     static_cast<int>(raw.size()), static_cast<int>(out.size() - 4));
  EXPECT_GT(n, 0);
  out.resize(4 + static_cast<size_t>(n));
  return out;
}

uint32_t Crc32(const Bytes& b) { return static_cast<uint32_t>(crc32(0L, b.data(), static_cast<uInt>(b.size()))); }

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
                                    std::span<uint8_t>(work.data() + at[f], static_cast<size_t>(row[kFrameDecodedBytes])),
                                    row[kFrameCheck]);
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

// Stages the three crops of `w`; every chunk read must become a frame of `codec` whose bytes
// are `frame_of(stored)` (kNone: the decoded chunk) and whose check is `check_of(decoded
// chunk)`, and the plan must read as ReadBoxes does.
void ExpectFrames(const Written& w, GpuCodec codec, const std::function<Bytes(const Bytes&)>& frame_of,
                  const std::function<int64_t(const Bytes&)>& check_of) {
  auto a = Array::Open(w.dir.path(), OpenOptions{});
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  Crops c;
  std::vector<uint8_t> staging(4096);
  StagedBatch p;
  Status st = (*a)->StageBoxes(c.Batch(), staging, /*gpu_codecs=*/true, &p);
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_EQ(p.needed, 0u);
  const size_t nf = p.frames.size() / kFrameCols;
  size_t chunks = 0;
  for (size_t f = 0; f < nf; ++f) {
    const int64_t* row = &p.frames[f * kFrameCols];
    if (row[kFrameFile] < 0) {
      EXPECT_EQ(row[kFrameCheck], -1);
      continue;
    }
    ++chunks;
    const int64_t r = p.coords[f * 2], col = p.coords[f * 2 + 1];
    EXPECT_EQ(row[kFrameCodec], static_cast<int64_t>(codec)) << r << "," << col;
    const Bytes want = codec == GpuCodec::kNone ? Chunk(static_cast<int>(r), static_cast<int>(col))
                                                : frame_of(w.stored[static_cast<size_t>(r * 3 + col)]);
    ASSERT_EQ(static_cast<size_t>(row[kFrameStoredBytes]), want.size());
    EXPECT_EQ(0, std::memcmp(staging.data() + row[kFrameStagingOffset], want.data(), want.size()));
    EXPECT_EQ(row[kFrameCheck], check_of(Chunk(static_cast<int>(r), static_cast<int>(col))));
  }
  EXPECT_EQ(chunks, 7u);  // the crops touch 7 of the 8 stored chunks
  EXPECT_EQ(Perform(p, staging, 90), ReadCrops(**a, c));
}

int64_t NoCheck(const Bytes&) { return -1; }
Bytes Same(const Bytes& b) { return b; }

TEST(StageTest, GzipMembersAreStagedAsDeflateBodiesWithTheirCrc) {
  auto w = WriteWith(R"(["bytes", {"name": "gzip", "configuration": {"level": 6}}])",
                     [](const Bytes& raw) { return Deflate(raw, 15 + 16); });
  ExpectFrames(
      *w, GpuCodec::kDeflate, [](const Bytes& b) { return Bytes(b.begin() + 10, b.end() - 8); },
      [](const Bytes& raw) { return static_cast<int64_t>(Crc32(raw)); });
}

TEST(StageTest, GzipHeaderFieldsAreSkippedAndACrc32cIsStripped) {
  std::string extra("e\0x\1tra", 7), name = "c.bin", comment = "hi";
  gz_header h{};
  h.extra = reinterpret_cast<Bytef*>(extra.data());
  h.extra_len = static_cast<uInt>(extra.size());
  h.name = reinterpret_cast<Bytef*>(name.data());
  h.comment = reinterpret_cast<Bytef*>(comment.data());
  h.hcrc = 1;
  const size_t header = 10 + 2 + extra.size() + name.size() + 1 + comment.size() + 1 + 2;
  auto w = WriteWith(R"(["bytes", "gzip", "crc32c"])",
                     [&](const Bytes& raw) { return lsio_test::WithCrc(Deflate(raw, 15 + 16, &h)); });
  ExpectFrames(
      *w, GpuCodec::kDeflate, [&](const Bytes& b) { return Bytes(b.begin() + static_cast<long>(header), b.end() - 12); },
      [](const Bytes& raw) { return static_cast<int64_t>(Crc32(raw)); });
}

TEST(StageTest, ZlibWrappedChunksAreDecodedByTheCpu) {
  // Their adler32 has no GPU decoder to check it: raw frames, the decoded chunk.
  auto w = WriteWith(R"(["bytes", "gzip"])", [](const Bytes& raw) { return Deflate(raw, 15); });
  ExpectFrames(*w, GpuCodec::kNone, Same, NoCheck);
}

TEST(StageTest, Lz4ChunksAreStagedAsRawBlocks) {
  auto w = WriteWith(R"(["bytes", {"name": "numcodecs.lz4", "configuration": {"acceleration": 1}}])", Lz4);
  ExpectFrames(*w, GpuCodec::kLz4, [](const Bytes& b) { return Bytes(b.begin() + 4, b.end()); }, NoCheck);
  // Under crc32c, verified and stripped.
  auto c = WriteWith(R"(["bytes", {"name": "numcodecs.lz4"}, "crc32c"])",
                     [](const Bytes& raw) { return lsio_test::WithCrc(Lz4(raw)); });
  ExpectFrames(*c, GpuCodec::kLz4, [](const Bytes& b) { return Bytes(b.begin() + 4, b.end() - 4); }, NoCheck);
}

TEST(StageTest, OddChunksOfGpuChainsAreDecodedByTheCpu) {
  // Chunk (0, 0) alone is two gzip members (its trailer's ISIZE is the second one's): it is a
  // raw frame the CPU decoded, the others stay GPU frames.
  auto w = WriteWith(R"(["bytes", "gzip"])", [](const Bytes& raw) {
    if (raw == Chunk(0, 0)) {
      return lsio_test::Concat({Deflate(Bytes(raw.begin(), raw.begin() + 6), 31), Deflate(Bytes(raw.begin() + 6, raw.end()), 31)});
    }
    return Deflate(raw, 31);
  });
  auto a = Array::Open(w->dir.path(), OpenOptions{});
  ASSERT_TRUE(a.ok());
  Crops c;
  std::vector<uint8_t> staging(4096);
  StagedBatch p;
  ASSERT_TRUE((*a)->StageBoxes(c.Batch(), staging, true, &p).ok());
  size_t raw = 0, deflate = 0;
  for (size_t f = 0; f < p.frames.size() / kFrameCols; ++f) {
    const int64_t* row = &p.frames[f * kFrameCols];
    if (row[kFrameFile] < 0) continue;
    const bool first = p.coords[f * 2] == 0 && p.coords[f * 2 + 1] == 0;
    EXPECT_EQ(row[kFrameCodec], static_cast<int64_t>(first ? GpuCodec::kNone : GpuCodec::kDeflate));
    EXPECT_EQ(row[kFrameCheck], first ? -1 : static_cast<int64_t>(Crc32(Chunk(static_cast<int>(p.coords[f * 2]),
                                                                               static_cast<int>(p.coords[f * 2 + 1])))));
    (first ? raw : deflate) += 1;
  }
  EXPECT_EQ(raw, 1u);
  EXPECT_EQ(deflate, 6u);
  EXPECT_EQ(Perform(p, staging, 90), ReadCrops(**a, c));
}

TEST(StageTest, DecodeStagedFrameChecksDeflateFrames) {
  const Bytes raw = lsio_test::PatternBytes(5000, 4);
  const Bytes body = Deflate(raw, -15);
  const int64_t crc = Crc32(raw);
  Bytes out(raw.size());
  const int64_t kDeflate = static_cast<int64_t>(GpuCodec::kDeflate);
  ASSERT_TRUE(DecodeStagedFrame(kDeflate, body, out, crc).ok());
  EXPECT_EQ(out, raw);
  ASSERT_TRUE(DecodeStagedFrame(kDeflate, body, out).ok());  // check -1: none

  Bytes bigger(raw.size() + 16), smaller(raw.size() - 16);
  EXPECT_EQ(DecodeStagedFrame(kDeflate, body, bigger, -1).code(), StatusCode::kDataLoss);
  EXPECT_EQ(DecodeStagedFrame(kDeflate, body, smaller, -1).code(), StatusCode::kDataLoss);
  Status st = DecodeStagedFrame(kDeflate, body, out, crc ^ 0x80000000);
  EXPECT_EQ(st.code(), StatusCode::kDataLoss);
  EXPECT_EQ(st.message(), "gzip: CRC-32 mismatch");
  // Bytes after the final block: e.g. a second gzip member behind a first, empty one.
  const Bytes trailing = lsio_test::Concat({body, Deflate(raw, 31)});
  st = DecodeStagedFrame(kDeflate, trailing, out, crc);
  EXPECT_EQ(st.code(), StatusCode::kDataLoss);
  EXPECT_NE(st.message().find("after the final block"), std::string::npos) << st.message();
}

TEST(StageTest, DecodeStagedFrameDecodesLz4BlocksExactly) {
  Bytes raw(3000);  // compressible: the block holds matches, not only literals
  for (size_t i = 0; i < raw.size(); ++i) raw[i] = static_cast<uint8_t>((i * 7) % 13 + i / 64);
  const Bytes frame = Lz4(raw);
  const std::span<const uint8_t> block(frame.data() + 4, frame.size() - 4);
  const int64_t kLz4 = static_cast<int64_t>(GpuCodec::kLz4);
  Bytes out(raw.size());
  ASSERT_TRUE(DecodeStagedFrame(kLz4, block, out).ok());
  EXPECT_EQ(out, raw);
  Bytes corrupt(block.begin(), block.end());
  for (size_t i = 0; i < corrupt.size(); i += 3) corrupt[i] = 0xFF;
  EXPECT_EQ(DecodeStagedFrame(kLz4, corrupt, out).code(), StatusCode::kDataLoss);
  EXPECT_EQ(DecodeStagedFrame(kLz4, block.first(block.size() - 5), out).code(), StatusCode::kDataLoss);
  Bytes bigger(raw.size() + 1);
  EXPECT_EQ(DecodeStagedFrame(kLz4, block, bigger).code(), StatusCode::kDataLoss);
  EXPECT_EQ(DecodeStagedFrame(7, block, out).code(), StatusCode::kInvalidArgument);
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
