// Shared fixture of the lsio C++ micro-benchmarks (benchmarks/cpp/*_bench.cc): test data,
// temporary files, sharded Zarr v3 stores written from C++, and in-memory layouts for the
// planner. Header-only; used only by the lsio_microbench binary.
//
// Usage:
//   float v = WeatherValue(t, y, x);          // smooth field + noise, zstd-3 ratio ~1.29
//   Bytes f = ZstdFrame(data, n, 3);          // a zstd frame as the zstd codec stores it
//   BenchDir& d = BenchDir::Shared();         // one temp dir per process, removed at exit
//   std::string p = WriteShardedStore(d, "w", {{8,1024,1024}, {8,512,512}, {1,128,128}, 3});
//   BenchLayout l = MakeShardedLayout(shape, shard, inner);  // ArrayLayout for BuildTasks
//
// Why not tests/cpp/test_util.h: it depends on GoogleTest (testing::TempDir, EXPECT_*),
// and the benchmark binary must build without GTest.
//
// Environment:
//   LSIO_BENCH_DIR     where temp files go (default $TMPDIR, else /tmp). Use a real disk,
//                      not tmpfs, so that "page cache hot" means what it says.
//   LSIO_BENCH_STRICT  =1: a failing read or decode exits the binary with status 2 instead
//                      of marking one case as errored (the CI smoke test sets it, since
//                      Google Benchmark 1.7 exits 0 after SkipWithError).
#pragma once

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <nlohmann/json.hpp>

#include "codec/chain.h"
#include "codec/registry.h"
#include "codec/codec.h"
#include "lsio/box.h"
#include "read/planner.h"
#include "zarr/layout.h"
#include "zarr/shard_index.h"
#include "zarr/sharding_config.h"

namespace lsio_bench {

using Bytes = std::vector<uint8_t>;

// ------------------------------------------------------------------ data

inline uint64_t SplitMix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/// A weather-like float32 value at (t, y, x): a smooth 280 K field plus noise of sigma 0.5.
/// The noise fills the low mantissa bits, so zstd-3 compresses it only ~1.29x, like real
/// reanalysis fields; regular synthetic data would compress 25x and flatter every decoder.
/// A pure function of the coordinates, so every chunk of a store can be generated alone.
inline float WeatherValue(int64_t t, int64_t y, int64_t x) {
  const uint64_t h = SplitMix64(static_cast<uint64_t>(t) * 0x100000001B3ull ^
                                static_cast<uint64_t>(y) * 0x1000193ull ^ static_cast<uint64_t>(x));
  // Sum of four 16-bit uniforms: close enough to a normal for compression purposes.
  const double n = (static_cast<double>((h & 0xFFFF) + ((h >> 16) & 0xFFFF) + ((h >> 32) & 0xFFFF) +
                                        (h >> 48)) / 65536.0 - 2.0) * 1.7320508;
  return static_cast<float>(280.0 + 15.0 * std::sin(0.02 * static_cast<double>(x) + 0.3 * static_cast<double>(t)) *
                                        std::cos(0.015 * static_cast<double>(y)) + 0.5 * n);
}

/// The values of the box [start, start + count) of a 3-d weather array, C order.
inline std::vector<float> WeatherBox(const std::vector<int64_t>& start, const std::vector<int64_t>& count) {
  std::vector<float> v(static_cast<size_t>(count[0] * count[1] * count[2]));
  size_t i = 0;
  for (int64_t t = 0; t < count[0]; ++t)
    for (int64_t y = 0; y < count[1]; ++y)
      for (int64_t x = 0; x < count[2]; ++x) v[i++] = WeatherValue(start[0] + t, start[1] + y, start[2] + x);
  return v;
}

/// One zstd frame of `n` bytes with the content size recorded, as zarr-python writes it.
inline Bytes ZstdFrame(const void* data, size_t n, int level) {
  Bytes out(ZSTD_compressBound(n));
  const size_t c = ZSTD_compress(out.data(), out.size(), data, n, level);
  if (ZSTD_isError(c)) throw std::runtime_error(ZSTD_getErrorName(c));
  out.resize(c);
  return out;
}

/// Fails the whole binary loudly: a fixture that cannot be built would otherwise measure
/// an error path and report it as a speed.
[[noreturn]] inline void Die(const std::string& what) {
  std::fprintf(stderr, "lsio_microbench: %s\n", what.c_str());
  std::exit(2);
}

/// Marks the case as failed, or with LSIO_BENCH_STRICT=1 ends the process. Not for
/// "io_uring unavailable here", which is an environment fact rather than a failure.
inline void Fail(benchmark::State& state, const std::string& what) {
  const char* strict = std::getenv("LSIO_BENCH_STRICT");
  if (strict != nullptr && std::string(strict) == "1") Die(what);
  state.SkipWithError(what.c_str());
}

// ------------------------------------------------------------------ files

/// A fresh temp directory for this process, removed (recursively) at exit.
class BenchDir {
 public:
  static BenchDir& Shared() {
    static BenchDir dir;
    return dir;
  }
  const std::string& path() const { return path_; }
  std::string Join(const std::string& rel) const { return path_ + "/" + rel; }

