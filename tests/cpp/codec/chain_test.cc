// CodecChain: preparation (validation of the list, shape threading, sizes, the
// stored-is-decoded flag) and decoding through `bytes` (both endians, complex swap units)
// and `transpose` (permutations, "C"/"F", composition), plus malformed codec lists.
#include "codec/chain.h"

#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "codec/codec_test_util.h"
#include "codec/registry.h"

namespace lsio {
namespace {

using lsio_test::Bytes;
using lsio_test::Decode;
using lsio_test::ParseChain;
using lsio_test::Spec;

template <typename T>
Bytes AsBytes(const std::vector<T>& v) {
  Bytes b(v.size() * sizeof(T));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// Reference transpose encoder (zarr spec): encoded[b] = decoded[a] with b[i] = a[order[i]].
Bytes TransposeEncode(const Bytes& decoded, const std::vector<int64_t>& shape, const std::vector<int>& order,
                      size_t itemsize) {
  const size_t n = shape.size();
  std::vector<int64_t> enc_shape(n);
  for (size_t i = 0; i < n; ++i) enc_shape[i] = shape[static_cast<size_t>(order[i])];
  Bytes out(decoded.size());
  std::vector<int64_t> a(n, 0);
  const size_t total = decoded.size() / itemsize;
  for (size_t lin = 0; lin < total; ++lin) {
    size_t rem = lin;
    for (size_t d = n; d-- > 0;) {
      a[d] = static_cast<int64_t>(rem % static_cast<size_t>(shape[d]));
      rem /= static_cast<size_t>(shape[d]);
    }
    size_t blin = 0;
    for (size_t i = 0; i < n; ++i) blin = blin * static_cast<size_t>(enc_shape[i]) + static_cast<size_t>(a[static_cast<size_t>(order[i])]);
    std::memcpy(out.data() + blin * itemsize, decoded.data() + lin * itemsize, itemsize);
  }
  return out;
}

Bytes SwapEach(Bytes b, size_t unit) {
  for (size_t i = 0; i + unit <= b.size(); i += unit) std::reverse(b.begin() + static_cast<long>(i), b.begin() + static_cast<long>(i + unit));
  return b;
}

std::string OrderJson(const std::vector<int>& order) {
  std::string s = "[";
  for (size_t i = 0; i < order.size(); ++i) s += (i ? ", " : "") + std::to_string(order[i]);
  return s + "]";
}

// ---- bytes ----

TEST(BytesCodecTest, LittleEndianIsStoredAsDecoded) {
  auto c = ParseChain(R"([{"name": "bytes", "configuration": {"endian": "little"}}])", Spec({3}, 4));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE((*c)->stored_is_decoded());
  EXPECT_EQ((*c)->FixedEncodedSize(), 12u);
  EXPECT_EQ((*c)->description(), "bytes");
  const Bytes in = AsBytes(std::vector<uint32_t>{1, 0xDEADBEEF, 3});
  auto out = Decode(**c, in);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out.value(), in);
}

TEST(BytesCodecTest, DecodesInPlaceWhenStoredIsDecoded) {
  auto c = ParseChain(R"(["bytes"])", Spec({4}, 2));
  ASSERT_TRUE(c.ok());
  Bytes buf = AsBytes(std::vector<uint16_t>{1, 2, 3, 4});
  const Bytes want = buf;
  ASSERT_TRUE((*c)->Decode(std::span<const uint8_t>(buf.data(), buf.size()), buf.data(), ThreadDecodeScratch()).ok());
  EXPECT_EQ(buf, want);
}

TEST(BytesCodecTest, BigEndianIsSwappedPerElement) {
  struct Case {
    size_t itemsize;
    size_t swap_unit;
  };
  for (const Case& k : {Case{2, 2}, Case{4, 4}, Case{8, 8}}) {
    auto c = ParseChain(R"([{"name": "bytes", "configuration": {"endian": "big"}}])", Spec({5}, k.itemsize));
    ASSERT_TRUE(c.ok());
    EXPECT_FALSE((*c)->stored_is_decoded());
    EXPECT_EQ((*c)->description(), "bytes(big)");
    const Bytes native = lsio_test::PatternBytes(5 * k.itemsize, k.itemsize);
    auto out = Decode(**c, SwapEach(native, k.swap_unit));
    ASSERT_TRUE(out.ok());
    EXPECT_EQ(out.value(), native) << "itemsize " << k.itemsize;
  }
}

TEST(BytesCodecTest, BigEndianValuesAreExact) {
  auto c = ParseChain(R"([{"name": "bytes", "configuration": {"endian": "big"}}])", Spec({2}, 4));
  ASSERT_TRUE(c.ok());
  auto out = Decode(**c, lsio_test::FromHex("3f 80 00 00  c0 49 0f db"));  // 1.0f, -pi
  ASSERT_TRUE(out.ok());
  float f[2];
  std::memcpy(f, out.value().data(), 8);
  EXPECT_EQ(f[0], 1.0f);
  EXPECT_EQ(f[1], -3.14159274101257324f);
}

TEST(BytesCodecTest, BigEndianComplexSwapsEachComponent) {
  // complex64: itemsize 8, two float32 components swapped separately (not as one u64).
  auto c64 = ParseChain(R"([{"name": "bytes", "configuration": {"endian": "big"}}])", Spec({2}, 8, 4));
  ASSERT_TRUE(c64.ok());
  const std::vector<float> want64 = {1.0f, -2.0f, 0.5f, 4.0f};
  auto out64 = Decode(**c64, SwapEach(AsBytes(want64), 4));
  ASSERT_TRUE(out64.ok());
  EXPECT_EQ(out64.value(), AsBytes(want64));
  // complex128: itemsize 16, swap unit 8.
  auto c128 = ParseChain(R"([{"name": "bytes", "configuration": {"endian": "big"}}])", Spec({2}, 16, 8));
  ASSERT_TRUE(c128.ok());
  const std::vector<double> want128 = {1.0, -2.0, 1e300, -0.0};
  auto out128 = Decode(**c128, SwapEach(AsBytes(want128), 8));
  ASSERT_TRUE(out128.ok());
  EXPECT_EQ(out128.value(), AsBytes(want128));
}

TEST(BytesCodecTest, BigEndianOneByteTypeNeedsNoSwap) {
  auto c = ParseChain(R"([{"name": "bytes", "configuration": {"endian": "big"}}])", Spec({4}, 1, 1));
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE((*c)->stored_is_decoded());
}

TEST(BytesCodecTest, EndianAliasAndShortHandsAreAccepted) {
  for (const char* codecs : {R"([{"name": "endian", "configuration": {"endian": "big"}}])",
                             R"([{"name": "bytes", "configuration": {"endian": "big"}, "must_understand": true}])"}) {
    auto c = ParseChain(codecs, Spec({2}, 2));
    ASSERT_TRUE(c.ok()) << codecs << ": " << c.status().ToString();
    auto out = Decode(**c, lsio_test::FromHex("01 02 03 04"));
    ASSERT_TRUE(out.ok());
    EXPECT_EQ(out.value(), lsio_test::FromHex("02 01 04 03")) << codecs;
  }
  for (const char* codecs : {R"(["bytes"])", R"([{"name": "bytes"}])", R"([{"name": "bytes", "configuration": null}])",
                             R"([{"name": "bytes", "configuration": {}}])",
                             R"([{"name": "bytes", "configuration": {"endian": null}}])"}) {
    auto c = ParseChain(codecs, Spec({2}, 2));
    ASSERT_TRUE(c.ok()) << codecs << ": " << c.status().ToString();
    EXPECT_TRUE((*c)->stored_is_decoded()) << codecs << " (no endian: little assumed)";
  }
}

// ---- transpose ----

TEST(TransposeCodecTest, TwoDimensionalTransposeDecodes) {
  // Decoded [2,3] uint16; order [1,0]: stored as its [3,2] transpose (Fortran order).
  auto c = ParseChain(R"([{"name": "transpose", "configuration": {"order": [1, 0]}}, "bytes"])", Spec({2, 3}, 2));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_FALSE((*c)->stored_is_decoded());
  EXPECT_EQ((*c)->description(), "transpose, bytes");
  auto out = Decode(**c, AsBytes(std::vector<uint16_t>{0, 3, 1, 4, 2, 5}));
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out.value(), AsBytes(std::vector<uint16_t>{0, 1, 2, 3, 4, 5}));
}

TEST(TransposeCodecTest, EveryThreeDimensionalPermutationMatchesTheReference) {
  const std::vector<int64_t> shape = {2, 3, 4};
  const Bytes decoded = lsio_test::PatternBytes(24 * 4, 21);
  std::vector<int> order = {0, 1, 2};
  do {
    auto c = ParseChain(R"([{"name": "transpose", "configuration": {"order": )" + OrderJson(order) + R"(}}, "bytes"])",
                        Spec(shape, 4));
    ASSERT_TRUE(c.ok()) << OrderJson(order) << ": " << c.status().ToString();
    EXPECT_EQ((*c)->stored_is_decoded(), order == std::vector<int>({0, 1, 2}));
    auto out = Decode(**c, TransposeEncode(decoded, shape, order, 4));
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    EXPECT_EQ(out.value(), decoded) << "order " << OrderJson(order);
  } while (std::next_permutation(order.begin(), order.end()));
}

TEST(TransposeCodecTest, StringOrdersCAndF) {
  const std::vector<int64_t> shape = {2, 3, 4};
  const Bytes decoded = lsio_test::PatternBytes(24 * 2, 22);
  auto c = ParseChain(R"([{"name": "transpose", "configuration": {"order": "C"}}, "bytes"])", Spec(shape, 2));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE((*c)->stored_is_decoded()) << "\"C\" is the identity";
  auto out_c = Decode(**c, decoded);
  ASSERT_TRUE(out_c.ok());
  EXPECT_EQ(out_c.value(), decoded);

  auto f = ParseChain(R"([{"name": "transpose", "configuration": {"order": "F"}}, "bytes"])", Spec(shape, 2));
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_FALSE((*f)->stored_is_decoded());
  auto out_f = Decode(**f, TransposeEncode(decoded, shape, {2, 1, 0}, 2));
  ASSERT_TRUE(out_f.ok());
  EXPECT_EQ(out_f.value(), decoded) << "\"F\" is the reversal";
}

TEST(TransposeCodecTest, ConsecutiveTransposesCompose) {
  const std::vector<int64_t> shape = {2, 3, 4};
  const Bytes decoded = lsio_test::PatternBytes(24, 23);
  const std::vector<int> o1 = {1, 2, 0};
  const std::vector<int> o2 = {2, 0, 1};
  std::vector<int64_t> shape1 = {shape[1], shape[2], shape[0]};
  const Bytes stored = TransposeEncode(TransposeEncode(decoded, shape, o1, 1), shape1, o2, 1);
  auto c = ParseChain(R"([{"name": "transpose", "configuration": {"order": [1, 2, 0]}},
                          {"name": "transpose", "configuration": {"order": [2, 0, 1]}}, "bytes"])",
                      Spec(shape, 1));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE((*c)->stored_is_decoded()) << "[1,2,0] then [2,0,1] is the identity";
  auto out = Decode(**c, stored);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out.value(), decoded);

  auto c2 = ParseChain(R"([{"name": "transpose", "configuration": {"order": [1, 2, 0]}},
                           {"name": "transpose", "configuration": {"order": [1, 2, 0]}}, "bytes"])",
                       Spec(shape, 1));
  ASSERT_TRUE(c2.ok());
  const Bytes stored2 = TransposeEncode(TransposeEncode(decoded, shape, o1, 1), shape1, o1, 1);
  auto out2 = Decode(**c2, stored2);
  ASSERT_TRUE(out2.ok());
  EXPECT_EQ(out2.value(), decoded);
}

