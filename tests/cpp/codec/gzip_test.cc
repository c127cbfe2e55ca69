// gzip specifics: gzip and zlib wrappers, concatenated members, truncation, corrupt
// trailer, wrong sizes and level validation. Also what staged reads make of gzip members
// (GzipGpuFrame: header fields, what is left to the CPU) and their raw deflate decoder
// (InflateRawFrame: exact sizes, trailing bytes, the CRC-32 check). Streams are made with zlib.
#include "codec/gzip.h"

#include <zlib.h>

#include <string>

#include <gtest/gtest.h>

#include "codec/codec_test_util.h"
#include "codec/registry.h"

namespace lsio {
namespace {

using lsio_test::Bytes;
using lsio_test::Concat;
using lsio_test::Decode;
using lsio_test::Deflate;
using lsio_test::ParseChain;
using lsio_test::Spec;

std::unique_ptr<CodecChain> GzipChain(int64_t n) {
  auto c = ParseChain(R"(["bytes", {"name": "gzip", "configuration": {"level": 6}}])", Spec({n}));
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return std::move(c).value();
}

TEST(GzipTest, GzipMemberRoundTrips) {
  const Bytes data = lsio_test::TestData(50000);
  for (int level : {0, 1, 9}) {
    auto out = Decode(*GzipChain(50000), Deflate(data, true, level));
    ASSERT_TRUE(out.ok()) << "level " << level << ": " << out.status().ToString();
    EXPECT_EQ(out.value(), data);
  }
}

TEST(GzipTest, ZlibWrapperIsAcceptedToo) {
  const Bytes data = lsio_test::TestData(777);
  auto out = Decode(*GzipChain(777), Deflate(data, false));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out.value(), data);
}

TEST(GzipTest, ConcatenatedMembersDecodeInOrder) {
  const Bytes a = lsio_test::TestData(1000, 1);
  const Bytes b = lsio_test::TestData(24, 2);
  auto out = Decode(*GzipChain(1024), Concat({Deflate(a), Deflate(b)}));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out.value(), Concat({a, b}));
}

TEST(GzipTest, TruncatedStreamIsDataLoss) {
  const Bytes data = lsio_test::TestData(4000);
  const Bytes enc = Deflate(data);
  for (size_t cut = 0; cut < enc.size(); ++cut) {
    auto out = Decode(*GzipChain(4000), Bytes(enc.begin(), enc.begin() + static_cast<long>(cut)));
    ASSERT_FALSE(out.ok()) << "cut " << cut;
    ASSERT_EQ(out.status().code(), StatusCode::kDataLoss) << out.status().ToString();
  }
  // Cut inside the 8-byte trailer: the data is all there, the stream is not.
  auto trailer = Decode(*GzipChain(4000), Bytes(enc.begin(), enc.end() - 3));
  ASSERT_FALSE(trailer.ok());
  EXPECT_EQ(trailer.status().message(), "gzip: truncated stream");
}

TEST(GzipTest, CorruptTrailerCrcIsDataLoss) {
  const Bytes data = lsio_test::TestData(4000);
  Bytes enc = Deflate(data);
  enc[enc.size() - 8] ^= 0x01;  // first byte of the CRC-32 trailer
  auto out = Decode(*GzipChain(4000), enc);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(out.status().message(), "gzip: corrupt data: incorrect data check");
}

TEST(GzipTest, GarbageIsDataLossWithZlibsMessage) {
  auto out = Decode(*GzipChain(100), lsio_test::FromHex("00 01 02 03 04 05 06 07 08 09"));
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(out.status().message(), "gzip: corrupt data: incorrect header check");
}

