// HDF5's LZ4 filter framing (codec/hdf5_lz4.cc): frames built here with liblz4 by the filter's
// layout (big-endian total size and block size, then per block its size and an LZ4 block, or
// the raw bytes when it did not shrink), several blocks with a short last one, and corrupt
// frames that must fail with kDataLoss without writing past the chunk. Files written by
// h5py + hdf5plugin are compared in tests/python/test_hdf5.py.
#include <lz4.h>

#include "codec/codec_test_util.h"

namespace lsio {
namespace {

using lsio_test::Bytes;
using lsio_test::Decode;
using lsio_test::ParseChain;
using lsio_test::PutBe;
using lsio_test::Spec;

// `raw_blocks`: store these blocks as they are (as the filter does when they do not shrink).
Bytes Frame(const Bytes& data, size_t block, std::vector<size_t> raw_blocks = {}) {
  Bytes out;
  PutBe(&out, data.size(), 8);
  PutBe(&out, block, 4);
  for (size_t at = 0, k = 0; at < data.size(); at += block, ++k) {
    const size_t n = std::min(block, data.size() - at);
    if (std::find(raw_blocks.begin(), raw_blocks.end(), k) != raw_blocks.end()) {
      PutBe(&out, n, 4);
      out.insert(out.end(), data.begin() + static_cast<ptrdiff_t>(at), data.begin() + static_cast<ptrdiff_t>(at + n));
      continue;
    }
    Bytes c(static_cast<size_t>(LZ4_compressBound(static_cast<int>(n))));
    const int m = LZ4_compress_default(reinterpret_cast<const char*>(data.data() + at), reinterpret_cast<char*>(c.data()),
                                       static_cast<int>(n), static_cast<int>(c.size()));
    PutBe(&out, static_cast<uint64_t>(m), 4);
    out.insert(out.end(), c.begin(), c.begin() + m);
  }
  return out;
}

TEST(Hdf5Lz4Test, BlocksDecodeAndCorruptFramesFail) {
  auto chain = ParseChain(R"(["bytes", {"name": "lsio.hdf5.lz4", "configuration": {"blocksize": 1000}}])",
                          Spec({4000}));
  ASSERT_TRUE(chain.ok()) << chain.status().ToString();
  const Bytes data = lsio_test::TestData(4000);
  for (const Bytes& frame : {Frame(data, 1000), Frame(data, 1500), Frame(data, 1000, {1, 3}), Frame(data, 9999)}) {
    auto got = Decode(**chain, frame);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(*got, data);
  }
  const Bytes good = Frame(data, 1000);
  Bytes wrong_total = good;
  wrong_total[7] ^= 1;  // 4001 or 3999 bytes
  Bytes truncated(good.begin(), good.end() - 5);
  Bytes long_block = good;
  long_block[12] = 0x7F;  // the first block claims ~2 GB
  Bytes zero_block = good;
  for (int i = 8; i < 12; ++i) zero_block[static_cast<size_t>(i)] = 0;
  Bytes garbage = good;
  for (size_t i = 16; i < garbage.size(); i += 3) garbage[i] = 0xFF;
  for (const Bytes& bad : {wrong_total, truncated, long_block, zero_block, garbage, Bytes{0, 0, 1}}) {
    auto r = Decode(**chain, bad);  // Decode checks the guard byte after the chunk
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kDataLoss) << r.status().ToString();
  }
}

}  // namespace
}  // namespace lsio