TEST(TransposeCodecTest, TransposeWithBigEndianAndZstdAndCrc) {
  const std::vector<int64_t> shape = {3, 5};
  std::vector<uint32_t> vals(15);
  for (uint32_t i = 0; i < 15; ++i) vals[i] = 0x01020300u + i;
  const Bytes decoded = AsBytes(vals);
  const Bytes stored = lsio_test::WithCrc(lsio_test::ZstdCompress(SwapEach(TransposeEncode(decoded, shape, {1, 0}, 4), 4)));
  auto c = ParseChain(R"([{"name": "transpose", "configuration": {"order": [1, 0]}},
                          {"name": "bytes", "configuration": {"endian": "big"}}, "zstd", "crc32c"])",
                      Spec(shape, 4));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ((*c)->description(), "transpose, bytes(big), zstd, crc32c");
  auto out = Decode(**c, stored);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out.value(), decoded);
}

TEST(TransposeCodecTest, ComplexBigEndianTransposeSwapsComponents) {
  const std::vector<int64_t> shape = {2, 2};
  const std::vector<float> vals = {1, 2, 3, 4, 5, 6, 7, 8};  // 4 complex64
  const Bytes decoded = AsBytes(vals);
  const Bytes stored = SwapEach(TransposeEncode(decoded, shape, {1, 0}, 8), 4);
  auto c = ParseChain(R"([{"name": "transpose", "configuration": {"order": [1, 0]}},
                          {"name": "bytes", "configuration": {"endian": "big"}}])",
                      Spec(shape, 8, 4));
  ASSERT_TRUE(c.ok());
  auto out = Decode(**c, stored);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out.value(), decoded);
}

