// Reads served in place from a file's mapping (io="auto", read/call.cc ServeMapped): a hot
// shard's chunks are decoded from the mapping (StoreStats::mapped_reads) and equal the
// values written, with 1 and 3 threads; io="pread" and io="uring" never map; and a shard
// truncated between the residency check and the access (a writer cutting the file while
// the call runs) neither kills the process with SIGBUS nor returns zeros as data: the unit
// is read instead, which meets the file's new end and fails the call naming the file and
// chunk, leaving the caller's memory outside the selection untouched; a shard rewritten
// with the same bytes meanwhile is read again and gives the values.
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "io/fd_cache.h"
#include "read/executor.h"
#include "source/index_cache.h"
#include "store/local_store.h"
#include "test_util.h"
#include "zarr/metadata.h"

namespace lsio {
namespace {

using lsio_test::Box;
using lsio_test::Bytes;
using lsio_test::TempDir;

constexpr int32_t kSentinel = 0x5A5A5A5A;
constexpr int64_t kN = 16;      // array [16, 16] int32, one shard
constexpr int64_t kInner = 8;   // inner chunks [8, 8], zstd

int32_t Value(int64_t r, int64_t c) { return static_cast<int32_t>(r * 1000 + c); }

constexpr const char* kJson = R"({"zarr_format": 3, "node_type": "array", "shape": [16, 16],
    "data_type": "int32", "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [16, 16]}},
    "chunk_key_encoding": {"name": "default"}, "fill_value": -1,
    "codecs": [{"name": "sharding_indexed", "configuration": {"chunk_shape": [8, 8],
      "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "zstd", "configuration": {"level": 1}}],
      "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}],
      "index_location": "end"}}]})";

// The shard c/0/0: four zstd inner chunks, then the index (offset, nbytes each, crc32c).
std::string WriteShardedZstd(const TempDir& dir) {
  dir.Write("arr/zarr.json", std::string(kJson));
  Bytes data, index;
  for (int64_t ir = 0; ir < kN / kInner; ++ir) {
    for (int64_t ic = 0; ic < kN / kInner; ++ic) {
      Bytes raw;
      for (int64_t r = 0; r < kInner; ++r)
        for (int64_t c = 0; c < kInner; ++c)
          lsio_test::PutLE<uint32_t>(raw, static_cast<uint32_t>(Value(ir * kInner + r, ic * kInner + c)));
      Bytes z(ZSTD_compressBound(raw.size()));
      const size_t n = ZSTD_compress(z.data(), z.size(), raw.data(), raw.size(), 1);
      EXPECT_FALSE(ZSTD_isError(n));
      z.resize(n);
      lsio_test::PutLE<uint64_t>(index, data.size());
      lsio_test::PutLE<uint64_t>(index, z.size());
      data.insert(data.end(), z.begin(), z.end());
    }
  }
  return dir.Write("arr/c/0/0", lsio_test::Concat({data, lsio_test::WithCrc(index)}));
}

