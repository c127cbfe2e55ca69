// lsio::Array end to end, on stores written byte by byte in a temp dir: the §6.9 shard blobs
// (zarr-python end/start, TensorStore), fills for missing inner chunks and shards, strided
// and batched reads, unsharded zstd/big-endian/transpose stores with edge chunks, 0-d arrays,
// corrupt shards, open/argument errors, backends, threads and fork.
#include "lsio/array.h"

#include <dirent.h>
#include <zstd.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "test_util.h"

namespace lsio {
namespace {

using lsio_test::View;
using lsio_test::Box;

using lsio_test::Bytes;
using lsio_test::TempDir;

std::string Shard69Json(const std::string& location, const std::string& fill = "0") {
  return R"({"zarr_format": 3, "node_type": "array", "shape": [4, 4], "data_type": "uint16",
    "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4, 4]}},
    "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}}, "fill_value": )" +
         fill + R"(,
    "codecs": [{"name": "sharding_indexed", "configuration": {"chunk_shape": [2, 2],
      "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
      "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}],
      "index_location": ")" + location + R"("}}],
    "attributes": {"units": "K"}, "dimension_names": ["y", null], "storage_transformers": []})";
}

std::unique_ptr<Array> OpenOk(const std::string& path, OpenOptions o = {}) {
  auto a = Array::Open(path, o);
  EXPECT_TRUE(a.ok()) << a.status().ToString();
  return a.ok() ? std::move(a).value() : nullptr;
}

std::vector<uint16_t> ReadAll16(Array& a) {
  std::vector<uint16_t> out(16, 0xDEAD);
  Status st = a.Read(Box({0, 0}, {4, 4}), View(out.data(), {4, 4}, 2));
  EXPECT_TRUE(st.ok()) << st.ToString();
  return out;
}

int CountThreads() {
  int n = 0;
  DIR* d = opendir("/proc/self/task");
  if (d == nullptr) return -1;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] != '.') ++n;
  }
  closedir(d);
  return n;
}

struct Blob69 {
  const char* name;
  const char* location;
  Bytes (*bytes)();
};
const Blob69 kBlobs[] = {{"zarr-python end", "end", &lsio_test::Shard69ZarrPythonEnd},
                         {"zarr-python start", "start", &lsio_test::Shard69ZarrPythonStart},
                         {"TensorStore", "end", &lsio_test::Shard69TensorStore}};

TEST(ArrayTest, Section69BlobsDecodeToTheSameArrayOnEveryBackend) {
  const bool uring = GetIoBackendInfo().uring_available;
  for (const Blob69& b : kBlobs) {
    TempDir dir;
    dir.Write("arr/zarr.json", Shard69Json(b.location));
    dir.Write("arr/c/0/0", b.bytes());
    for (const char* io : {"pread", "auto", "uring"}) {
      for (int threads : {1, 3}) {
        OpenOptions o;
        o.io = io;
        o.threads = threads;
        auto a = OpenOk(dir.Join("arr"), o);
        ASSERT_NE(a, nullptr);
        if (std::string(io) == "uring" && !uring) {
          std::vector<uint16_t> out(16);
          Status st = a->Read(Box({0, 0}, {4, 4}), View(out.data(), {4, 4}, 2));
          EXPECT_EQ(st.code(), StatusCode::kUnavailable) << "forced uring where it cannot work";
          continue;
        }
        EXPECT_EQ(ReadAll16(*a), lsio_test::Shard69Values()) << b.name << " io=" << io << " threads=" << threads;
      }
    }
  }
}

TEST(ArrayTest, InfoReflectsTheMetadata) {
  TempDir dir;
  dir.Write("arr/zarr.json", Shard69Json("end", "513"));
  auto a = OpenOk(dir.Join("arr/"));  // a trailing slash is fine
  ASSERT_NE(a, nullptr);
  const ArrayInfo& i = a->info();
  EXPECT_EQ(i.path, dir.Join("arr"));
  EXPECT_EQ(i.shape, (std::vector<int64_t>{4, 4}));
  EXPECT_EQ(i.data_type, "uint16");
  EXPECT_EQ(i.typestr, "<u2");
  EXPECT_EQ(i.itemsize, 2u);
  EXPECT_EQ(i.chunks, (std::vector<int64_t>{2, 2}));
  ASSERT_TRUE(i.shards.has_value());
  EXPECT_EQ(*i.shards, (std::vector<int64_t>{4, 4}));
  EXPECT_EQ(i.fill_value, (std::vector<uint8_t>{0x01, 0x02}));
  EXPECT_EQ(i.attributes_json, R"({"units":"K"})");
  ASSERT_TRUE(i.dimension_names.has_value());
  EXPECT_EQ((*i.dimension_names)[0], std::optional<std::string>("y"));
  EXPECT_EQ((*i.dimension_names)[1], std::nullopt);
  EXPECT_EQ(i.codecs, "sharding_indexed[bytes]");
}