// ---- malformed lists ----

struct BadChain {
  const char* json;
  StatusCode code;
  const char* message;
};

class MalformedChainTest : public testing::TestWithParam<BadChain> {};

TEST_P(MalformedChainTest, IsRefusedWithTheRightCodeAndMessage) {
  const BadChain& b = GetParam();
  auto c = ParseChain(b.json, Spec({2, 3}, 2));
  ASSERT_FALSE(c.ok()) << b.json;
  EXPECT_EQ(c.status().code(), b.code) << b.json << ": " << c.status().ToString();
  EXPECT_EQ(c.status().message(), b.message) << b.json;
}

INSTANTIATE_TEST_SUITE_P(
    Lists, MalformedChainTest,
    testing::Values(
        BadChain{R"({"name": "bytes"})", StatusCode::kInvalidFormat, "\"codecs\" must be a list"},
        BadChain{R"([])", StatusCode::kInvalidFormat, "\"codecs\" must not be empty"},
        BadChain{R"(["zstd"])", StatusCode::kInvalidFormat,
                 "codec 'zstd' (bytes -> bytes) before the array -> bytes codec"},
        BadChain{R"([{"name": "transpose", "configuration": {"order": [1, 0]}}])", StatusCode::kInvalidFormat,
                 "codecs lack an array -> bytes codec (e.g. \"bytes\")"},
        BadChain{R"(["bytes", "bytes"])", StatusCode::kInvalidFormat, "more than one array -> bytes codec"},
        BadChain{R"(["bytes", {"name": "transpose", "configuration": {"order": [1, 0]}}])",
                 StatusCode::kInvalidFormat, "codec 'transpose' (array -> array) after the array -> bytes codec"},
        BadChain{R"(["bytes", "foo"])", StatusCode::kUnimplemented, "unknown codec 'foo'"},
        BadChain{R"(["bytes", {"name": "packbits"}])", StatusCode::kUnimplemented,
                 "codec 'packbits' is not supported by lsio yet"},
        BadChain{R"(["bytes", {"name": "blosc", "configuration": {"cname": "lzma"}}])", StatusCode::kInvalidFormat,
                 "blosc codec: \"cname\" must be one of blosclz, lz4, lz4hc, snappy, zlib, zstd, got \"lzma\""},
        BadChain{R"(["bytes", {"name": "blosc", "configuration": {"shuffle": 1}}])", StatusCode::kInvalidFormat,
                 "blosc codec: \"shuffle\" must be one of bitshuffle, noshuffle, shuffle, got 1"},
        BadChain{R"(["bytes", {"name": "blosc", "configuration": {"clevel": 10}}])", StatusCode::kInvalidFormat,
                 "blosc codec: \"clevel\" must be an integer in 0..9, got 10"},
        BadChain{R"(["bytes", {"name": "blosc", "configuration": {"typesize": 0}}])", StatusCode::kInvalidFormat,
                 "blosc codec: \"typesize\" must be an integer in 1..9223372036854775807, got 0"},
        BadChain{R"(["bytes", {"name": "blosc", "configuration": {"blocksize": -1}}])", StatusCode::kInvalidFormat,
                 "blosc codec: \"blocksize\" must be an integer in 0..9223372036854775807, got -1"},
        BadChain{R"(["blosc", "bytes"])", StatusCode::kInvalidFormat,
                 "codec 'blosc' (bytes -> bytes) before the array -> bytes codec"},
        BadChain{R"(["bytes", {"name": "numcodecs.pcodec", "configuration": {"level": 1}}])",
                 StatusCode::kUnimplemented, "codec 'numcodecs.pcodec' is not supported by lsio yet"},
        BadChain{R"([{"name": "sharding_indexed", "configuration": {}}])", StatusCode::kUnimplemented,
                 "codec 'sharding_indexed' is not supported by lsio yet"},
        BadChain{R"([5])", StatusCode::kInvalidFormat, "codec must be an object or a string"},
        BadChain{R"([{"configuration": {}}])", StatusCode::kInvalidFormat, "codec object without a string \"name\""},
        BadChain{R"([{"name": 3}])", StatusCode::kInvalidFormat, "codec object without a string \"name\""},
        BadChain{R"([{"name": "bytes", "configuration": [1]}])", StatusCode::kInvalidFormat,
                 "codec 'bytes': configuration must be an object"},
        BadChain{R"([{"name": "bytes", "configuration": {"endian": "middle"}}])", StatusCode::kInvalidFormat,
                 "bytes codec: \"endian\" must be \"little\" or \"big\", got 'middle'"},
        BadChain{R"([{"name": "bytes", "configuration": {"endian": 1}}])", StatusCode::kInvalidFormat,
                 "bytes codec: \"endian\" must be a string"},
        BadChain{R"([{"name": "transpose", "configuration": {"order": [0, 0]}}, "bytes"])",
                 StatusCode::kInvalidFormat, "transpose codec: order is not a permutation of 0..n-1"},
        BadChain{R"([{"name": "transpose", "configuration": {"order": [1, 2]}}, "bytes"])",
                 StatusCode::kInvalidFormat, "transpose codec: order is not a permutation of 0..n-1"},
        BadChain{R"([{"name": "transpose", "configuration": {"order": [2, 1, 0]}}, "bytes"])",
                 StatusCode::kInvalidFormat, "transpose codec: order has 3 entries for a chunk of rank 2"},
        BadChain{R"([{"name": "transpose", "configuration": {"order": [0.5, 1]}}, "bytes"])",
                 StatusCode::kInvalidFormat, "transpose codec: order entries must be integers"},
        BadChain{R"([{"name": "transpose", "configuration": {"order": "X"}}, "bytes"])", StatusCode::kInvalidFormat,
                 "transpose codec: order must be a list, \"C\" or \"F\""},
        BadChain{R"([{"name": "transpose", "configuration": {"order": 1}}, "bytes"])", StatusCode::kInvalidFormat,
                 "transpose codec: order must be a list"},
        BadChain{R"([{"name": "transpose"}, "bytes"])", StatusCode::kInvalidFormat,
                 "transpose codec: missing \"order\""}));