int64_t CtimeNs(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return -1;
  return static_cast<int64_t>(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec;
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// LocalStore, except that the file behind a mapped range is cut to 0 bytes right after the
// store found the range resident, before the caller touches it (and, with `refill`, written
// again with the bytes it had).
class ShrinkingStore final : public Store {
 public:
  ShrinkingStore(std::string root, LocalStoreOptions o, std::string victim, bool refill)
      : inner_(std::move(root), o), victim_(std::move(victim)), refill_(refill) {}
  Result<ObjectInfo> Stat(std::string_view key) override { return inner_.Stat(key); }
  Result<std::optional<std::string>> ReadAll(std::string_view key, uint64_t max_bytes) override {
    return inner_.ReadAll(key, max_bytes);
  }
  std::string Location(std::string_view key) const override { return inner_.Location(key); }
  Result<ObjectRef> Open(std::string_view key) override { return inner_.Open(key); }
  Result<ObjectRef> OpenForOneRead(std::string_view key) override { return inner_.OpenForOneRead(key); }
  void Read(std::span<RangeRead> reads, const std::function<void(size_t)>& on_done,
            const std::function<bool()>& cancelled) override {
    inner_.Read(reads, on_done, cancelled);
  }
  StoreTraits traits() override { return inner_.traits(); }
  Result<std::string> TransportName() override { return inner_.TransportName(); }
  StoreStats& stats() override { return inner_.stats(); }
  MappedRange Mapped(StoreObject& obj, uint64_t offset, uint64_t length) override {
    MappedRange m = inner_.Mapped(obj, offset, length);
    if (m.bytes != nullptr && !cut_) {
      std::string bytes;
      if (refill_) bytes = Slurp(victim_);
      const int64_t before = CtimeNs(victim_);
      cut_ = truncate(victim_.c_str(), 0) == 0;
      EXPECT_TRUE(cut_);
      if (refill_) {  // the same bytes back, in place: only the file's times tell
        FILE* f = fopen(victim_.c_str(), "r+b");
        EXPECT_NE(f, nullptr);
        if (f != nullptr) {
          EXPECT_EQ(fwrite(bytes.data(), 1, bytes.size(), f), bytes.size());
          fclose(f);
        }
      }
      times_moved_ = CtimeNs(victim_) != before;
    }
    return m;
  }
  bool cut() const { return cut_; }
  /// The file system gave the cut a new ctime (not within its timestamp granularity).
  bool times_moved() const { return times_moved_; }

 private:
  LocalStore inner_;
  std::string victim_;
  bool refill_;
  bool cut_ = false;
  bool times_moved_ = false;
};

struct Opened {
  ArrayMetadata meta;
  ArrayLayout layout;
  IndexCache index{1 << 20};
  FdCache files{16};
};

std::unique_ptr<Opened> OpenArray(const std::string& root) {
  auto o = std::make_unique<Opened>();
  auto m = ParseArrayMetadata(kJson);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  if (!m.ok()) return nullptr;
  o->meta = std::move(m).value();
  auto l = BuildArrayLayout(o->meta, root);
  EXPECT_TRUE(l.ok()) << l.status().ToString();
  if (!l.ok()) return nullptr;
  o->layout = std::move(l).value();
  return o;
}

// A [20, 20] int32 canvas of sentinels; reads go to the sub-view at (2, 2).
struct Canvas {
  std::vector<int32_t> buf = std::vector<int32_t>(20 * 20, kSentinel);
  DstView ViewOf(int64_t rows, int64_t cols) {
    DstView v;
    v.data = reinterpret_cast<uint8_t*>(buf.data() + 2 * 20 + 2);
    v.shape = {rows, cols};
    v.byte_strides = {20 * 4, 4};
    return v;
  }
  // "" when the view holds the values of rows r0.., cols c0.. (or, not `exact`, sentinels or
  // anything) and everything outside it still holds the sentinel.
  std::string Check(int64_t r0, int64_t c0, int64_t rows, int64_t cols, bool exact) const {
    for (int64_t r = 0; r < 20; ++r) {
      for (int64_t c = 0; c < 20; ++c) {
        const int32_t got = buf[static_cast<size_t>(r * 20 + c)];
        const bool inside = r >= 2 && r < 2 + rows && c >= 2 && c < 2 + cols;
        if (inside && !exact) continue;
        const int32_t want = inside ? Value(r0 + r - 2, c0 + c - 2) : kSentinel;
        if (got != want) return "element (" + std::to_string(r) + ", " + std::to_string(c) + ") is " + std::to_string(got);
      }
    }
    return "";
  }
};

Status ReadWith(Opened& a, Store& store, int threads, const Selection& sel, const DstView& dst) {
  ReadContext ctx;
  ctx.layout = &a.layout;
  ctx.store = &store;
  ctx.index_cache = &a.index;
  ctx.threads = threads;
  return ExecuteRead(ctx, {sel}, {dst});
}

TEST(MappedReadTest, HotChunksAreDecodedFromTheMapping) {
  TempDir dir;
  WriteShardedZstd(dir);  // just written: in the page cache
  for (int threads : {1, 3}) {
    SCOPED_TRACE(threads);
    auto a = OpenArray(dir.Join("arr"));
    ASSERT_NE(a, nullptr);
    LocalStoreOptions so;
    so.files = &a->files;
    LocalStore store(a->layout.root, so);
    Canvas out;
    const Status st = ReadWith(*a, store, threads, Box({1, 3}, {14, 12}), out.ViewOf(14, 12));
    ASSERT_TRUE(st.ok()) << st.ToString();
    EXPECT_EQ(out.Check(1, 3, 14, 12, /*exact=*/true), "");
    EXPECT_GT(store.stats().mapped_reads.load(), 0u);
  }
}

TEST(MappedReadTest, ExplicitBackendsNeverMap) {
  TempDir dir;
  WriteShardedZstd(dir);
  for (IoMode mode : {IoMode::kPread, IoMode::kUring}) {
    SCOPED_TRACE(IoModeName(mode));
    auto a = OpenArray(dir.Join("arr"));
    ASSERT_NE(a, nullptr);
    LocalStoreOptions so;
    so.files = &a->files;
    so.mode = mode;
    LocalStore store(a->layout.root, so);
    if (!store.TransportName().ok()) continue;  // io_uring refused here: nothing to check
    Canvas out;
    const Status st = ReadWith(*a, store, 1, Box({0, 0}, {16, 16}), out.ViewOf(16, 16));
    ASSERT_TRUE(st.ok()) << st.ToString();
    EXPECT_EQ(out.Check(0, 0, 16, 16, true), "");
    EXPECT_EQ(store.stats().mapped_reads.load(), 0u);
  }
}

TEST(MappedReadTest, AFileCutUnderTheMappingFailsTheCallNamingFileAndChunk) {
  for (int threads : {1, 3}) {
    SCOPED_TRACE(threads);
    TempDir dir;
    const std::string shard = WriteShardedZstd(dir);
    auto a = OpenArray(dir.Join("arr"));
    ASSERT_NE(a, nullptr);
    LocalStoreOptions so;
    so.files = &a->files;
    ShrinkingStore store(a->layout.root, so, shard, /*refill=*/false);
    Canvas out;  // one inner chunk: (1, 1)
    const Status st = ReadWith(*a, store, threads, Box({9, 9}, {6, 6}), out.ViewOf(6, 6));
    ASSERT_TRUE(store.cut()) << "the read was not served from the mapping";
    ASSERT_FALSE(st.ok());
    EXPECT_TRUE(st.code() == StatusCode::kIoError || st.code() == StatusCode::kDataLoss) << st.ToString();
    EXPECT_EQ(st.path(), shard);
    EXPECT_EQ(st.chunk(), "(1, 1)");
    EXPECT_NE(st.ToString().find("end of file"), std::string::npos) << st.ToString();
    EXPECT_EQ(out.Check(9, 9, 6, 6, /*exact=*/false), "") << "written outside the selection";
    EXPECT_EQ(store.stats().mapped_reads.load(), 0u);
  }
}

TEST(MappedReadTest, AFileRewrittenUnderTheMappingIsReadAgain) {
  for (int threads : {1, 3}) {
    SCOPED_TRACE(threads);
    TempDir dir;
    const std::string shard = WriteShardedZstd(dir);
    auto a = OpenArray(dir.Join("arr"));
    ASSERT_NE(a, nullptr);
    LocalStoreOptions so;
    so.files = &a->files;
    ShrinkingStore store(a->layout.root, so, shard, /*refill=*/true);
    Canvas out;
    const Status st = ReadWith(*a, store, threads, Box({9, 9}, {6, 6}), out.ViewOf(6, 6));
    ASSERT_TRUE(store.cut());
    ASSERT_TRUE(st.ok()) << st.ToString();
    EXPECT_EQ(out.Check(9, 9, 6, 6, /*exact=*/true), "");
    // Seen only through the file's times (its size is back): where they moved, the unit must
    // have been read, not served from the map.
    if (store.times_moved()) EXPECT_EQ(store.stats().mapped_reads.load(), 0u) << "the change went unseen";
  }
}

}  // namespace
}  // namespace lsio