  std::string Write(const std::string& rel, const void* data, size_t n) const {
    const std::string full = Join(rel);
    std::filesystem::create_directories(std::filesystem::path(full).parent_path());
    std::ofstream f(full, std::ios::binary | std::ios::trunc);
    f.write(static_cast<const char*>(data), static_cast<std::streamsize>(n));
    f.close();
    if (!f.good()) Die("cannot write " + full);
    return full;
  }
  std::string Write(const std::string& rel, const std::string& s) const { return Write(rel, s.data(), s.size()); }
  std::string Write(const std::string& rel, const Bytes& b) const { return Write(rel, b.data(), b.size()); }

  ~BenchDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }

 private:
  BenchDir() {
    const char* base = std::getenv("LSIO_BENCH_DIR");
    if (base == nullptr || *base == '\0') base = std::getenv("TMPDIR");
    if (base == nullptr || *base == '\0') base = "/tmp";
    std::string tmpl = std::string(base) + "/lsio_microbench_XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (mkdtemp(buf.data()) == nullptr) Die("mkdtemp failed under " + std::string(base));
    path_ = buf.data();
  }
  std::string path_;
};

/// Reads every byte of `path` once so that later reads hit the page cache.
inline void WarmPageCache(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) Die("cannot open " + path);
  std::vector<uint8_t> buf(4 << 20);
  while (read(fd, buf.data(), buf.size()) > 0) {
  }
  close(fd);
}

inline void WarmTree(const std::string& dir) {
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir))
    if (e.is_regular_file()) WarmPageCache(e.path().string());
}

// ------------------------------------------------------------------ stores

/// A 3-d float32 sharded store: bytes + zstd inner chunks, bytes + crc32c index at the end.
struct StoreSpec {
  std::vector<int64_t> shape;
  std::vector<int64_t> shard;
  std::vector<int64_t> inner;
  int level = 3;
};

inline std::string StoreJson(const StoreSpec& s) {
  nlohmann::json j = {
      {"zarr_format", 3},
      {"node_type", "array"},
      {"shape", s.shape},
      {"data_type", "float32"},
      {"chunk_grid", {{"name", "regular"}, {"configuration", {{"chunk_shape", s.shard}}}}},
      {"chunk_key_encoding", {{"name", "default"}, {"configuration", {{"separator", "/"}}}}},
      {"fill_value", 0.0},
      {"codecs",
       {{{"name", "sharding_indexed"},
         {"configuration",
          {{"chunk_shape", s.inner},
           {"codecs", {{{"name", "bytes"}, {"configuration", {{"endian", "little"}}}},
                       {{"name", "zstd"}, {"configuration", {{"level", s.level}, {"checksum", false}}}}}},
           {"index_codecs", {{{"name", "bytes"}, {"configuration", {{"endian", "little"}}}},
                             {{"name", "crc32c"}}}},
           {"index_location", "end"}}}}}},
      {"attributes", nlohmann::json::object()}};
  return j.dump();
}

/// Writes the store `name` under `dir` (shape must be a multiple of the shard shape) and
/// returns its path. Takes ~0.1 s per 32 MiB of data (zstd-3 encode dominates).
inline std::string WriteShardedStore(const BenchDir& dir, const std::string& name, const StoreSpec& s) {
  dir.Write(name + "/zarr.json", StoreJson(s));
  std::vector<int64_t> shards(3), cps(3);
  for (int d = 0; d < 3; ++d) {
    if (s.shape[d] % s.shard[d] != 0 || s.shard[d] % s.inner[d] != 0) Die("store shapes must divide");
    shards[d] = s.shape[d] / s.shard[d];
    cps[d] = s.shard[d] / s.inner[d];
  }
  for (int64_t a = 0; a < shards[0]; ++a)
    for (int64_t b = 0; b < shards[1]; ++b)
      for (int64_t c = 0; c < shards[2]; ++c) {
        Bytes data;
        Bytes index;
        for (int64_t i = 0; i < cps[0]; ++i)
          for (int64_t j = 0; j < cps[1]; ++j)
            for (int64_t k = 0; k < cps[2]; ++k) {
              const std::vector<int64_t> start = {a * s.shard[0] + i * s.inner[0], b * s.shard[1] + j * s.inner[1],
                                                  c * s.shard[2] + k * s.inner[2]};
              const std::vector<float> v = WeatherBox(start, s.inner);
              const Bytes f = ZstdFrame(v.data(), v.size() * sizeof(float), s.level);
              const uint64_t entry[2] = {data.size(), f.size()};
              const auto* e = reinterpret_cast<const uint8_t*>(entry);  // x86-64: little endian
              index.insert(index.end(), e, e + sizeof(entry));
              data.insert(data.end(), f.begin(), f.end());
            }
        const uint32_t crc = lsio::Crc32c(index.data(), index.size());
        const auto* cb = reinterpret_cast<const uint8_t*>(&crc);
        index.insert(index.end(), cb, cb + 4);
        data.insert(data.end(), index.begin(), index.end());
        dir.Write(name + "/c/" + std::to_string(a) + "/" + std::to_string(b) + "/" + std::to_string(c), data);
      }
  return dir.Join(name);
}