// ---- growable stages ----

TEST(GrowableStageTest, OutputIsBoundedByWhatTheCodecsBelowCanStore) {
  // [bytes, blosc, <outer>] for a 1000-byte chunk: the outer codec decodes into a growable
  // buffer, which may hold at most a blosc frame of 1000 bytes (blosc's MaxEncodedSize). A
  // frame claiming or producing 1 MB is corrupt and must not grow the buffer to its size.
  const Bytes big(1 << 20, 0);
  const std::string bound = std::to_string(NewBloscDecoder()->MaxEncodedSize(1000));
  struct Case {
    std::string outer;
    Bytes stored;
    const char* what;
  };
  const Case cases[] = {
      {R"({"name": "zstd"})", lsio_test::ZstdCompress(big), "zstd frame with a content size"},
      {R"({"name": "zstd"})", lsio_test::ZstdCompress(big, {.content_size = false}), "zstd frame without one"},
      {R"({"name": "gzip"})", lsio_test::Deflate(big), "gzip bomb"},
  };
  for (const Case& c : cases) {
    auto chain = ParseChain(R"(["bytes", "blosc", )" + c.outer + "]", Spec({1000}));
    ASSERT_TRUE(chain.ok()) << chain.status().ToString();
    DecodeScratch scratch;
    auto out = Decode(**chain, c.stored, &scratch);
    ASSERT_FALSE(out.ok()) << c.what;
    EXPECT_EQ(out.status().code(), StatusCode::kDataLoss) << c.what << ": " << out.status().ToString();
    EXPECT_NE(out.status().message().find("more than the " + bound), std::string::npos) << out.status().message();
    EXPECT_LE(scratch.buf[0].capacity(), 64u << 10) << c.what;
    EXPECT_LE(scratch.buf[1].capacity(), 64u << 10) << c.what;
  }
  // A blosc frame under crc32c-free zstd within the bound still decodes.
  const Bytes data = lsio_test::TestData(1000, 2);
  auto chain = ParseChain(R"(["bytes", "blosc", {"name": "zstd"}])", Spec({1000}));
  ASSERT_TRUE(chain.ok());
  auto out = Decode(**chain, lsio_test::ZstdCompress(lsio_test::BloscCompress(data)));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out.value(), data);
}