TEST(ArrayTest, MissingInnerChunkReadsAsTheFillValue) {
  TempDir dir;
  dir.Write("arr/zarr.json", Shard69Json("end", "7"));
  dir.Write("arr/c/0/0", lsio_test::Shard69ZarrPythonEnd());
  auto a = OpenOk(dir.Join("arr"));
  ASSERT_NE(a, nullptr);
  std::vector<uint16_t> want = lsio_test::Shard69Values();
  for (int r = 2; r < 4; ++r)
    for (int c = 2; c < 4; ++c) want[static_cast<size_t>(r * 4 + c)] = 7;
  EXPECT_EQ(ReadAll16(*a), want);
}

TEST(ArrayTest, MissingShardReadsAsTheFillValue) {
  TempDir dir;
  dir.Write("arr/zarr.json", Shard69Json("end", "65535"));
  auto a = OpenOk(dir.Join("arr"));
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(ReadAll16(*a), std::vector<uint16_t>(16, 65535));
}

TEST(ArrayTest, CropsStepsAndBatchesShareChunks) {
  TempDir dir;
  dir.Write("arr/zarr.json", Shard69Json("start"));
  dir.Write("arr/c/0/0", lsio_test::Shard69ZarrPythonStart());
  OpenOptions o;
  o.threads = 2;
  auto a = OpenOk(dir.Join("arr"), o);
  ASSERT_NE(a, nullptr);
  const std::vector<uint16_t> v = lsio_test::Shard69Values();
  // Crop rows 1..2, cols 1..3 (crosses all four inner chunks).
  std::vector<uint16_t> crop(6);
  ASSERT_TRUE(a->Read(Box({1, 1}, {2, 3}), View(crop.data(), {2, 3}, 2)).ok());
  EXPECT_EQ(crop, (std::vector<uint16_t>{v[5], v[6], v[7], v[9], v[10], v[11]}));
  // Steps: rows 0, 2 and cols 1, 3.
  std::vector<uint16_t> stepped(4);
  ASSERT_TRUE(a->Read(Box({0, 1}, {2, 2}, {2, 2}), View(stepped.data(), {2, 2}, 2)).ok());
  EXPECT_EQ(stepped, (std::vector<uint16_t>{v[1], v[3], v[9], v[11]}));
  // A batch of overlapping same-shape crops.
  std::vector<uint16_t> batch(3 * 4, 0);
  std::vector<Selection> sels = {Box({0, 0}, {2, 2}), Box({1, 1}, {2, 2}), Box({0, 0}, {2, 2})};
  std::vector<DstView> views;
  for (int i = 0; i < 3; ++i) views.push_back(View(batch.data() + 4 * i, {2, 2}, 2));
  Status st = a->ReadBatch(sels, views);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(batch, (std::vector<uint16_t>{v[0], v[1], v[4], v[5], v[5], v[6], v[9], v[10], v[0], v[1], v[4], v[5]}));
}

TEST(ArrayTest, StridedAndReversedDestinations) {
  TempDir dir;
  dir.Write("arr/zarr.json", Shard69Json("end"));
  dir.Write("arr/c/0/0", lsio_test::Shard69TensorStore());
  auto a = OpenOk(dir.Join("arr"));
  ASSERT_NE(a, nullptr);
  const std::vector<uint16_t> v = lsio_test::Shard69Values();
  // Fortran-order output: element (r, c) at c*4 + r.
  std::vector<uint16_t> f(16, 0);
  DstView fv{reinterpret_cast<uint8_t*>(f.data()), {4, 4}, {2, 8}};
  ASSERT_TRUE(a->Read(Box({0, 0}, {4, 4}), fv).ok());
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 4; ++c) EXPECT_EQ(f[static_cast<size_t>(c * 4 + r)], v[static_cast<size_t>(r * 4 + c)]);
  // Rows reversed (negative stride) into a padded buffer; padding untouched.
  std::vector<uint16_t> pad(4 * 6, 0xAAAA);
  DstView rv{reinterpret_cast<uint8_t*>(pad.data() + 3 * 6), {4, 4}, {-12, 2}};
  ASSERT_TRUE(a->Read(Box({0, 0}, {4, 4}), rv).ok());
  for (int r = 0; r < 4; ++r) {
    for (int c = 0; c < 4; ++c) EXPECT_EQ(pad[static_cast<size_t>((3 - r) * 6 + c)], v[static_cast<size_t>(r * 4 + c)]);
    EXPECT_EQ(pad[static_cast<size_t>(r * 6 + 4)], 0xAAAA);
    EXPECT_EQ(pad[static_cast<size_t>(r * 6 + 5)], 0xAAAA);
  }
}

