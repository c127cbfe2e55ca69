// Codec kinds: the registry returns each codec as its kind's interface (so the chain's casts
// by kind() are sound), CodecChain::Build takes codec objects without any JSON, any
// bytes -> bytes implementation plugs into a chain and is handed the caller's destination
// on the direct path, and an array -> array codec that is not an axis permutation is
// refused instead of being mistaken for a transpose.
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "codec/codec_test_util.h"
#include "codec/registry.h"

namespace lsio {
namespace {

using lsio_test::Bytes;
using lsio_test::Spec;

TEST(CodecKindTest, RegistryReturnsEachCodecAsItsKindInterface) {
  struct Case {
    const char* json;
    CodecKind kind;
  };
  const Case cases[] = {
      {R"("bytes")", CodecKind::kArrayToBytes},
      {R"({"name": "endian", "configuration": {"endian": "big"}})", CodecKind::kArrayToBytes},
      {R"({"name": "transpose", "configuration": {"order": [1, 0]}})", CodecKind::kArrayToArray},
      {R"({"name": "transpose", "configuration": {"order": "F"}})", CodecKind::kArrayToArray},
      {R"("zstd")", CodecKind::kBytesToBytes},
      {R"("gzip")", CodecKind::kBytesToBytes},
      {R"("crc32c")", CodecKind::kBytesToBytes},
      {R"("blosc")", CodecKind::kBytesToBytes},
  };
  for (const Case& c : cases) {
    auto codec = ParseCodec(nlohmann::json::parse(c.json));
    ASSERT_TRUE(codec.ok()) << c.json << ": " << codec.status().ToString();
    const Codec* p = codec->get();
    EXPECT_EQ(p->kind(), c.kind) << c.json;
    // The dynamic type agrees with kind(): what CodecChain::Build relies on when it casts.
    EXPECT_EQ(dynamic_cast<const ArrayToArrayCodec*>(p) != nullptr, c.kind == CodecKind::kArrayToArray) << c.json;
    EXPECT_EQ(dynamic_cast<const ArrayToBytesCodec*>(p) != nullptr, c.kind == CodecKind::kArrayToBytes) << c.json;
    EXPECT_EQ(dynamic_cast<const BytesToBytesCodec*>(p) != nullptr, c.kind == CodecKind::kBytesToBytes) << c.json;
  }
}

TEST(CodecKindTest, TransposeOrdersResolveAgainstTheRank) {
  EXPECT_EQ(TransposeCodec(TransposeCodec::Named::kF).AxisOrder(3), (std::vector<int>{2, 1, 0}));
  EXPECT_EQ(TransposeCodec(TransposeCodec::Named::kC).AxisOrder(3), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(TransposeCodec(std::vector<int>{1, 0}).AxisOrder(2), (std::vector<int>{1, 0}));
}

// A bytes -> bytes codec defined outside the registry: stored = decoded XOR 0x5A, and it
// remembers where it was asked to write.
class XorCodec final : public BytesToBytesCodec {
 public:
  std::string name() const override { return "xor"; }
  std::optional<uint64_t> EncodedSize(uint64_t decoded) const override { return decoded; }
  Status DecodeBytes(std::span<const uint8_t> in, BytesOut& out, DecodeScratch&) const override {
    uint8_t* dst = out.fixed;
    if (dst == nullptr) {
      if (!out.grow->Reserve(in.size())) return Status::ResourceExhausted("xor");
      dst = out.grow->data();
    } else if (out.size != in.size()) {
      return Status::DataLoss("xor: wrong size");
    }
    for (size_t i = 0; i < in.size(); ++i) dst[i] = in[i] ^ 0x5A;
    *last_dst_ = dst;
    out.result = {dst, in.size()};
    return Status::Ok();
  }
  explicit XorCodec(uint8_t** last_dst) : last_dst_(last_dst) {}

 private:
  uint8_t** last_dst_;
};

TEST(CodecChainBuildTest, BuildsFromCodecObjectsAndWritesTheLastStageIntoTheDestination) {
  uint8_t* last_dst = nullptr;
  std::vector<std::unique_ptr<Codec>> codecs;
  codecs.push_back(std::make_unique<BytesCodec>(false));
  codecs.push_back(std::make_unique<XorCodec>(&last_dst));
  auto chain = CodecChain::Build(std::move(codecs), Spec({6}, 2));
  ASSERT_TRUE(chain.ok()) << chain.status().ToString();
  EXPECT_EQ((*chain)->description(), "bytes, xor");
  EXPECT_EQ((*chain)->FixedEncodedSize(), 12u);
  EXPECT_FALSE((*chain)->stored_is_decoded());
  Bytes stored(12);
  for (size_t i = 0; i < 12; ++i) stored[i] = static_cast<uint8_t>(i) ^ 0x5A;
  Bytes out(12);
  ASSERT_TRUE((*chain)->Decode(std::span<const uint8_t>(stored.data(), 12), out.data(), ThreadDecodeScratch()).ok());
  EXPECT_EQ(last_dst, out.data()) << "the only bytes->bytes stage must decode straight into the output";
  for (size_t i = 0; i < 12; ++i) EXPECT_EQ(out[i], i);
}

TEST(CodecChainBuildTest, KindOrderIsCheckedOnCodecObjects) {
  uint8_t* unused = nullptr;
  std::vector<std::unique_ptr<Codec>> codecs;
  codecs.push_back(std::make_unique<XorCodec>(&unused));
  codecs.push_back(std::make_unique<BytesCodec>(false));
  auto chain = CodecChain::Build(std::move(codecs), Spec({4}));
  ASSERT_FALSE(chain.ok());
  EXPECT_EQ(chain.status().code(), StatusCode::kInvalidFormat);
  EXPECT_EQ(chain.status().message(), "codec 'xor' (bytes -> bytes) before the array -> bytes codec");
  auto empty = CodecChain::Build({}, Spec({4}));
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().code(), StatusCode::kInvalidFormat);
}

// An array -> array codec that changes values, not axes (like v2's delta filter).
class ValueCodec final : public ArrayToArrayCodec {
 public:
  std::string name() const override { return "value-changing"; }
  Result<ChunkSpec> EncodedSpec(const ChunkSpec& decoded) const override { return decoded; }
};

TEST(CodecChainBuildTest, ArrayToArrayCodecThatIsNotAPermutationIsUnimplemented) {
  // Before codecs were typed by kind, every array -> array codec was cast to a transpose.
  std::vector<std::unique_ptr<Codec>> codecs;
  codecs.push_back(std::make_unique<ValueCodec>());
  codecs.push_back(std::make_unique<BytesCodec>(false));
  auto chain = CodecChain::Build(std::move(codecs), Spec({4, 4}, 4));
  ASSERT_FALSE(chain.ok());
  EXPECT_EQ(chain.status().code(), StatusCode::kUnimplemented);
  EXPECT_EQ(chain.status().message(),
            "array -> array codec 'value-changing' is not an axis permutation; lsio cannot decode it yet");
}

TEST(CodecChainBuildTest, TransposeObjectsComposeLikeParsedOnes) {
  // Two "F" transposes of a 3-d chunk compose to the identity: stored bytes are decoded.
  std::vector<std::unique_ptr<Codec>> codecs;
  codecs.push_back(std::make_unique<TransposeCodec>(TransposeCodec::Named::kF));
  codecs.push_back(std::make_unique<TransposeCodec>(TransposeCodec::Named::kF));
  codecs.push_back(std::make_unique<BytesCodec>(false));
  auto chain = CodecChain::Build(std::move(codecs), Spec({2, 3, 4}, 2));
  ASSERT_TRUE(chain.ok()) << chain.status().ToString();
  EXPECT_TRUE((*chain)->stored_is_decoded());
  EXPECT_EQ((*chain)->description(), "transpose, transpose, bytes");
}

}  // namespace
}  // namespace lsio