// ---- scratch ----

TEST(DecodeScratchTest, OnePerThread) {
  DecodeScratch* main_scratch = &ThreadDecodeScratch();
  EXPECT_EQ(&ThreadDecodeScratch(), main_scratch);
  DecodeScratch* other = nullptr;
  std::thread t([&] { other = &ThreadDecodeScratch(); });
  t.join();
  EXPECT_NE(other, main_scratch);
}

// A codec state that records its trims (in gzip's slot, which the test never decodes with).
struct TrimRecorder final : CodecScratch {
  static constexpr ScratchSlot kSlot = ScratchSlot::kGzip;
  void Trim(size_t keep) override { trimmed_to = keep; }
  size_t trimmed_to = 0;
};

TEST(DecodeScratchTest, EachCodecKeepsOneStateOfItsOwnCreatedOnFirstUse) {
  // A codec's state lives in its slot: created once, on first use, and reused (the hot path
  // allocates nothing after the first chunk); other slots are left alone, and trimming works
  // with any of them still empty.
  DecodeScratch scratch;
  scratch.TrimCodecBuffers(0);
  TrimRecorder* first = scratch.Get<TrimRecorder>();
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(scratch.Get<TrimRecorder>(), first);
  scratch.TrimCodecBuffers(123);
  EXPECT_EQ(first->trimmed_to, 123u);
  // Decoding zstd and gzip chunks through the same scratch keeps working across codecs.
  const Bytes data = lsio_test::TestData(4000, 4);
  auto zstd = ParseChain(R"(["bytes", {"name": "zstd"}])", Spec({1000}, 4, 4));
  ASSERT_TRUE(zstd.ok());
  for (int i = 0; i < 2; ++i) {
    auto out = Decode(**zstd, lsio_test::ZstdCompress(data), &scratch);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    EXPECT_EQ(out.value(), data);
  }
}

}  // namespace
}  // namespace lsio
