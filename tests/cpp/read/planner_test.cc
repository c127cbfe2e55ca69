// The planner (pure): selections -> deduplicated chunk tasks with pieces and direct targets,
// and resolved tasks -> coalesced I/O units (max_gap, max_request, per file, sorted by
// offset, fills grouped, direct uncompressed reads kept apart).
#include "read/planner.h"

#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "codec/chain.h"
#include "codec/registry.h"
#include "test_util.h"
#include "zarr/layout.h"
#include "zarr/shard_index.h"
#include "zarr/sharding_config.h"

namespace lsio {
namespace {

using lsio_test::View;
using lsio_test::Box;

// Hand-filled metadata (owning the chain) and the layout BuildArrayLayout derives from it.
struct TestLayout {
  ArrayMetadata meta;
  ArrayLayout l;
};

// An array of `shape` with read chunks `chunk`; `codecs` is the inner chain; when
// `shard` is non-empty the array is sharded with that shard shape.
TestLayout MakeLayout(std::vector<int64_t> shape, std::vector<int64_t> chunk, size_t itemsize = 1,
                      const char* codecs = R"(["bytes"])", std::vector<int64_t> shard = {}) {
  TestLayout t;
  ChunkSpec spec;
  spec.shape = chunk;
  spec.itemsize = itemsize;
  spec.swap_unit = itemsize;
  auto c = ParseCodecChain(nlohmann::json::parse(codecs), spec);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  t.meta.chain = std::move(c).value();
  t.meta.shape = shape;
  t.meta.read_chunk_shape = chunk;
  t.meta.chunk_shape = shard.empty() ? chunk : shard;
  t.meta.dtype.itemsize = itemsize;
  t.meta.fill_value.assign(itemsize, 0);
  if (!shard.empty()) {
    nlohmann::json cfg = {{"chunk_shape", chunk}, {"index_codecs", {"bytes", "crc32c"}}};
    auto sl = ParseShardLayout(cfg, shard);
    EXPECT_TRUE(sl.ok()) << sl.status().ToString();
    t.meta.sharding = sl.value();
  }
  auto l = BuildArrayLayout(t.meta, "/nonexistent/");
  EXPECT_TRUE(l.ok()) << l.status().ToString();
  if (l.ok()) t.l = std::move(l).value();
  return t;
}

std::vector<int64_t> Coords(const Plan& p, const ChunkTask& t) {
  return std::vector<int64_t>(p.coords.begin() + t.coords, p.coords.begin() + t.coords + p.ndim);
}

// (src_start, count, step) per dimension of a piece.
std::vector<int64_t> Dims(const ArrayLayout& l, const Plan& p, const Piece& pc) {
  std::vector<int64_t> dims(3 * static_cast<size_t>(p.ndim));
  PieceBoxDims(l, p, pc, dims.data());
  return dims;
}

TEST(PlannerTest, SelectionSplitsIntoTheChunksItTouches) {
  TestLayout t = MakeLayout({10, 10}, {4, 4});
  std::vector<uint8_t> out(36);
  Plan p;
  BuildTasks(t.l, {Box({2, 3}, {6, 6})}, {View(out, {6, 6})}, &p);
  ASSERT_EQ(p.tasks.size(), 6u);
  const std::vector<std::vector<int64_t>> want = {{0, 0}, {0, 1}, {0, 2}, {1, 0}, {1, 1}, {1, 2}};
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(Coords(p, p.tasks[i]), want[i]) << i;
    EXPECT_EQ(p.tasks[i].num_pieces, 1u);
    EXPECT_EQ(p.tasks[i].direct, nullptr) << "partial chunks never go direct";
  }
  EXPECT_EQ(TaskCoords(p, p.tasks[5]), "(1, 2)");
  // Chunk (0,0): elements rows 2-3, col 3 -> src (2,3), counts (2,1), at out (0,0).
  const Piece& first = p.pieces[p.tasks[0].first_piece];
  EXPECT_EQ(Dims(t.l, p, first), (std::vector<int64_t>{2, 2, 1, 3, 1, 1}));
  EXPECT_EQ(first.dst, out.data());
  // Chunk (1,2): rows 4-7, col 8 -> src (0,0), counts (4,1), at out (2,5).
  const Piece& last = p.pieces[p.tasks[5].first_piece];
  EXPECT_EQ(Dims(t.l, p, last), (std::vector<int64_t>{0, 4, 1, 0, 1, 1}));
  EXPECT_EQ(last.dst, out.data() + 2 * 6 + 5);
}

TEST(PlannerTest, ChunkSharedBySeveralSelectionsIsOneTask) {
  TestLayout t = MakeLayout({8, 8}, {4, 4});
  std::vector<uint8_t> a(4), b(4), c(4);
  Plan p;
  // a and b both need chunk (0,0); c needs chunk (1,1) only.
  BuildTasks(t.l, {Box({0, 0}, {2, 2}), Box({2, 2}, {2, 2}), Box({5, 5}, {2, 2})},
             {View(a, {2, 2}), View(b, {2, 2}), View(c, {2, 2})}, &p);
  ASSERT_EQ(p.tasks.size(), 2u);
  EXPECT_EQ(Coords(p, p.tasks[0]), (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(p.tasks[0].num_pieces, 2u);
  EXPECT_EQ(p.tasks[1].num_pieces, 1u);
  // Pieces of a task are contiguous and point at their own selection's output.
  const Piece& p0 = p.pieces[p.tasks[0].first_piece];
  const Piece& p1 = p.pieces[p.tasks[0].first_piece + 1];
  EXPECT_EQ(p0.box, 0u);
  EXPECT_EQ(p0.dst, a.data());
  EXPECT_EQ(p1.box, 1u);
  EXPECT_EQ(p1.dst, b.data());
  EXPECT_EQ(Dims(t.l, p, p1), (std::vector<int64_t>{2, 2, 1, 2, 2, 1}));
  const Piece& p2 = p.pieces[p.tasks[1].first_piece];
  EXPECT_EQ(p2.box, 2u);
  EXPECT_EQ(p2.task, 1u);
  for (size_t i = 0; i < p.pieces.size(); ++i) {
    const ChunkTask& owner = p.tasks[p.pieces[i].task];
    EXPECT_GE(i, owner.first_piece);
    EXPECT_LT(i, owner.first_piece + owner.num_pieces);
  }
}

TEST(PlannerTest, IdenticalCropsShareEveryChunk) {
  TestLayout t = MakeLayout({16, 16}, {4, 4});
  std::vector<std::vector<uint8_t>> outs(5, std::vector<uint8_t>(36));
  std::vector<Selection> sels(5, Box({3, 3}, {6, 6}));
  std::vector<DstView> views;
  for (auto& o : outs) views.push_back(View(o, {6, 6}));
  Plan p;
  BuildTasks(t.l, sels, views, &p);
  EXPECT_EQ(p.tasks.size(), 9u);
  for (const ChunkTask& task : p.tasks) EXPECT_EQ(task.num_pieces, 5u);
  EXPECT_EQ(p.pieces.size(), 45u);
}

TEST(PlannerTest, ManyOverlappingBoxesGiveOneTaskPerChunk) {
  // Hundreds of random overlapping boxes over a 64 x 64 chunk grid: the deduplication table
  // sees thousands of chunks with many repeats; every chunk must be one task, with one piece
  // per box that touches it, whatever order the boxes come in.
  TestLayout t = MakeLayout({1024, 1024}, {16, 16});
  std::mt19937_64 rng(7);
  std::vector<Selection> sels;
  std::vector<std::vector<uint8_t>> outs;
  std::vector<DstView> views;
  std::map<std::pair<int64_t, int64_t>, uint32_t> want;  // chunk -> boxes touching it
  for (int b = 0; b < 300; ++b) {
    const int64_t h = 1 + static_cast<int64_t>(rng() % 120), w = 1 + static_cast<int64_t>(rng() % 120);
    const int64_t y = static_cast<int64_t>(rng() % static_cast<uint64_t>(1024 - h + 1));
    const int64_t x = static_cast<int64_t>(rng() % static_cast<uint64_t>(1024 - w + 1));
    sels.push_back(Box({y, x}, {h, w}));
    outs.emplace_back(static_cast<size_t>(h * w));
    for (int64_t cy = y / 16; cy <= (y + h - 1) / 16; ++cy) {
      for (int64_t cx = x / 16; cx <= (x + w - 1) / 16; ++cx) ++want[{cy, cx}];
    }
  }
  for (size_t b = 0; b < sels.size(); ++b) views.push_back(View(outs[b], {sels[b][0].count, sels[b][1].count}));
  Plan p;
  ASSERT_TRUE(BuildTasks(t.l, sels, views, &p).ok());
  ASSERT_EQ(p.tasks.size(), want.size());
  std::map<std::pair<int64_t, int64_t>, uint32_t> got;
  for (const ChunkTask& task : p.tasks) {
    const std::vector<int64_t> c = Coords(p, task);
    EXPECT_TRUE(got.emplace(std::make_pair(c[0], c[1]), task.num_pieces).second) << "chunk planned twice";
  }
  EXPECT_EQ(got, want);
}

TEST(PlannerTest, WholeChunkInContiguousRunIsDirect) {
  // Chunks span the full row width, so each whole chunk is one contiguous run of out.
  TestLayout t = MakeLayout({8, 8}, {4, 8}, 2);
  std::vector<uint8_t> out(8 * 8 * 2);
  Plan p;
  BuildTasks(t.l, {Box({0, 0}, {8, 8})}, {View(out, {8, 8}, 2)}, &p);
  ASSERT_EQ(p.tasks.size(), 2u);
  EXPECT_EQ(p.tasks[0].direct, out.data());
  EXPECT_EQ(p.tasks[1].direct, out.data() + 4 * 16);
}

TEST(PlannerTest, LeadingUnitChunkDimsStillDirect) {
  // Chunk [1, 8]: a single row is contiguous wherever it lands; chunk [1,4,8] likewise.
  TestLayout t = MakeLayout({8, 8}, {1, 8});
  std::vector<uint8_t> out(3 * 8);
  Plan p;
  BuildTasks(t.l, {Box({2, 0}, {3, 8})}, {View(out, {3, 8})}, &p);
  ASSERT_EQ(p.tasks.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(p.tasks[i].direct, out.data() + 8 * i);

  TestLayout t3 = MakeLayout({4, 4, 8}, {1, 4, 8}, 4);
  std::vector<uint8_t> out3(2 * 4 * 8 * 4);
  Plan p3;
  BuildTasks(t3.l, {Box({1, 0, 0}, {2, 4, 8})}, {View(out3, {2, 4, 8}, 4)}, &p3);
  ASSERT_EQ(p3.tasks.size(), 2u);
  EXPECT_EQ(p3.tasks[1].direct, out3.data() + 4 * 8 * 4);
}

TEST(PlannerTest, NonContiguousDestinationsAreNotDirect) {
  // (a) 4x4 chunks of an 8x8 output: chunk rows are 8 elements apart.
  TestLayout t = MakeLayout({8, 8}, {4, 4});
  std::vector<uint8_t> out(64);
  Plan a;
  BuildTasks(t.l, {Box({0, 0}, {8, 8})}, {View(out, {8, 8})}, &a);
  ASSERT_EQ(a.tasks.size(), 4u);
  for (const ChunkTask& task : a.tasks) EXPECT_EQ(task.direct, nullptr);

  // (b) a strided (every other element) view, though chunks span full rows.
  TestLayout w = MakeLayout({4, 8}, {4, 8});
  std::vector<uint8_t> big(4 * 16);
  DstView sv;
  sv.data = big.data();
  sv.shape = {4, 8};
  sv.byte_strides = {16, 2};
  Plan b;
  BuildTasks(w.l, {Box({0, 0}, {4, 8})}, {sv}, &b);
  ASSERT_EQ(b.tasks.size(), 1u);
  EXPECT_EQ(b.tasks[0].direct, nullptr);

  // (c) a negative-stride view.
  DstView nv;
  nv.data = big.data() + 3 * 8;
  nv.shape = {4, 8};
  nv.byte_strides = {-8, 1};
  Plan c;
  BuildTasks(w.l, {Box({0, 0}, {4, 8})}, {nv}, &c);
  EXPECT_EQ(c.tasks[0].direct, nullptr);

  // (d) chunk [2,1,8] in a [2,4,8] output: its two rows are not adjacent.
  TestLayout t3 = MakeLayout({2, 4, 8}, {2, 1, 8});
  std::vector<uint8_t> out3(64);
  Plan d;
  BuildTasks(t3.l, {Box({0, 0, 0}, {2, 4, 8})}, {View(out3, {2, 4, 8})}, &d);
  ASSERT_EQ(d.tasks.size(), 4u);
  for (const ChunkTask& task : d.tasks) EXPECT_EQ(task.direct, nullptr);
}

TEST(PlannerTest, EdgeChunksAndSteppedSelectionsAreNotDirect) {
  // Shape 6 rows, chunk 4 rows: chunk 1 is stored full-size but only 2 rows exist.
  TestLayout t = MakeLayout({6, 8}, {4, 8});
  std::vector<uint8_t> out(6 * 8);
  Plan p;
  BuildTasks(t.l, {Box({0, 0}, {6, 8})}, {View(out, {6, 8})}, &p);
  ASSERT_EQ(p.tasks.size(), 2u);
  EXPECT_EQ(p.tasks[0].direct, out.data());
  EXPECT_EQ(p.tasks[1].direct, nullptr);
  EXPECT_EQ(Dims(t.l, p, p.pieces[p.tasks[1].first_piece]), (std::vector<int64_t>{0, 2, 1, 0, 8, 1}));

  // Step 2 over 8 columns touches all chunks but never a whole one.
  TestLayout s = MakeLayout({8, 8}, {1, 8});
  std::vector<uint8_t> out2(2 * 4);
  Plan q;
  BuildTasks(s.l, {Box({0, 0}, {2, 4}, {1, 2})}, {View(out2, {2, 4})}, &q);
  ASSERT_EQ(q.tasks.size(), 2u);
  for (const ChunkTask& task : q.tasks) EXPECT_EQ(task.direct, nullptr);
  EXPECT_EQ(Dims(s.l, q, q.pieces[0]), (std::vector<int64_t>{0, 1, 1, 0, 4, 2}));
}

TEST(PlannerTest, LargeStepsTouchOnlySomeChunks) {
  TestLayout t = MakeLayout({1000}, {10});
  std::vector<uint8_t> out(10);
  Plan p;
  BuildTasks(t.l, {Box({5}, {10}, {100})}, {View(out, {10})}, &p);
  ASSERT_EQ(p.tasks.size(), 10u);
  for (size_t i = 0; i < 10; ++i) {
    EXPECT_EQ(Coords(p, p.tasks[i]), (std::vector<int64_t>{static_cast<int64_t>(10 * i)}));
    const Piece& pc = p.pieces[p.tasks[i].first_piece];
    EXPECT_EQ(Dims(t.l, p, pc), (std::vector<int64_t>{5, 1, 100}));
    EXPECT_EQ(pc.dst, out.data() + i);
  }
}

TEST(PlannerTest, StepSmallerThanChunkSplitsCountsCorrectly) {
  TestLayout t = MakeLayout({100}, {10});
  std::vector<uint8_t> out(34);
  Plan p;
  BuildTasks(t.l, {Box({0}, {34}, {3})}, {View(out, {34})}, &p);  // 0, 3, ..., 99
  ASSERT_EQ(p.tasks.size(), 10u);
  const int64_t counts[] = {4, 3, 3, 4, 3, 3, 4, 3, 3, 4};
  const int64_t starts[] = {0, 2, 1, 0, 2, 1, 0, 2, 1, 0};
  int64_t k = 0;
  for (size_t i = 0; i < 10; ++i) {
    const Piece& pc = p.pieces[p.tasks[i].first_piece];
    EXPECT_EQ(Dims(t.l, p, pc), (std::vector<int64_t>{starts[i], counts[i], 3})) << "chunk " << i;
    EXPECT_EQ(pc.dst, out.data() + k);
    k += counts[i];
  }
  EXPECT_EQ(k, 34);
}

TEST(PlannerTest, ZeroDimensionalArrayIsOneDirectTask) {
  TestLayout t = MakeLayout({}, {}, 8);
  std::vector<uint8_t> out(8);
  Plan p;
  BuildTasks(t.l, {Selection{}}, {View(out, {}, 8)}, &p);
  ASSERT_EQ(p.tasks.size(), 1u);
  EXPECT_EQ(p.tasks[0].num_pieces, 1u);
  EXPECT_EQ(p.tasks[0].direct, out.data());
  EXPECT_EQ(TaskCoords(p, p.tasks[0]), "()");
}

TEST(PlannerTest, EmptySelectionPlansNothing) {
  TestLayout t = MakeLayout({10, 10}, {4, 4});
  std::vector<uint8_t> out(1);
  Plan p;
  BuildTasks(t.l, {Box({3, 0}, {0, 10})}, {View(out, {0, 10})}, &p);
  EXPECT_TRUE(p.tasks.empty());
  EXPECT_TRUE(p.pieces.empty());
}

TEST(PlannerTest, ShardedTasksCarryShardAndLocalIndex) {
  // [8,8] array, [4,4] shards of [2,2] inner chunks: 2x2 shards, 2x2 chunks per shard.
  TestLayout t = MakeLayout({8, 8}, {2, 2}, 1, R"(["bytes"])", {4, 4});
  std::vector<uint8_t> out(1), out2(4);
  Plan p;
  // Element (7,3): chunk (3,1) -> shard (1,0) (id 2), local (1,1) -> 3.
  // Elements (4..5, 0..1): chunk (2,0) -> shard (1,0), local 0.
  BuildTasks(t.l, {Box({7, 3}, {1, 1}), Box({4, 0}, {2, 2})}, {View(out, {1, 1}), View(out2, {2, 2})}, &p);
  ASSERT_EQ(p.tasks.size(), 2u);
  ASSERT_EQ(p.shard_ids.size(), 1u) << "both chunks live in one shard";
  EXPECT_EQ(p.shard_ids[0], 2u);
  EXPECT_EQ(p.shard_coords, (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(p.tasks[0].shard, 0);
  EXPECT_EQ(p.tasks[0].local, 3u);
  EXPECT_EQ(p.tasks[1].shard, 0);
  EXPECT_EQ(p.tasks[1].local, 0u);
  EXPECT_EQ(p.tasks[1].direct, out2.data()) << "whole 2x2 chunk into a 2x2 output";
}

TEST(PlannerTest, PartialLastShardHasTheRightShardGrid) {
  // Shape 10 with shards of 4 (inner 2): shards 0,1,2; element 9 -> chunk 4 -> shard 2.
  TestLayout t = MakeLayout({10}, {2}, 1, R"(["bytes"])", {4});
  std::vector<uint8_t> out(1);
  Plan p;
  BuildTasks(t.l, {Box({9}, {1})}, {View(out, {1})}, &p);
  ASSERT_EQ(p.tasks.size(), 1u);
  EXPECT_EQ(p.shard_ids[0], 2u);
  EXPECT_EQ(p.tasks[0].local, 0u);
}

TEST(PlannerTest, HugeStepsTouchOneChunkPerIndexWithoutOverflow) {
  // arr[::sys.maxsize] and friends: one index, a step near INT64_MAX. The old
  // (end - start + step - 1) / step wrapped negative and the split never ended.
  TestLayout t = MakeLayout({1000}, {10});
  for (int64_t step : {INT64_MAX, INT64_MAX - 1, int64_t{1} << 62}) {
    for (int64_t start : {int64_t{0}, int64_t{5}, int64_t{999}}) {
      std::vector<uint8_t> out(1);
      Plan p;
      ASSERT_TRUE(BuildTasks(t.l, {Box({start}, {1}, {step})}, {View(out, {1})}, &p).ok());
      ASSERT_EQ(p.tasks.size(), 1u) << start << " " << step;
      EXPECT_EQ(Coords(p, p.tasks[0]), (std::vector<int64_t>{start / 10}));
      EXPECT_EQ(Dims(t.l, p, p.pieces[0]), (std::vector<int64_t>{start % 10, 1, step}));
    }
  }
  // Two indices 3*2^61 + 5 apart in an array of INT64_MAX elements whose chunks are
  // 3*2^61 long: the second chunk's end (6*2^61) does not fit in int64.
  const int64_t big = int64_t{3} << 61;
  TestLayout h = MakeLayout({INT64_MAX}, {big});
  std::vector<uint8_t> out(2);
  Plan p;
  ASSERT_TRUE(BuildTasks(h.l, {Box({1}, {2}, {big + 5})}, {View(out, {2})}, &p).ok());
  ASSERT_EQ(p.tasks.size(), 2u);
  EXPECT_EQ(Dims(h.l, p, p.pieces[p.tasks[0].first_piece]), (std::vector<int64_t>{1, 1, big + 5}));
  EXPECT_EQ(Dims(h.l, p, p.pieces[p.tasks[1].first_piece]), (std::vector<int64_t>{6, 1, big + 5}));
  EXPECT_EQ(p.pieces[p.tasks[1].first_piece].dst, out.data() + 1);
}

TEST(PlannerTest, BoundIsExactForPiecesAndCoversTheAllocation) {
  TestLayout t = MakeLayout({64, 64}, {8, 8});
  std::vector<uint8_t> out(1 << 16);
  std::vector<Selection> sels;
  std::vector<DstView> views;
  for (int i = 0; i < 50; ++i) {
    sels.push_back(Box({i, (7 * i) % 50}, {5, 9}, {1 + i % 3, 1}));
    views.push_back(View(out.data() + 45 * i, {5, 9}, 1));
  }
  Plan p;
  ASSERT_TRUE(BuildTasks(t.l, sels, views, &p).ok());
  const PlanBound b = PlanBytesBound(t.l, p.owned->batch);
  EXPECT_EQ(b.pieces, p.pieces.size());
  EXPECT_GE(b.tasks, p.tasks.size());
  EXPECT_GE(b.bytes, p.pieces.capacity() * sizeof(Piece) + p.tasks.capacity() * sizeof(ChunkTask) +
                         p.coords.capacity() * sizeof(int64_t));
  // A million one-element crops: a bound of some tens of MB, computed without allocating.
  std::vector<int64_t> starts(2'000'000, 3);
  const int64_t ones[2] = {1, 1};
  const int64_t strides[2] = {64, 1};
  BoxBatch many;
  many.ndim = 2;
  many.size = 1'000'000;
  many.starts = starts.data();
  many.starts_stride = 2;
  many.counts = ones;
  many.dst_strides = strides;
  const PlanBound mb = PlanBytesBound(t.l, many);
  EXPECT_EQ(mb.pieces, 1'000'000u);
  EXPECT_EQ(mb.tasks, 64u) << "at most the chunks of the grid";
  EXPECT_GT(mb.bytes, 16u << 20);
}

// Outer selection helper: per dimension rows (start, count, step, dst_offset).
struct Outer {
  std::vector<std::vector<int64_t>> rows;
  OuterSelection sel;
  Outer(std::vector<std::vector<int64_t>> r, uint8_t* dst, std::vector<int64_t> shape, size_t itemsize = 1)
      : rows(std::move(r)) {
    for (auto& v : rows) {
      sel.runs.push_back(v.data());
      sel.num_runs.push_back(v.size() / 4);
    }
    sel.dst = dst;
    sel.shape = shape;
    sel.byte_strides.assign(shape.size(), 0);
    int64_t s = static_cast<int64_t>(itemsize);
    for (size_t d = shape.size(); d-- > 0;) {
      sel.byte_strides[d] = s;
      s *= shape[d];
    }
  }
};

TEST(PlannerTest, OuterSelectionGroupsRunsPerChunkWithoutExpandingTheProduct) {
  TestLayout t = MakeLayout({100, 100}, {10, 10});
  std::vector<uint8_t> out(512 * 512);
  // Per axis 512 scattered indices (3k mod 100: never adjacent, so 512 runs of one);
  // the product is 262,144 elements, which used to be as many boxes.
  std::vector<int64_t> rows;
  for (int64_t k = 0; k < 512; ++k) rows.insert(rows.end(), {(k * 3) % 100, 1, 1, k});
  Outer o({rows, rows}, out.data(), {512, 512});
  Plan p;
  ASSERT_TRUE(BuildTasks(t.l, o.sel, &p).ok());
  EXPECT_EQ(p.tasks.size(), 100u) << "one task per chunk touched";
  EXPECT_EQ(p.pieces.size(), 100u) << "one piece per task, whatever the runs";
  EXPECT_EQ(p.segments.size(), 1024u) << "runs per axis, summed";
  EXPECT_EQ(p.groups.size(), 20u);
  const PlanBound b = PlanBytesBound(t.l, o.sel);
  EXPECT_EQ(b.segments, 1024u);
  EXPECT_EQ(b.tasks, 100u);
  // Tasks in C order of the chunk grid.
  EXPECT_EQ(Coords(p, p.tasks[0]), (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(Coords(p, p.tasks[99]), (std::vector<int64_t>{9, 9}));
}

TEST(PlannerTest, OuterRunsSplitAtChunkBordersAndNegativeStepsWriteBackwards) {
  TestLayout t = MakeLayout({20}, {8});
  std::vector<uint8_t> out(16);
  // 17, 15, ..., 3 (step -2, 8 indices) written at 0..7; then 4..11 written at 8..15.
  Outer o({{17, 8, -2, 0, 4, 8, 1, 8}}, out.data(), {16});
  Plan p;
  ASSERT_TRUE(BuildTasks(t.l, o.sel, &p).ok());
  ASSERT_EQ(p.tasks.size(), 3u);
  ASSERT_EQ(p.groups.size(), 3u);
  // Chunk 0: 3, 5, 7 (lowest 3 at output 7, going down) and 4..7 (at 8..11).
  const SegmentGroup& g0 = p.groups[0];
  ASSERT_EQ(g0.count, 2u);
  const Segment& a = p.segments[g0.first];
  EXPECT_EQ(a.src_start, 3);
  EXPECT_EQ(a.count, 3);
  EXPECT_EQ(a.step, 2);
  EXPECT_EQ(a.dst_first, 7);
  EXPECT_EQ(a.dst_step, -1);
  const Segment& b = p.segments[g0.first + 1];
  EXPECT_EQ(b.src_start, 4);
  EXPECT_EQ(b.count, 4);
  EXPECT_EQ(b.dst_first, 8);
  EXPECT_EQ(b.dst_step, 1);
  // Chunk 2: 17 only (output 0).
  const Segment& c = p.segments[p.groups[2].first];
  EXPECT_EQ(c.src_start, 1);
  EXPECT_EQ(c.count, 1);
  EXPECT_EQ(c.dst_first, 0);
}

TEST(PlannerTest, OuterWholeChunkInContiguousOutputIsDirect) {
  TestLayout t = MakeLayout({8, 8}, {4, 8});
  std::vector<uint8_t> out(64);
  Outer o({{0, 8, 1, 0}, {0, 8, 1, 0}}, out.data(), {8, 8});
  Plan p;
  ASSERT_TRUE(BuildTasks(t.l, o.sel, &p).ok());
  ASSERT_EQ(p.tasks.size(), 2u);
  EXPECT_EQ(p.tasks[0].direct, out.data());
  EXPECT_EQ(p.tasks[1].direct, out.data() + 32);
  Plan q;
  ASSERT_TRUE(BuildTasks(t.l, o.sel, &q, /*allow_direct=*/false).ok());
  EXPECT_EQ(q.tasks[0].direct, nullptr);
}

// ---- Coalesce ----

struct Span {
  int32_t file;
  uint64_t offset;
  uint64_t nbytes;
};

Plan ResolvedPlan(const std::vector<Span>& spans) {
  Plan p;
  p.ndim = 1;
  for (size_t i = 0; i < spans.size(); ++i) {
    ChunkTask t;
    t.coords = static_cast<uint32_t>(p.coords.size());
    p.coords.push_back(static_cast<int64_t>(i));
    t.file = spans[i].file;
    t.offset = spans[i].offset;
    t.nbytes = spans[i].nbytes;
    t.missing = spans[i].file < 0;
    p.tasks.push_back(t);
  }
  return p;
}

// Coalesces every task of the plan.
void CoalesceAll(const ArrayLayout& l, const PlanOptions& o, Plan* p) {
  Coalesce(l, o, 0, static_cast<uint32_t>(p->tasks.size()), p);
}

std::vector<uint32_t> UnitTasks(const Plan& p, const IoUnit& u) {
  return std::vector<uint32_t>(p.unit_tasks.begin() + u.first_task, p.unit_tasks.begin() + u.first_task + u.num_tasks);
}

class CoalesceTest : public testing::Test {
 protected:
  TestLayout zstd_ = MakeLayout({100}, {10}, 1, R"(["bytes", "zstd"])");
};

TEST_F(CoalesceTest, MergesWithinMaxGapOnly) {
  Plan p = ResolvedPlan({{0, 0, 100}, {0, 150, 100}, {0, 1000, 100}});
  CoalesceAll(zstd_.l, PlanOptions{50, 1 << 20}, &p);
  ASSERT_EQ(p.units.size(), 2u);
  EXPECT_EQ(p.units[0].offset, 0u);
  EXPECT_EQ(p.units[0].length, 250u);
  EXPECT_EQ(UnitTasks(p, p.units[0]), (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(p.units[0].dst, nullptr);
  EXPECT_EQ(p.units[1].offset, 1000u);
  EXPECT_EQ(p.units[1].length, 100u);
}

TEST_F(CoalesceTest, GapEqualToMaxGapMergesOneMoreSplits) {
  Plan a = ResolvedPlan({{0, 0, 10}, {0, 30, 10}});
  CoalesceAll(zstd_.l, PlanOptions{20, 1 << 20}, &a);
  EXPECT_EQ(a.units.size(), 1u);
  Plan b = ResolvedPlan({{0, 0, 10}, {0, 31, 10}});
  CoalesceAll(zstd_.l, PlanOptions{20, 1 << 20}, &b);
  EXPECT_EQ(b.units.size(), 2u);
  // max_gap 0: adjacent ranges still merge, a one-byte hole does not.
  Plan c = ResolvedPlan({{0, 0, 10}, {0, 10, 10}, {0, 21, 10}});
  CoalesceAll(zstd_.l, PlanOptions{0, 1 << 20}, &c);
  ASSERT_EQ(c.units.size(), 2u);
  EXPECT_EQ(c.units[0].length, 20u);
}

TEST_F(CoalesceTest, MaxRequestSplitsLongRuns) {
  Plan p = ResolvedPlan({{0, 0, 100}, {0, 100, 100}, {0, 200, 100}, {0, 300, 100}});
  CoalesceAll(zstd_.l, PlanOptions{1 << 20, 200}, &p);
  ASSERT_EQ(p.units.size(), 2u);
  EXPECT_EQ(p.units[0].offset, 0u);
  EXPECT_EQ(p.units[0].length, 200u);
  EXPECT_EQ(p.units[1].offset, 200u);
  EXPECT_EQ(p.units[1].length, 200u);
}

TEST_F(CoalesceTest, ChunkLargerThanMaxRequestIsItsOwnUnit) {
  Plan p = ResolvedPlan({{0, 0, 10}, {0, 10, 5000}, {0, 5010, 10}});
  CoalesceAll(zstd_.l, PlanOptions{1 << 20, 1000}, &p);
  ASSERT_EQ(p.units.size(), 3u);
  EXPECT_EQ(p.units[1].offset, 10u);
  EXPECT_EQ(p.units[1].length, 5000u);
}

TEST_F(CoalesceTest, SortsByOffsetWhateverTheTaskOrder) {
  // Morton-ordered data: task order differs from file order.
  Plan p = ResolvedPlan({{0, 200, 100}, {0, 0, 100}, {0, 100, 100}});
  CoalesceAll(zstd_.l, PlanOptions{0, 1 << 20}, &p);
  ASSERT_EQ(p.units.size(), 1u);
  EXPECT_EQ(p.units[0].offset, 0u);
  EXPECT_EQ(p.units[0].length, 300u);
  EXPECT_EQ(UnitTasks(p, p.units[0]), (std::vector<uint32_t>{1, 2, 0}));
}

TEST_F(CoalesceTest, OverlappingAndSharedRangesShareAUnit) {
  Plan p = ResolvedPlan({{0, 0, 100}, {0, 50, 100}, {0, 0, 100}});
  CoalesceAll(zstd_.l, PlanOptions{0, 1 << 20}, &p);
  ASSERT_EQ(p.units.size(), 1u);
  EXPECT_EQ(p.units[0].length, 150u);
  EXPECT_EQ(p.units[0].num_tasks, 3u);
}

TEST_F(CoalesceTest, DifferentFilesNeverMerge) {
  Plan p = ResolvedPlan({{1, 0, 10}, {0, 10, 10}, {0, 0, 10}, {1, 10, 10}});
  CoalesceAll(zstd_.l, PlanOptions{1 << 20, 1 << 20}, &p);
  ASSERT_EQ(p.units.size(), 2u);
  EXPECT_EQ(p.units[0].file, 0);
  EXPECT_EQ(UnitTasks(p, p.units[0]), (std::vector<uint32_t>{2, 1}));
  EXPECT_EQ(p.units[1].file, 1);
  EXPECT_EQ(UnitTasks(p, p.units[1]), (std::vector<uint32_t>{0, 3}));
}

TEST_F(CoalesceTest, MissingChunksBecomeFillUnitsOfAtMostSixteen) {
  std::vector<Span> spans(40, Span{-1, 0, 0});
  spans[7] = Span{0, 0, 10};
  Plan p = ResolvedPlan(spans);
  CoalesceAll(zstd_.l, PlanOptions{}, &p);
  ASSERT_EQ(p.units.size(), 4u);
  EXPECT_EQ(p.units[0].file, 0);
  size_t fills = 0;
  for (size_t u = 1; u < 4; ++u) {
    EXPECT_EQ(p.units[u].file, -1);
    EXPECT_LE(p.units[u].num_tasks, 16u);
    fills += p.units[u].num_tasks;
    for (uint32_t t : UnitTasks(p, p.units[u])) EXPECT_TRUE(p.tasks[t].missing);
  }
  EXPECT_EQ(fills, 39u);
}

TEST_F(CoalesceTest, SubRangesAppendUnitsForTheirTasksOnly) {
  Plan p = ResolvedPlan({{0, 0, 10}, {0, 10, 10}, {0, 20, 10}, {0, 30, 10}});
  Coalesce(zstd_.l, PlanOptions{1 << 20, 1 << 20}, 2, 4, &p);
  ASSERT_EQ(p.units.size(), 1u);
  EXPECT_EQ(UnitTasks(p, p.units[0]), (std::vector<uint32_t>{2, 3}));
  EXPECT_EQ(p.units[0].offset, 20u);
  Coalesce(zstd_.l, PlanOptions{1 << 20, 1 << 20}, 0, 2, &p);
  ASSERT_EQ(p.units.size(), 2u);
  EXPECT_EQ(UnitTasks(p, p.units[1]), (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(p.units[1].length, 20u);
}

TEST(CoalesceRawTest, DirectUncompressedChunksAreSeparateReadsIntoTheOutput) {
  TestLayout raw = MakeLayout({100}, {10}, 1, R"(["bytes"])");
  ASSERT_TRUE(raw.meta.chain->stored_is_decoded());
  uint8_t target[10];
  Plan p = ResolvedPlan({{0, 0, 10}, {0, 10, 10}, {0, 20, 10}});
  p.tasks[1].direct = target;
  CoalesceAll(raw.l, PlanOptions{1 << 20, 1 << 20}, &p);
  ASSERT_EQ(p.units.size(), 2u);
  EXPECT_EQ(p.units[0].dst, target);
  EXPECT_EQ(p.units[0].offset, 10u);
  EXPECT_EQ(p.units[0].length, 10u);
  EXPECT_EQ(UnitTasks(p, p.units[0]), (std::vector<uint32_t>{1}));
  EXPECT_EQ(p.units[1].dst, nullptr);
  EXPECT_EQ(UnitTasks(p, p.units[1]), (std::vector<uint32_t>{0, 2}));
  EXPECT_EQ(p.units[1].length, 30u) << "the direct chunk's bytes are covered, not split around";

  // With a compressed chain the direct task is coalesced like any other.
  TestLayout z = MakeLayout({100}, {10}, 1, R"(["bytes", "zstd"])");
  Plan q = ResolvedPlan({{0, 0, 10}, {0, 10, 10}});
  q.tasks[1].direct = target;
  CoalesceAll(z.l, PlanOptions{1 << 20, 1 << 20}, &q);
  ASSERT_EQ(q.units.size(), 1u);
  EXPECT_EQ(q.units[0].dst, nullptr);
}

}  // namespace
}  // namespace lsio