// ------------------------------------------------------------------ layouts and views

/// Hand-filled metadata (owning the chain) and the ArrayLayout built from it (the planner
/// never touches files).
struct BenchLayout {
  lsio::ArrayMetadata meta;
  lsio::ArrayLayout l;
};

inline BenchLayout MakeShardedLayout(const std::vector<int64_t>& shape, const std::vector<int64_t>& shard,
                                     const std::vector<int64_t>& inner, size_t itemsize = 4) {
  BenchLayout t;
  lsio::ChunkSpec spec;
  spec.shape = inner;
  spec.itemsize = itemsize;
  spec.swap_unit = itemsize;
  auto c = lsio::ParseCodecChain(nlohmann::json::parse(R"(["bytes", {"name": "zstd", "configuration": {"level": 3}}])"),
                                   spec);
  if (!c.ok()) Die(c.status().ToString());
  t.meta.chain = std::move(c).value();
  t.meta.shape = shape;
  t.meta.read_chunk_shape = inner;
  t.meta.chunk_shape = shard;
  t.meta.dtype.type = lsio::DataType::kFloat32;
  t.meta.dtype.itemsize = itemsize;
  t.meta.fill_value.assign(itemsize, 0);
  nlohmann::json cfg = {{"chunk_shape", inner}, {"index_codecs", {"bytes", "crc32c"}}};
  auto sl = lsio::ParseShardLayout(cfg, shard);
  if (!sl.ok()) Die(sl.status().ToString());
  t.meta.sharding = sl.value();
  auto l = lsio::BuildArrayLayout(t.meta, "/nonexistent/");
  if (!l.ok()) Die(l.status().ToString());
  t.l = std::move(l).value();
  return t;
}

/// Address space for outputs the planner only computes addresses in (never touched):
/// a 1 GiB full-read output then costs no memory.
class ReservedRegion {
 public:
  explicit ReservedRegion(size_t n) : n_(n) {
    p_ = mmap(nullptr, n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p_ == MAP_FAILED) Die("mmap reserve failed");
  }
  ~ReservedRegion() { munmap(p_, n_); }
  uint8_t* data() const { return static_cast<uint8_t*>(p_); }

 private:
  void* p_;
  size_t n_;
};

inline lsio::DstView ContiguousView(uint8_t* data, const std::vector<int64_t>& shape, size_t itemsize) {
  lsio::DstView v;
  v.data = data;
  v.shape = shape;
  v.byte_strides.resize(shape.size());
  int64_t s = static_cast<int64_t>(itemsize);
  for (size_t d = shape.size(); d-- > 0;) {
    v.byte_strides[d] = s;
    s *= shape[d];
  }
  return v;
}

inline lsio::Selection Box(const std::vector<int64_t>& start, const std::vector<int64_t>& count) {
  lsio::Selection s;
  for (size_t d = 0; d < start.size(); ++d) s.push_back({start[d], count[d], 1});
  return s;
}

/// `n` crops of `crop` at random starts inside `shape`, starts multiples of `align`
/// (1 = anywhere, the usual training-loop case: crops straddle chunk borders).
inline std::vector<lsio::Selection> RandomCrops(const std::vector<int64_t>& shape, const std::vector<int64_t>& crop,
                                                size_t n, uint64_t seed, int64_t align = 1) {
  std::mt19937_64 rng(seed);
  std::vector<lsio::Selection> out;
  for (size_t i = 0; i < n; ++i) {
    std::vector<int64_t> start(shape.size());
    for (size_t d = 0; d < shape.size(); ++d) {
      const int64_t slots = (shape[d] - crop[d]) / align + 1;
      start[d] = static_cast<int64_t>(rng() % static_cast<uint64_t>(slots)) * align;
    }
    out.push_back(Box(start, crop));
  }
  return out;
}

/// Distinct read chunks a batch of step-1 selections touches: what the executor reads and
/// decodes (a chunk shared by two crops is decoded once), for chunks/s counters.
inline int64_t DistinctChunks(const std::vector<lsio::Selection>& sels, const std::vector<int64_t>& shape,
                              const std::vector<int64_t>& chunk) {
  std::set<std::vector<int64_t>> seen;
  const size_t nd = shape.size();
  for (const lsio::Selection& s : sels) {
    std::vector<int64_t> lo(nd), hi(nd), c(nd);
    for (size_t d = 0; d < nd; ++d) {
      lo[d] = s[d].start / chunk[d];
      hi[d] = (s[d].start + s[d].count - 1) / chunk[d];
    }
    c = lo;
    for (;;) {
      seen.insert(c);
      size_t d = nd;
      while (d-- > 0) {
        if (++c[d] <= hi[d]) break;
        c[d] = lo[d];
      }
      if (d == static_cast<size_t>(-1)) break;
    }
  }
  return static_cast<int64_t>(seen.size());
}

}  // namespace lsio_bench