TEST(ArrayTest, CorruptShardsAreDataLossNamingTheFile) {
  struct Case {
    const char* what;
    Bytes blob;
    const char* message_prefix;
  };
  Bytes bad_crc = lsio_test::Shard69ZarrPythonEnd();
  bad_crc[90] ^= 0x10;
  Bytes truncated = lsio_test::Shard69ZarrPythonEnd();
  truncated.resize(60);
  // Entry (0,1) moved to offset 20: it now runs into the index (fresh crc, so only the
  // bounds check can catch it).
  Bytes past = lsio_test::Shard69ZarrPythonEnd();
  past[40] = 20;
  Bytes idx(past.begin() + 24, past.begin() + 88);
  const uint32_t crc = lsio_test::ReferenceCrc32c(idx);
  std::memcpy(past.data() + 88, &crc, 4);
  const Case cases[] = {
      {"bad index crc", bad_crc, "shard index: crc32c checksum mismatch"},
      {"truncated shard", truncated, "shard is 60 bytes, shorter than its 68-byte index"},
      {"entry past the data", past, "shard index entry 1 (offset 20, nbytes 8) lies outside"},
  };
  for (const Case& c : cases) {
    TempDir dir;
    dir.Write("arr/zarr.json", Shard69Json("end"));
    const std::string shard = dir.Write("arr/c/0/0", c.blob);
    auto a = OpenOk(dir.Join("arr"));
    ASSERT_NE(a, nullptr);
    std::vector<uint16_t> out(16);
    Status st = a->Read(Box({0, 0}, {4, 4}), View(out.data(), {4, 4}, 2));
    ASSERT_FALSE(st.ok()) << c.what;
    EXPECT_EQ(st.code(), StatusCode::kDataLoss) << c.what << ": " << st.ToString();
    EXPECT_EQ(st.message().rfind(c.message_prefix, 0), 0u) << c.what << ": " << st.message();
    EXPECT_EQ(st.path(), shard) << c.what;
    EXPECT_NE(st.ToString().find("file '" + shard + "'"), std::string::npos) << st.ToString();
  }
}

Bytes Zstd(const Bytes& raw) {
  Bytes out(ZSTD_compressBound(raw.size()));
  const size_t n = ZSTD_compress(out.data(), out.size(), raw.data(), raw.size(), 3);
  EXPECT_FALSE(ZSTD_isError(n));
  out.resize(n);
  return out;
}

TEST(ArrayTest, UnshardedZstdWithEdgeChunksV2KeysAndMissingChunks) {
  // [5, 7] int32, chunks [2, 3]: grid 3 x 3, edge chunks stored full-size (padded with -1).
  TempDir dir;
  dir.Write("arr/zarr.json", std::string(R"({"zarr_format": 3, "node_type": "array", "shape": [5, 7],
    "data_type": "int32", "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2, 3]}},
    "chunk_key_encoding": {"name": "v2"}, "fill_value": -5,
    "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "zstd", "configuration": {"level": 1}}]})"));
  auto value = [](int64_t r, int64_t c) { return static_cast<int32_t>(r * 10 + c); };
  for (int64_t gr = 0; gr < 3; ++gr) {
    for (int64_t gc = 0; gc < 3; ++gc) {
      if (gr == 1 && gc == 1) continue;  // absent: fill
      Bytes raw;
      for (int64_t r = 0; r < 2; ++r)
        for (int64_t c = 0; c < 3; ++c) {
          const int64_t R = gr * 2 + r, C = gc * 3 + c;
          lsio_test::PutLE<uint32_t>(raw, static_cast<uint32_t>(R < 5 && C < 7 ? value(R, C) : -1));
        }
      dir.Write("arr/" + std::to_string(gr) + "." + std::to_string(gc), Zstd(raw));
    }
  }
  auto a = OpenOk(dir.Join("arr"));
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->info().codecs, "bytes, zstd");
  EXPECT_FALSE(a->info().shards.has_value());
  std::vector<int32_t> out(35, 0);
  Status st = a->Read(Box({0, 0}, {5, 7}), View(out.data(), {5, 7}, 4));
  ASSERT_TRUE(st.ok()) << st.ToString();
  for (int64_t r = 0; r < 5; ++r)
    for (int64_t c = 0; c < 7; ++c) {
      const bool fill = r / 2 == 1 && c / 3 == 1;
      EXPECT_EQ(out[static_cast<size_t>(r * 7 + c)], fill ? -5 : value(r, c)) << r << "," << c;
    }
}