TEST(GzipTest, WrongDecodedSizeNamesTheSizes) {
  auto small = Decode(*GzipChain(100), Deflate(lsio_test::TestData(99)));
  ASSERT_FALSE(small.ok());
  EXPECT_EQ(small.status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(small.status().message(), "gzip: chunk decodes to 99 bytes, expected 100");
  auto large = Decode(*GzipChain(100), Deflate(lsio_test::TestData(101)));
  ASSERT_FALSE(large.ok());
  EXPECT_EQ(large.status().message(), "gzip: chunk decodes to more than 100 bytes, expected 100");
}

TEST(GzipTest, LevelIsValidated) {
  for (int level = 0; level <= 9; ++level) {
    EXPECT_TRUE(ParseCodec({{"name", "gzip"}, {"configuration", {{"level", level}}}}).ok()) << level;
  }
  EXPECT_TRUE(ParseCodec(nlohmann::json("gzip")).ok());
  for (const char* bad : {R"({"level": 10})", R"({"level": -1})", R"({"level": "5"})", R"({"level": 5.5})"}) {
    auto c = ParseCodec({{"name", "gzip"}, {"configuration", nlohmann::json::parse(bad)}});
    ASSERT_FALSE(c.ok()) << bad;
    EXPECT_EQ(c.status().code(), StatusCode::kInvalidFormat);
    EXPECT_EQ(c.status().message(), "gzip codec: \"level\" must be an integer in 0..9");
  }
}

// A gzip member with every optional header field zlib can write.
Bytes GzipWithFields(const Bytes& data, std::string* extra, std::string* name, std::string* comment) {
  *extra = std::string("XYab\0\1z", 7);  // any bytes, zeros included
  *name = "chunk.bin";
  *comment = "written by a test";
  gz_header h{};
  h.extra = reinterpret_cast<Bytef*>(extra->data());
  h.extra_len = static_cast<uInt>(extra->size());
  h.name = reinterpret_cast<Bytef*>(name->data());
  h.comment = reinterpret_cast<Bytef*>(comment->data());
  h.hcrc = 1;
  return lsio_test::DeflateBits(data, 15 + 16, &h);
}

uint32_t Crc32(const Bytes& b) { return static_cast<uint32_t>(crc32(0L, b.data(), static_cast<uInt>(b.size()))); }

Bytes RawDeflate(const Bytes& data) { return lsio_test::DeflateBits(data, -15); }

TEST(GzipGpuFrameTest, APlainMemberGivesItsDeflateBodyAndTrailerCrc) {
  const Bytes data = lsio_test::TestData(5000);
  const Bytes enc = Deflate(data);
  std::span<const uint8_t> body;
  uint32_t crc = 0;
  ASSERT_TRUE(GzipGpuFrame(enc, data.size(), &body, &crc));
  EXPECT_EQ(body.data(), enc.data() + 10);  // no optional fields: a 10-byte header
  EXPECT_EQ(body.size(), enc.size() - 18);
  EXPECT_EQ(crc, Crc32(data));
  Bytes out(data.size());
  ASSERT_TRUE(InflateRawFrame(body, out, crc).ok());
  EXPECT_EQ(out, data);
}

TEST(GzipGpuFrameTest, OptionalHeaderFieldsAreSkipped) {
  const Bytes data = lsio_test::TestData(3000, 5);
  std::string extra, name, comment;
  const Bytes enc = GzipWithFields(data, &extra, &name, &comment);
  ASSERT_EQ(enc[3], 0x02 | 0x04 | 0x08 | 0x10);  // FHCRC FEXTRA FNAME FCOMMENT
  const size_t header = 10 + 2 + extra.size() + name.size() + 1 + comment.size() + 1 + 2;
  std::span<const uint8_t> body;
  uint32_t crc = 0;
  ASSERT_TRUE(GzipGpuFrame(enc, data.size(), &body, &crc));
  EXPECT_EQ(body.data(), enc.data() + header);
  EXPECT_EQ(body.size(), enc.size() - header - 8);
  EXPECT_EQ(crc, Crc32(data));
  Bytes out(data.size());
  ASSERT_TRUE(InflateRawFrame(body, out, crc).ok());
  EXPECT_EQ(out, data);

  // The header's own CRC-16 is checked (zlib checks it on the CPU path, which reports it).
  Bytes bad_hcrc = enc;
  bad_hcrc[header - 1] ^= 0x40;
  EXPECT_FALSE(GzipGpuFrame(bad_hcrc, data.size(), &body, &crc));
  // Every cut inside the header's fields leaves no member to hand over.
  for (size_t cut = 0; cut < header + 1; ++cut) {
    Bytes b(enc.begin(), enc.begin() + static_cast<long>(cut));
    EXPECT_FALSE(GzipGpuFrame(b, data.size(), &body, &crc)) << cut;
  }
  // An extra field longer than the member runs out of bytes.
  Bytes long_extra = enc;
  long_extra[10] = 0xff;
  long_extra[11] = 0xff;
  EXPECT_FALSE(GzipGpuFrame(long_extra, data.size(), &body, &crc));
}

TEST(GzipGpuFrameTest, EverythingElseIsLeftToTheCpu) {
  const Bytes data = lsio_test::TestData(2000, 3);
  const Bytes enc = Deflate(data);
  std::span<const uint8_t> body;
  uint32_t crc = 0;
  // A zlib wrapper: its adler32 cannot be checked on the GPU.
  EXPECT_FALSE(GzipGpuFrame(Deflate(data, false), data.size(), &body, &crc));
  // Two members: the trailer's ISIZE is the last member's.
  EXPECT_FALSE(GzipGpuFrame(Concat({Deflate(Bytes(data.begin(), data.begin() + 1000)),
                                    Deflate(Bytes(data.begin() + 1000, data.end()))}),
                            data.size(), &body, &crc));
  // ISIZE other than the chunk's size; a chunk of 2^32 bytes or more.
  EXPECT_FALSE(GzipGpuFrame(enc, data.size() + 1, &body, &crc));
  EXPECT_FALSE(GzipGpuFrame(enc, data.size() + (uint64_t{1} << 32), &body, &crc));
  // Another compression method, reserved flags, a wrong magic.
  for (size_t at : {size_t{0}, size_t{1}, size_t{2}}) {
    Bytes b = enc;
    b[at] ^= 0x01;
    EXPECT_FALSE(GzipGpuFrame(b, data.size(), &body, &crc)) << at;
  }
  for (uint8_t flag : {0x20, 0x40, 0x80}) {
    Bytes b = enc;
    b[3] |= flag;
    EXPECT_FALSE(GzipGpuFrame(b, data.size(), &body, &crc)) << int{flag};
  }
  // FNAME announced with no terminating zero before the trailer.
  Bytes unterminated(enc.begin(), enc.begin() + 10);
  unterminated[3] = 0x08;
  unterminated.insert(unterminated.end(), 12, 'a');
  EXPECT_FALSE(GzipGpuFrame(unterminated, 12, &body, &crc));
  // An empty deflate body: header and trailer only.
  Bytes empty(enc.begin(), enc.begin() + 10);
  empty.insert(empty.end(), enc.end() - 8, enc.end());
  EXPECT_FALSE(GzipGpuFrame(empty, data.size(), &body, &crc));
}

TEST(InflateRawFrameTest, ExactSizeNoTrailingBytesAndTheCrc) {
  const Bytes data = lsio_test::TestData(4000, 9);
  const Bytes raw = RawDeflate(data);
  const int64_t crc = Crc32(data);
  Bytes out(data.size());
  ASSERT_TRUE(InflateRawFrame(raw, out, crc).ok());
  EXPECT_EQ(out, data);
  ASSERT_TRUE(InflateRawFrame(raw, out, -1).ok());  // no check asked for

  Bytes bigger(data.size() + 1), smaller(data.size() - 1);
  Status st = InflateRawFrame(raw, bigger, -1);
  EXPECT_EQ(st.code(), StatusCode::kDataLoss);
  EXPECT_EQ(st.message(), "deflate: frame decodes to 4000 bytes, expected 4001");
  st = InflateRawFrame(raw, smaller, -1);
  EXPECT_EQ(st.code(), StatusCode::kDataLoss);
  EXPECT_EQ(st.message(), "deflate: frame decodes to more than 3999 bytes");

  st = InflateRawFrame(raw, out, crc ^ 1);
  EXPECT_EQ(st.code(), StatusCode::kDataLoss);
  EXPECT_EQ(st.message(), "gzip: CRC-32 mismatch");

  Bytes trailing = raw;
  trailing.push_back(0);
  st = InflateRawFrame(trailing, out, crc);
  EXPECT_EQ(st.code(), StatusCode::kDataLoss);
  EXPECT_EQ(st.message(), "deflate: 1 bytes after the final block");

  st = InflateRawFrame(std::span<const uint8_t>(raw.data(), raw.size() - 3), out, crc);
  EXPECT_EQ(st.code(), StatusCode::kDataLoss);
  EXPECT_EQ(st.message(), "deflate: truncated stream");

  const Bytes garbage(100, 0xff);  // block type 3 is reserved
  st = InflateRawFrame(garbage, out, crc);
  EXPECT_EQ(st.code(), StatusCode::kDataLoss);
  EXPECT_EQ(st.message(), "deflate: corrupt data: invalid block type");
}

}  // namespace
}  // namespace lsio
