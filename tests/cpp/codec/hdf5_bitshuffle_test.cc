// HDF5's bitshuffle filter (codec/hdf5_bitshuffle.cc): chunks built here by the transform's
// definition (bit k of byte j of element i goes to bit i % 8 of byte (8 j + k) n / 8 + i / 8 of
// its block; a bit loop, independent of the codec's 8x8 transposes), framed as the filter
// frames them (uncompressed; LZ4 or zstd blocks behind a big-endian header), with short last
// blocks and a rest of fewer than 8 elements; and corrupt chunks that must fail with
// kDataLoss without writing past the chunk. Files written by h5py + hdf5plugin are compared
// in tests/python/test_hdf5.py.
#include <lz4.h>
#include <zstd.h>

#include "codec/codec_test_util.h"

namespace lsio {
namespace {

using lsio_test::Bytes;
using lsio_test::Decode;
using lsio_test::ParseChain;
using lsio_test::PutBe;
using lsio_test::Spec;

Bytes ShuffleBlock(const uint8_t* in, size_t n, size_t s) {
  Bytes out(n * s, 0);
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < s; ++j) {
      for (size_t k = 0; k < 8; ++k) {
        if ((in[i * s + j] >> k) & 1) out[(8 * j + k) * (n / 8) + i / 8] |= static_cast<uint8_t>(1u << (i % 8));
      }
    }
  }
  return out;
}

// codec: 0 none, 2 lz4, 3 zstd (the filter's numbers); block in elements.
Bytes Encode(const Bytes& data, size_t s, size_t block, int codec) {
  const size_t n = data.size() / s;
  Bytes out;
  if (codec != 0) {
    PutBe(&out, data.size(), 8);
    PutBe(&out, block * s, 4);
  }
  const size_t whole = n - n % 8;
  for (size_t at = 0; at < whole; at += block) {
    const size_t count = std::min(block, whole - at);
    const Bytes b = ShuffleBlock(data.data() + at * s, count, s);
    if (codec == 0) {
      out.insert(out.end(), b.begin(), b.end());
      continue;
    }
    Bytes c(b.size() * 2 + 64);
    size_t m = 0;
    if (codec == 2) {
      m = static_cast<size_t>(LZ4_compress_default(reinterpret_cast<const char*>(b.data()),
                                                   reinterpret_cast<char*>(c.data()), static_cast<int>(b.size()),
                                                   static_cast<int>(c.size())));
    } else {
      m = ZSTD_compress(c.data(), c.size(), b.data(), b.size(), 3);
    }
    PutBe(&out, m, 4);
    out.insert(out.end(), c.begin(), c.begin() + static_cast<ptrdiff_t>(m));
  }
  out.insert(out.end(), data.begin() + static_cast<ptrdiff_t>(whole * s), data.end());
  return out;
}

std::string ChainJson(size_t s, size_t block, int codec) {
  const char* names[] = {"none", "", "lz4", "zstd"};
  return std::string(R"(["bytes", {"name": "lsio.hdf5.bitshuffle", "configuration": {"elementsize": )") +
         std::to_string(s) + R"(, "blocksize": )" + std::to_string(block) + R"(, "compression": ")" + names[codec] +
         R"("}}])";
}

TEST(Hdf5BitshuffleTest, EveryFramingElementSizeAndBlockDecodes) {
  for (int codec : {0, 2, 3}) {
    for (size_t s : {1u, 2u, 4u, 8u, 3u}) {
      for (size_t block : {8u, 24u, 128u}) {
        for (size_t n : {0u, 5u, 8u, 131u, 1000u}) {
          SCOPED_TRACE("codec " + std::to_string(codec) + " elem " + std::to_string(s) + " block " +
                       std::to_string(block) + " n " + std::to_string(n));
          const Bytes data = lsio_test::TestData(n * s, n + s);
          auto chain = ParseChain(ChainJson(s, block, codec), Spec({static_cast<int64_t>(n * s)}));
          ASSERT_TRUE(chain.ok()) << chain.status().ToString();
          auto got = Decode(**chain, Encode(data, s, block, codec));
          ASSERT_TRUE(got.ok()) << got.status().ToString();
          EXPECT_EQ(*got, data);
        }
      }
    }
  }
}

TEST(Hdf5BitshuffleTest, CorruptChunksFail) {
  const size_t s = 4, n = 1003;
  const Bytes data = lsio_test::TestData(n * s, 9);
  for (int codec : {0, 2, 3}) {
    SCOPED_TRACE(codec);
    auto chain = ParseChain(ChainJson(s, 128, codec), Spec({static_cast<int64_t>(n * s)}));
    ASSERT_TRUE(chain.ok());
    const Bytes good = Encode(data, s, 128, codec);
    std::vector<Bytes> bad = {Bytes(good.begin(), good.end() - 1), Bytes{1, 2, 3}, Bytes{}};
    Bytes longer = good;
    longer.push_back(0);
    bad.push_back(longer);
    if (codec != 0) {
      Bytes wrong_total = good;
      wrong_total[7] ^= 4;  // one element more or less
      Bytes odd_block = good;
      odd_block[11] = 12;  // 12 bytes: 3 elements, not a multiple of 8
      Bytes long_block = good;
      long_block[12] = 0x7F;  // the first block claims ~2 GB
      Bytes garbage = good;
      for (size_t i = 17; i < garbage.size() - 20; i += 3) garbage[i] = 0xFF;
      bad.insert(bad.end(), {wrong_total, odd_block, long_block, garbage});
    }
    for (const Bytes& b : bad) {
      auto r = Decode(**chain, b);  // Decode checks the guard byte after the chunk
      ASSERT_FALSE(r.ok());
      EXPECT_EQ(r.status().code(), StatusCode::kDataLoss) << r.status().ToString();
    }
  }
}

TEST(Hdf5BitshuffleTest, BadConfigurationsAreRefused) {
  for (const char* cfg : {R"({"elementsize": 0})", R"({"elementsize": 4, "blocksize": 12})",
                          R"({"elementsize": 4, "compression": "lzf"})", R"({"elementsize": -1})"}) {
    auto chain = ParseChain(std::string(R"(["bytes", {"name": "lsio.hdf5.bitshuffle", "configuration": )") + cfg + "}]",
                            Spec({64}));
    EXPECT_FALSE(chain.ok()) << cfg;
  }
}

}  // namespace
}  // namespace lsio