TEST(ArrayTest, ShardedBigEndianTransposedInnerChunksWithGapsAndChecksums) {
  // [4, 6] uint32 in one [4, 6] shard of [2, 3] inner chunks, inner chain
  // [transpose [1,0], bytes big, crc32c], data in reverse order with gaps, index at start.
  TempDir dir;
  dir.Write("arr/zarr.json", std::string(R"({"zarr_format": 3, "node_type": "array", "shape": [4, 6],
    "data_type": "uint32", "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4, 6]}},
    "chunk_key_encoding": {"name": "default", "configuration": {"separator": "."}}, "fill_value": 0,
    "codecs": [{"name": "sharding_indexed", "configuration": {"chunk_shape": [2, 3],
      "codecs": [{"name": "transpose", "configuration": {"order": [1, 0]}},
                 {"name": "bytes", "configuration": {"endian": "big"}}, "crc32c"],
      "index_codecs": [{"name": "bytes", "configuration": {"endian": "big"}}, "crc32c"],
      "index_location": "start"}}]})"));
  auto value = [](int64_t r, int64_t c) { return static_cast<uint32_t>(0x01000000u * (r + 1) + c); };
  const uint64_t index_size = 4 * 16 + 4;
  std::vector<Bytes> chunks(4);
  for (int64_t ir = 0; ir < 2; ++ir)
    for (int64_t ic = 0; ic < 2; ++ic) {
      Bytes enc;  // transposed: [3, 2] in C order = column-major of the [2, 3] chunk
      for (int64_t c = 0; c < 3; ++c)
        for (int64_t r = 0; r < 2; ++r) lsio_test::PutBE<uint32_t>(enc, value(ir * 2 + r, ic * 3 + c));
      chunks[static_cast<size_t>(ir * 2 + ic)] = lsio_test::WithCrc(enc);
    }
  Bytes data;
  std::vector<uint64_t> offsets(4);
  for (int k = 3; k >= 0; --k) {
    data.insert(data.end(), 5, 0xEE);  // gap
    offsets[static_cast<size_t>(k)] = index_size + data.size();
    data.insert(data.end(), chunks[static_cast<size_t>(k)].begin(), chunks[static_cast<size_t>(k)].end());
  }
  Bytes index;
  for (int k = 0; k < 4; ++k) {
    lsio_test::PutBE<uint64_t>(index, offsets[static_cast<size_t>(k)]);
    lsio_test::PutBE<uint64_t>(index, chunks[static_cast<size_t>(k)].size());
  }
  dir.Write("arr/c.0.0", lsio_test::Concat({lsio_test::WithCrc(index), data}));
  for (const char* io : {"pread", "auto"}) {
    OpenOptions o;
    o.io = io;
    o.max_gap = 0;  // the gaps keep chunks in separate requests
    auto a = OpenOk(dir.Join("arr"), o);
    ASSERT_NE(a, nullptr);
    std::vector<uint32_t> out(24, 0);
    Status st = a->Read(Box({0, 0}, {4, 6}), View(out.data(), {4, 6}, 4));
    ASSERT_TRUE(st.ok()) << st.ToString();
    for (int64_t r = 0; r < 4; ++r)
      for (int64_t c = 0; c < 6; ++c) EXPECT_EQ(out[static_cast<size_t>(r * 6 + c)], value(r, c)) << io << " " << r << "," << c;
  }
}

TEST(ArrayTest, ZeroDimensionalArrays) {
  TempDir dir;
  const std::string json = R"({"zarr_format": 3, "node_type": "array", "shape": [], "data_type": "float64",
    "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": []}},
    "chunk_key_encoding": {"name": "KEY"}, "fill_value": "NaN", "codecs": ["bytes"]})";
  auto with_key = [&](const char* enc) {
    std::string j = json;
    j.replace(j.find("KEY"), 3, enc);
    return j;
  };
  Bytes pi;
  lsio_test::PutLE<uint64_t>(pi, 0x400921FB54442D18ull);  // 3.141592653589793
  dir.Write("d/zarr.json", with_key("default"));
  dir.Write("d/c", pi);
  dir.Write("v/zarr.json", with_key("v2"));
  dir.Write("v/0", pi);
  dir.Write("m/zarr.json", with_key("default"));
  for (const char* name : {"d", "v"}) {
    auto a = OpenOk(dir.Join(name));
    ASSERT_NE(a, nullptr);
    double out = 0;
    Status st = a->Read(Selection{}, View(&out, {}, 8));
    ASSERT_TRUE(st.ok()) << st.ToString();
    EXPECT_EQ(out, 3.141592653589793) << name;
  }
  auto m = OpenOk(dir.Join("m"));
  ASSERT_NE(m, nullptr);
  double out = 0;
  ASSERT_TRUE(m->Read(Selection{}, View(&out, {}, 8)).ok());
  EXPECT_TRUE(std::isnan(out)) << "missing 0-d chunk reads as the fill value";
}

