// lsio::Array over a ManifestStore (store/manifest.h): a Zarr v2 array described by kerchunk
// references, its zlib chunks packed into one file at arbitrary offsets (as an HDF5 file
// holds them), one chunk inline (base64), one absent (fill value), read with every backend
// and thread count and compared with the values written.
#include <zlib.h>

#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "lsio/array.h"
#include "store/kerchunk.h"
#include "store/local_store.h"
#include "store/manifest.h"
#include "test_util.h"

namespace lsio {
namespace {

using lsio_test::Box;
using lsio_test::TempDir;
using lsio_test::View;

std::string Zlib(const std::vector<int32_t>& v) {
  uLongf n = compressBound(static_cast<uLong>(v.size() * 4));
  std::string out(n, '\0');
  EXPECT_EQ(compress2(reinterpret_cast<Bytef*>(out.data()), &n, reinterpret_cast<const Bytef*>(v.data()),
                      static_cast<uLong>(v.size() * 4), 6),
            Z_OK);
  out.resize(n);
  return out;
}

std::string Base64(const std::string& s) {
  static const char* k = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (unsigned char c : s) {
    acc = (acc << 8) | c;
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out.push_back(k[(acc >> bits) & 63]);
    }
  }
  if (bits > 0) out.push_back(k[(acc << (6 - bits)) & 63]);
  while (out.size() % 4) out.push_back('=');
  return out;
}

TEST(ManifestArrayTest, KerchunkReferencedChunksReadAsTheArrayWritten) {
  // int32 (6, 7) in chunks (3, 4): a 2 x 2 grid with partial edge chunks.
  constexpr int kRows = 6, kCols = 7;
  std::vector<int32_t> want(kRows * kCols);
  for (int i = 0; i < kRows * kCols; ++i) want[i] = i * 37 - 500;
  const int32_t fill = -9;
  std::string packed = std::string(123, 'H');  // a header before the chunks, as in an HDF5 file
  std::string refs = R"({"version": 1, "refs": {".zarray": "{\"zarr_format\": 2, \"shape\": [6, 7], \"chunks\": [3, 4],)"
                     R"( \"dtype\": \"<i4\", \"compressor\": {\"id\": \"zlib\", \"level\": 6}, \"fill_value\": -9,)"
                     R"( \"order\": \"C\", \"filters\": null, \"dimension_separator\": \".\"}")";
  for (int cy = 0; cy < 2; ++cy) {
    for (int cx = 0; cx < 2; ++cx) {
      std::vector<int32_t> chunk(12, 0);
      for (int y = 0; y < 3; ++y) {
        for (int x = 0; x < 4; ++x) {
          const int gy = cy * 3 + y, gx = cx * 4 + x;
          chunk[y * 4 + x] = (gy < kRows && gx < kCols) ? want[gy * kCols + gx] : 0;
        }
      }
      const std::string key = std::to_string(cy) + "." + std::to_string(cx);
      if (cy == 1 && cx == 1) {  // absent: the fill value
        for (int y = 3; y < 6; ++y) {
          for (int x = 4; x < 7; ++x) want[y * kCols + x] = fill;
        }
        continue;
      }
      const std::string z = Zlib(chunk);
      if (cy == 1 && cx == 0) {
        refs += ", \"" + key + "\": \"base64:" + Base64(z) + "\"";
        continue;
      }
      refs += ", \"" + key + "\": [\"data.h5\", " + std::to_string(packed.size()) + ", " + std::to_string(z.size()) + "]";
      packed += z + std::string(17, 'P');  // chunks need not be adjacent
    }
  }
  refs += "}}";
  TempDir dir;
  dir.Write("data.h5", packed);
  auto manifest = ParseKerchunkJson(refs);
  ASSERT_TRUE(manifest.ok()) << manifest.status().ToString();
  for (const char* io : {"pread", "auto"}) {
    for (int threads : {1, 3}) {
      LocalStoreOptions so;
      so.mode = std::string(io) == "pread" ? IoMode::kPread : IoMode::kAuto;
      auto store = std::make_shared<ManifestStore>(manifest.value(), "", std::make_shared<LocalStore>(dir.path(), so),
                                                   std::vector<std::string>{"data.h5"}, "refs.json");
      OpenOptions o;
      o.threads = threads;
      auto a = Array::Open(store, "refs.json", o);
      ASSERT_TRUE(a.ok()) << a.status().ToString();
      EXPECT_EQ(a.value()->info().shape, (std::vector<int64_t>{kRows, kCols}));
      std::vector<int32_t> got(kRows * kCols, 12345);
      Status st = a.value()->Read(Box({0, 0}, {kRows, kCols}), View(got.data(), {kRows, kCols}, 4));
      ASSERT_TRUE(st.ok()) << st.ToString();
      EXPECT_EQ(got, want) << io << " threads " << threads;
      std::vector<int32_t> part(2 * 3);
      st = a.value()->Read(Box({2, 3}, {2, 3}), View(part.data(), {2, 3}, 4));
      ASSERT_TRUE(st.ok()) << st.ToString();
      for (int y = 0; y < 2; ++y) {
        for (int x = 0; x < 3; ++x) EXPECT_EQ(part[y * 3 + x], want[(2 + y) * kCols + 3 + x]);
      }
    }
  }
  // A chunk whose referenced bytes are not zlib data: a typed error naming the file, the
  // chunk and the byte range.
  packed[130] ^= 0x55;
  dir.Write("data.h5", packed);
  auto store = std::make_shared<ManifestStore>(manifest.value(), "", std::make_shared<LocalStore>(dir.path()),
                                               std::vector<std::string>{"data.h5"}, "refs.json");
  auto a = Array::Open(store, "refs.json", {});
  ASSERT_TRUE(a.ok());
  std::vector<int32_t> got(kRows * kCols);
  Status st = a.value()->Read(Box({0, 0}, {kRows, kCols}), View(got.data(), {kRows, kCols}, 4));
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kDataLoss) << st.ToString();
  // Chunks are ranges of the referenced file itself (Store::Locate): the error names the file,
  // the chunk and the byte range as for any chunk.
  EXPECT_NE(st.ToString().find("data.h5'"), std::string::npos) << st.ToString();
  EXPECT_NE(st.ToString().find("chunk (0, 0), bytes [123, "), std::string::npos) << st.ToString();
}

}  // namespace
}  // namespace lsio