TEST(ArrayTest, OpenErrors) {
  TempDir dir;
  {
    auto a = Array::Open(dir.Join("nope"), {});
    ASSERT_FALSE(a.ok());
    EXPECT_EQ(a.status().code(), StatusCode::kIoError);
    EXPECT_EQ(a.status().error_number(), ENOENT);
    EXPECT_EQ(a.status().path(), dir.Join("nope"));
  }
  {
    const std::string f = dir.Write("file", std::string("x"));
    auto a = Array::Open(f, {});
    ASSERT_FALSE(a.ok());
    EXPECT_EQ(a.status().code(), StatusCode::kInvalidFormat);
    EXPECT_EQ(a.status().message(), "not a Zarr array directory (expected a directory holding zarr.json)");
  }
  {
    const std::string d = dir.MakeDir("empty");
    auto a = Array::Open(d, {});
    ASSERT_FALSE(a.ok());
    EXPECT_EQ(a.status().code(), StatusCode::kIoError);
    EXPECT_EQ(a.status().error_number(), ENOENT);
    EXPECT_EQ(a.status().message(), "no zarr.json or .zarray: not a Zarr array");
    EXPECT_EQ(a.status().path(), d + "/zarr.json");
  }
  {
    // A Zarr v2 array is parsed from .zarray (malformed here), and errors name that file.
    dir.Write("v2/.zarray", std::string("{}"));
    auto a = Array::Open(dir.Join("v2"), {});
    ASSERT_FALSE(a.ok());
    EXPECT_EQ(a.status().code(), StatusCode::kInvalidFormat);
    EXPECT_EQ(a.status().message(), ".zarray: zarr_format must be 2, got nothing");
    EXPECT_EQ(a.status().path(), dir.Join("v2/.zarray"));
  }
  {
    dir.Write("badjson/zarr.json", std::string("{not json"));
    auto a = Array::Open(dir.Join("badjson"), {});
    ASSERT_FALSE(a.ok());
    EXPECT_EQ(a.status().code(), StatusCode::kInvalidFormat);
    EXPECT_EQ(a.status().message(), "zarr.json is not valid JSON");
    EXPECT_EQ(a.status().path(), dir.Join("badjson/zarr.json"));
  }
  {
    dir.MakeDir("dirmeta/zarr.json");
    auto a = Array::Open(dir.Join("dirmeta"), {});
    ASSERT_FALSE(a.ok());
    EXPECT_EQ(a.status().code(), StatusCode::kIoError);
    EXPECT_EQ(a.status().error_number(), EISDIR);
  }
  {
    // Read through the store, which refuses it unread: a sparse file one byte over the cap.
    const std::string big = dir.Write("bigmeta/zarr.json", std::string());
    ASSERT_EQ(truncate(big.c_str(), (off_t{32} << 20) + 1), 0);
    auto a = Array::Open(dir.Join("bigmeta"), {});
    ASSERT_FALSE(a.ok());
    EXPECT_EQ(a.status().code(), StatusCode::kInvalidFormat);
    EXPECT_EQ(a.status().message(), "metadata file is larger than 32 MiB");
    EXPECT_EQ(a.status().path(), big);
  }
  {
    // An unreadable .zarray is an I/O error naming it, not "not an array".
    dir.MakeDir("v2dir/.zarray");
    auto a = Array::Open(dir.Join("v2dir"), {});
    ASSERT_FALSE(a.ok());
    EXPECT_EQ(a.status().code(), StatusCode::kIoError);
    EXPECT_EQ(a.status().error_number(), EISDIR);
    EXPECT_EQ(a.status().path(), dir.Join("v2dir/.zarray"));
  }
}

TEST(ArrayTest, BadOptionsAreInvalidArgument) {
  TempDir dir;
  dir.Write("arr/zarr.json", Shard69Json("end"));
  struct Case {
    OpenOptions o;
    const char* message;
  };
  std::vector<Case> cases(4);
  cases[0].o.threads = -1;
  cases[0].message = "threads must be >= 0";
  cases[1].o.queue_depth = 0;
  cases[1].message = "queue_depth must be in 1..4096";
  cases[2].o.io = "mmap";
  cases[2].message = "unknown io mode 'mmap' (expected auto, uring or pread)";
  cases[3].o.max_request = 0;
  cases[3].message = "max_request must be > 0";
  for (const Case& c : cases) {
    auto a = Array::Open(dir.Join("arr"), c.o);
    ASSERT_FALSE(a.ok()) << c.message;
    EXPECT_EQ(a.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(a.status().message(), c.message);
  }
}

TEST(ArrayTest, SelectionErrors) {
  TempDir dir;
  dir.Write("arr/zarr.json", Shard69Json("end"));
  auto a = OpenOk(dir.Join("arr"));
  ASSERT_NE(a, nullptr);
  std::vector<uint16_t> out(16, 0x5555);
  const std::vector<uint16_t> untouched(16, 0x5555);

  Status oob = a->Read(Box({2, 0}, {3, 4}), View(out.data(), {3, 4}, 2));
  EXPECT_EQ(oob.code(), StatusCode::kOutOfRange);
  EXPECT_EQ(oob.message(), "selection [2, 4] is outside dimension 0 of size 4");
  Status neg = a->Read(Box({0, -1}, {1, 2}), View(out.data(), {1, 2}, 2));
  EXPECT_EQ(neg.code(), StatusCode::kOutOfRange);
  Status stepped = a->Read(Box({0, 0}, {1, 3}, {1, 2}), View(out.data(), {1, 3}, 2));
  EXPECT_EQ(stepped.code(), StatusCode::kOutOfRange) << "0, 2, 4: the last index is out of bounds";
  EXPECT_EQ(a->Read(Box({0}, {4}), View(out.data(), {4}, 2)).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(a->Read(Box({0, 0}, {2, 2}, {0, 1}), View(out.data(), {2, 2}, 2)).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(a->Read(Box({0, 0}, {2, 2}), View(out.data(), {2, 3}, 2)).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(a->Read(Box({0, 0}, {-1, 2}), View(out.data(), {-1, 2}, 2)).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(a->ReadBatch({Box({0, 0}, {1, 1})}, {}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(out, untouched) << "argument errors must come before any write";
  // An empty selection is fine and reads nothing, wherever it starts.
  EXPECT_TRUE(a->Read(Box({99, 0}, {0, 4}), View(out.data(), {0, 4}, 2)).ok());
  EXPECT_EQ(out, untouched);
}

TEST(ArrayTest, HugeStepsAndOverflowingSelections) {
  TempDir dir;
  dir.Write("arr/zarr.json", Shard69Json("end"));
  dir.Write("arr/c/0/0", lsio_test::Shard69TensorStore());
  auto a = OpenOk(dir.Join("arr"));
  ASSERT_NE(a, nullptr);
  const std::vector<uint16_t> v = lsio_test::Shard69Values();
  // One index with any step reads that index (the step used to overflow the planner).
  for (int64_t step : {INT64_MAX, INT64_MAX - 1, int64_t{1} << 62}) {
    std::vector<uint16_t> out(1, 0);
    Status st = a->Read(Box({3, 2}, {1, 1}, {step, step}), View(out.data(), {1, 1}, 2));
    ASSERT_TRUE(st.ok()) << st.ToString();
    EXPECT_EQ(out[0], v[14]);
  }
  // Two indices whose last one does not fit in int64: outside, not wrapped into range.
  std::vector<uint16_t> out(4, 0x5555);
  Status st = a->Read(Box({1, 0}, {2, 1}, {INT64_MAX, 1}), View(out.data(), {2, 1}, 2));
  EXPECT_EQ(st.code(), StatusCode::kOutOfRange) << st.ToString();
  st = a->Read(Box({INT64_MAX, 0}, {1, 1}), View(out.data(), {1, 1}, 2));
  EXPECT_EQ(st.code(), StatusCode::kOutOfRange);
  DstView tall;  // by hand: View() would compute the (unused) extent INT64_MAX * 2
  tall.data = reinterpret_cast<uint8_t*>(out.data());
  tall.shape = {INT64_MAX, 1};
  tall.byte_strides = {2, 2};
  st = a->Read(Box({1, 0}, {INT64_MAX, 1}), tall);
  EXPECT_EQ(st.code(), StatusCode::kOutOfRange);
  EXPECT_EQ(out, std::vector<uint16_t>(4, 0x5555));
}

// Rows (start, count, step, dst_offset) per dimension as an OuterSelection over `out`.
struct OuterRuns {
  std::vector<std::vector<int64_t>> rows;
  OuterSelection sel;
  OuterRuns(std::vector<std::vector<int64_t>> r, uint16_t* out, std::vector<int64_t> shape) : rows(std::move(r)) {
    for (auto& x : rows) {
      sel.runs.push_back(x.data());
      sel.num_runs.push_back(x.size() / 4);
    }
    sel.dst = reinterpret_cast<uint8_t*>(out);
    sel.shape = shape;
    sel.byte_strides.resize(shape.size());
    int64_t s = 2;
    for (size_t d = shape.size(); d-- > 0;) {
      sel.byte_strides[d] = s;
      s *= shape[d];
    }
  }
};

TEST(ArrayTest, ReadOuterReadsTheProductOfRuns) {
  for (const Blob69& b : kBlobs) {
    TempDir dir;
    dir.Write("arr/zarr.json", Shard69Json(b.location));
    dir.Write("arr/c/0/0", b.bytes());
    for (int threads : {1, 3}) {
      OpenOptions o;
      o.threads = threads;
      auto a = OpenOk(dir.Join("arr"), o);
      ASSERT_NE(a, nullptr);
      const std::vector<uint16_t> v = lsio_test::Shard69Values();
      // rows [3, 1, 1, 2] (3; then 1,1 as step 0 is not allowed: two runs; then 2),
      // cols [3, 2, 1, 0, 2] (a backwards run, then 2).
      std::vector<uint16_t> out(4 * 5, 0);
      OuterRuns r({{3, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 2, 2, 1, 1, 3}, {3, 4, -1, 0, 2, 1, 1, 4}}, out.data(), {4, 5});
      Status st = a->ReadOuter(r.sel);
      ASSERT_TRUE(st.ok()) << st.ToString();
      const int rows[] = {3, 1, 1, 2};
      const int cols[] = {3, 2, 1, 0, 2};
      for (int i = 0; i < 4; ++i) {
        for (int j = 0; j < 5; ++j) EXPECT_EQ(out[5 * i + j], v[4 * rows[i] + cols[j]]) << b.name << " " << i << "," << j;
      }
      // With a transform (everything through scratch and the converter).
      std::vector<float> f(4 * 5, 0);
      OuterRuns rf({{3, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 2, 2, 1, 1, 3}, {3, 4, -1, 0, 2, 1, 1, 4}}, nullptr, {4, 5});
      rf.sel.dst = reinterpret_cast<uint8_t*>(f.data());
      rf.sel.byte_strides = {20, 4};
      ElementTransform t{"float32", 2.0, 1.0};
      st = a->ReadOuter(rf.sel, {}, &t);
      ASSERT_TRUE(st.ok()) << st.ToString();
      for (int i = 0; i < 4; ++i) {
        for (int j = 0; j < 5; ++j) EXPECT_EQ(f[5 * i + j], 2.0f * v[4 * rows[i] + cols[j]] + 1.0f);
      }
    }
  }
}

TEST(ArrayTest, ReadOuterChecksRunsExactly) {
  TempDir dir;
  dir.Write("arr/zarr.json", Shard69Json("end"));
  auto a = OpenOk(dir.Join("arr"));
  ASSERT_NE(a, nullptr);
  std::vector<uint16_t> out(8, 0x5555);
  // A step of INT64_MIN: its second index wraps in int64 arithmetic.
  OuterRuns wrap({{3, 2, INT64_MIN, 0}, {0, 1, 1, 0}}, out.data(), {2, 1});
  EXPECT_EQ(a->ReadOuter(wrap.sel).code(), StatusCode::kOutOfRange);
  OuterRuns big({{1, 2, INT64_MAX, 0}, {0, 1, 1, 0}}, out.data(), {2, 1});
  EXPECT_EQ(a->ReadOuter(big.sel).code(), StatusCode::kOutOfRange);
  OuterRuns past({{0, 2, 1, 1}, {0, 1, 1, 0}}, out.data(), {2, 1});
  EXPECT_EQ(a->ReadOuter(past.sel).code(), StatusCode::kInvalidArgument) << "output range past the view";
  EXPECT_EQ(out, std::vector<uint16_t>(8, 0x5555));
  // One index with the most negative step is just that index.
  OuterRuns one({{3, 1, INT64_MIN, 0}, {2, 1, INT64_MAX, 0}}, out.data(), {1, 1});
  EXPECT_TRUE(a->ReadOuter(one.sel).ok());
}

TEST(ArrayTest, MemoryLimitCoversPlanningBeforeItAllocates) {
  TempDir dir;
  dir.Write("arr/zarr.json", Shard69Json("end"));
  dir.Write("arr/c/0/0", lsio_test::Shard69TensorStore());
  OpenOptions o;
  o.memory_limit = 16 << 20;
  auto a = OpenOk(dir.Join("arr"), o);
  ASSERT_NE(a, nullptr);
  // A million one-element crops: the plan's bound exceeds 16 MiB, so the call fails before
  // building it (the selections are flat arrays, nothing per crop is allocated).
  const size_t n = 1'000'000;
  std::vector<int64_t> starts(2 * n);
  for (size_t i = 0; i < n; ++i) {
    starts[2 * i] = static_cast<int64_t>(i % 4);
    starts[2 * i + 1] = static_cast<int64_t>((i / 4) % 4);
  }
  std::vector<uint16_t> out(n, 0);
  const int64_t ones[2] = {1, 1};
  const int64_t strides[2] = {2, 2};
  BoxBatch batch;
  batch.ndim = 2;
  batch.size = n;
  batch.starts = starts.data();
  batch.starts_stride = 2;
  batch.counts = ones;
  batch.dst_strides = strides;
  batch.dst = reinterpret_cast<uint8_t*>(out.data());
  batch.dst_box_stride = 2;
  Status st = a->ReadBoxes(batch);
  EXPECT_EQ(st.code(), StatusCode::kResourceExhausted) << st.ToString();
  // Without the limit the same batch reads correctly.
  auto b = OpenOk(dir.Join("arr"));
  ASSERT_NE(b, nullptr);
  st = b->ReadBoxes(batch);
  ASSERT_TRUE(st.ok()) << st.ToString();
  const std::vector<uint16_t> v = lsio_test::Shard69Values();
  for (size_t i = 0; i < n; i += 9973) EXPECT_EQ(out[i], v[4 * (i % 4) + (i / 4) % 4]) << i;
}

TEST(ArrayTest, BackendNamesAndInfo) {
  TempDir dir;
  dir.Write("arr/zarr.json", Shard69Json("end"));
  const IoBackendInfo info = GetIoBackendInfo();
  EXPECT_EQ(info.auto_backend, info.uring_available ? "uring" : "pread");
  EXPECT_EQ(info.reason.empty(), info.uring_available);
  if (lsio_test::RequireUring()) {
    EXPECT_TRUE(info.uring_available) << "LSIO_REQUIRE_URING=1: " << info.reason;
  }
  OpenOptions o;
  o.io = "pread";
  EXPECT_EQ(OpenOk(dir.Join("arr"), o)->BackendName().value(), "pread");
  o.io = "auto";
  EXPECT_EQ(OpenOk(dir.Join("arr"), o)->BackendName().value(), info.uring_available ? "uring+nowait" : "pread");
  o.io = "uring";
  auto forced = OpenOk(dir.Join("arr"), o)->BackendName();
  if (info.uring_available) {
    ASSERT_TRUE(forced.ok());
    EXPECT_EQ(forced.value(), "uring");
  } else {
    ASSERT_FALSE(forced.ok());
    EXPECT_EQ(forced.status().code(), StatusCode::kUnavailable);
    EXPECT_NE(forced.status().error_number(), 0);
  }
}

TEST(ArrayTest, OpenAndSingleThreadedReadsCreateNoThreads) {
  TempDir dir;
  dir.Write("arr/zarr.json", Shard69Json("end"));
  dir.Write("arr/c/0/0", lsio_test::Shard69ZarrPythonEnd());
  const int before = CountThreads();
  ASSERT_GT(before, 0);
  OpenOptions o;
  o.threads = 1;
  auto a = OpenOk(dir.Join("arr"), o);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(CountThreads(), before) << "Open must not create threads";
  EXPECT_EQ(ReadAll16(*a), lsio_test::Shard69Values());
  EXPECT_EQ(CountThreads(), before) << "a threads=1 read must not create threads";
}

TEST(ArrayTest, ForkedChildReadsThroughTheParentsArray) {
  TempDir dir;
  dir.Write("arr/zarr.json", Shard69Json("end"));
  dir.Write("arr/c/0/0", lsio_test::Shard69TensorStore());
  for (int threads : {1, 2}) {
    OpenOptions o;
    o.threads = threads;
    auto a = OpenOk(dir.Join("arr"), o);
    ASSERT_NE(a, nullptr);
    ASSERT_EQ(ReadAll16(*a), lsio_test::Shard69Values());  // rings, fds, index cached in the parent
    const int rc = lsio_test::RunInChild([&] {
      for (int rep = 0; rep < 3; ++rep) {
        std::vector<uint16_t> out(16, 0);
        if (!a->Read(Box({0, 0}, {4, 4}), View(out.data(), {4, 4}, 2)).ok()) return 1;
        if (out != lsio_test::Shard69Values()) return 2;
      }
      return 0;
    });
    EXPECT_EQ(rc, 0) << "threads=" << threads;
    EXPECT_EQ(ReadAll16(*a), lsio_test::Shard69Values()) << "the parent keeps reading";
  }
}

}  // namespace
}  // namespace lsio
