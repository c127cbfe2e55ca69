// Planner: selections -> chunk tasks (deduplicated) -> coalesced reads. Pure computation.
#include "read/planner.h"

#include <algorithm>
#include <numeric>
#include <optional>
#include <unordered_map>

#include "util/checked_math.h"

namespace lsio {
namespace {

// The part of one dimension's selection that falls in one chunk.
struct DimSpan {
  int64_t chunk;    // chunk index along the dimension
  int64_t k0;       // first selection index (0-based position in the selection)
  int64_t k1;       // one past the last
};

// Calls fn(chunk, k0, k1) for each chunk touched by the indices start + k*step, k < count
// (step >= 1, all indices in [0, INT64_MAX]), in increasing order. O(chunks touched), also
// for steps near INT64_MAX: the chunk's end saturates and CountUpTo never wraps.
template <typename Fn>
void ForEachChunkSpan(int64_t start, int64_t count, int64_t step, int64_t chunk, Fn&& fn) {
  int64_t k = 0;
  while (k < count) {
    // start + k*step is a selected index, in range by validation.
    const int64_t idx = start + k * step;
    const int64_t c = idx / chunk;
    const int64_t last = SatAdd(c * chunk, chunk - 1);  // last index of this chunk
    const int64_t k_end = CountUpTo(start, step, count, last);
    fn(c, k, k_end);
    k = k_end;
  }
}

void SplitDim(int64_t start, int64_t count, int64_t step, int64_t chunk, std::vector<DimSpan>* out) {
  out->clear();
  ForEachChunkSpan(start, count, step, chunk, [out](int64_t c, int64_t k0, int64_t k1) { out->push_back({c, k0, k1}); });
}

// Chunks touched along one dimension by start + k*step, k < count, without listing them.
uint64_t ChunksTouched(int64_t start, int64_t count, int64_t step, int64_t chunk) {
  if (count <= 0) return 0;
  const int64_t last = start + (count - 1) * step;  // validated: no overflow
  const uint64_t span = static_cast<uint64_t>(last / chunk - start / chunk) + 1;
  return std::min<uint64_t>(span, static_cast<uint64_t>(count));
}

// Chunk (linear index) -> task, for the deduplication of a batch's pieces: open addressing
// with linear probing in one flat array sized up front (at least twice the task bound), so
// planning a batch allocates once instead of once per chunk (std::unordered_map's nodes
// were a third of planning a batch of tiny chunks).
class TaskOfChunk {
 public:
  explicit TaskOfChunk(uint64_t max_tasks) {
    size_t cap = 16;
    int bits = 4;
    while (cap < 2 * max_tasks + 1) {
      cap *= 2;
      ++bits;
    }
    mask_ = cap - 1;
    shift_ = 64 - bits;
    slots_.assign(cap, Slot{kEmpty, 0});
  }
  /// The task of `chunk`, or the one `add()` creates for it (inserted = true).
  template <typename Add>
  uint32_t FindOrAdd(uint64_t chunk, bool* inserted, Add&& add) {
    size_t i = static_cast<size_t>((chunk * 0x9E3779B97F4A7C15ull) >> shift_);  // Fibonacci hashing
    for (;; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.chunk == chunk) {
        *inserted = false;
        return s.task;
      }
      if (s.chunk == kEmpty) {
        s.chunk = chunk;
        s.task = add();
        *inserted = true;
        return s.task;
      }
    }
  }

 private:
  // Linear indexes are below the grid's size, which zarr metadata keeps far from 2^64 - 1.
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  struct Slot {
    uint64_t chunk;
    uint32_t task;
  };
  std::vector<Slot> slots_;
  size_t mask_ = 0;
  int shift_ = 60;
};

// Bookkeeping shared by both BuildTasks forms: task creation with shard ids.
class TaskBuilder {
 public:
  TaskBuilder(const ArrayLayout& layout, Plan* plan) : l_(layout), plan_(plan), nd_(layout.ndim()) {
    shard_grid_.assign(static_cast<size_t>(nd_), 1);
    if (l_.sharded) {
      for (int d = 0; d < nd_; ++d) {
        const size_t ud = static_cast<size_t>(d);
        const int64_t cps = l_.shard.chunks_per_shard[ud];
        shard_grid_[ud] = static_cast<uint64_t>(CeilDiv(l_.grid[ud], cps));
      }
    }
  }

  // Linear index of chunk `g` in the chunk grid (unique per chunk: zarr metadata limits an
  // array to 2^63 bytes, so the grid has fewer than 2^64 chunks and this cannot wrap).
  uint64_t Linear(const int64_t* g) const {
    uint64_t lin = 0;
    for (int d = 0; d < nd_; ++d) lin = lin * static_cast<uint64_t>(l_.grid[static_cast<size_t>(d)]) + static_cast<uint64_t>(g[d]);
    return lin;
  }

  uint32_t Add(const int64_t* g, uint8_t* direct) {
    const uint32_t task_idx = static_cast<uint32_t>(plan_->tasks.size());
    ChunkTask t;
    t.coords = static_cast<uint32_t>(plan_->coords.size());
    plan_->coords.insert(plan_->coords.end(), g, g + nd_);
    t.direct = direct;
    if (l_.sharded) {
      uint64_t sid = 0;
      uint64_t local = 0;
      const std::vector<int>& order = l_.shard.index_order;
      for (int d = 0; d < nd_; ++d) {
        const size_t ud = static_cast<size_t>(d);
        const int64_t cps = l_.shard.chunks_per_shard[ud];
        sid = sid * shard_grid_[ud] + static_cast<uint64_t>(g[d] / cps);
        const size_t id = order.empty() ? ud : static_cast<size_t>(order[ud]);  // the index's dimension d
        const int64_t icps = l_.shard.chunks_per_shard[id];
        local = local * static_cast<uint64_t>(icps) + static_cast<uint64_t>(g[id] % icps);
      }
      auto sit = shard_of_id_.find(sid);
      if (sit == shard_of_id_.end()) {
        const int32_t si = static_cast<int32_t>(plan_->shard_ids.size());
        plan_->shard_ids.push_back(sid);
        for (int d = 0; d < nd_; ++d) plan_->shard_coords.push_back(g[d] / l_.shard.chunks_per_shard[static_cast<size_t>(d)]);
        sit = shard_of_id_.emplace(sid, si).first;
      }
      t.shard = sit->second;
      t.local = local;
    }
    plan_->tasks.push_back(t);
    return task_idx;
  }

 private:
  const ArrayLayout& l_;
  Plan* plan_;
  const int nd_;
  std::vector<uint64_t> shard_grid_;
  std::unordered_map<uint64_t, int32_t> shard_of_id_;
};

// Whether a whole chunk written from `dst` with these output strides is one contiguous run
// (strides of the chunk's dims with extent > 1 are the packed ones).
bool ContiguousChunk(const ArrayLayout& l, const int64_t* strides) {
  int64_t expect = static_cast<int64_t>(l.itemsize);
  for (int d = l.ndim() - 1; d >= 0; --d) {
    const size_t ud = static_cast<size_t>(d);
    if (l.chunk[ud] > 1 && strides[d] != expect) return false;
    expect = SatMulNonNeg(expect, l.chunk[ud]);
  }
  return true;
}

// Bytes per entry of what BuildTasks allocates; generous (allocator overhead included) so
// that PlanBytesBound stays an upper bound.
constexpr uint64_t kPieceBytes = 2 * sizeof(Piece);  // pieces + the counting sort's copy
constexpr uint64_t kHashEntryBytes = 64;             // unordered_map node + bucket
uint64_t TaskBytes(int nd) {
  return sizeof(ChunkTask) + static_cast<uint64_t>(nd) * sizeof(int64_t) + kHashEntryBytes + sizeof(uint32_t);
}

constexpr uint64_t kMaxIndex = UINT32_MAX;

}  // namespace

BoxBatchStorage::BoxBatchStorage(const std::vector<Selection>& sels, const std::vector<DstView>& views) {
  const size_t n = sels.size();
  const size_t nd = n ? sels[0].size() : 0;
  starts.reserve(n * nd);
  counts.reserve(n * nd);
  steps.reserve(n * nd);
  strides.reserve(n * nd);
  dsts.reserve(n);
  for (size_t b = 0; b < n; ++b) {
    for (size_t d = 0; d < nd; ++d) {
      starts.push_back(sels[b][d].start);
      counts.push_back(sels[b][d].count);
      steps.push_back(sels[b][d].step);
      strides.push_back(b < views.size() && d < views[b].byte_strides.size() ? views[b].byte_strides[d] : 0);
    }
    dsts.push_back(b < views.size() ? views[b].data : nullptr);
  }
  batch.ndim = static_cast<int>(nd);
  batch.size = n;
  batch.starts = starts.data();
  batch.starts_stride = nd;
  batch.counts = counts.data();
  batch.counts_stride = nd;
  batch.steps = steps.data();
  batch.steps_stride = nd;
  batch.dst_strides = strides.data();
  batch.dst_strides_stride = nd;
  batch.dsts = dsts.data();
}

std::string TaskCoords(const Plan& plan, const ChunkTask& t) {
  std::string s = "(";
  for (int d = 0; d < plan.ndim; ++d) {
    if (d) s += ", ";
    s += std::to_string(plan.coords[t.coords + static_cast<size_t>(d)]);
  }
  return s + ")";
}

PlanBound PlanBytesBound(const ArrayLayout& layout, const BoxBatch& batch) {
  const int nd = layout.ndim();
  PlanBound b;
  for (size_t i = 0; i < batch.size; ++i) {
    uint64_t p = 1;
    for (int d = 0; d < nd; ++d) {
      p = SatMulU(p, ChunksTouched(batch.Start(i, d), batch.Count(i, d), batch.Step(i, d), layout.chunk[static_cast<size_t>(d)]));
    }
    b.pieces = SatAddU(b.pieces, p);
  }
  uint64_t grid = 1;
  for (int d = 0; d < nd; ++d) grid = SatMulU(grid, static_cast<uint64_t>(layout.grid[static_cast<size_t>(d)]));
  b.tasks = std::min(b.pieces, grid);
  b.bytes = SatAddU(SatMulU(b.pieces, kPieceBytes), SatMulU(b.tasks, TaskBytes(nd)));
  return b;
}

PlanBound PlanBytesBound(const ArrayLayout& layout, const OuterSelection& sel) {
  const int nd = layout.ndim();
  PlanBound b;
  uint64_t tasks = 1;
  for (int d = 0; d < nd; ++d) {
    const size_t ud = static_cast<size_t>(d);
    uint64_t segs = 0;
    for (size_t r = 0; r < sel.num_runs[ud]; ++r) {
      const int64_t* row = sel.runs[ud] + 4 * r;
      const int64_t count = row[1];
      if (count <= 0) continue;
      // Validated: start + (count-1)*step is in range; walk the run upwards.
      const int64_t lo = row[2] > 0 ? row[0] : row[0] + (count - 1) * row[2];
      const int64_t step = count > 1 ? (row[2] > 0 ? row[2] : -row[2]) : 1;
      segs = SatAddU(segs, ChunksTouched(lo, count, step, layout.chunk[ud]));
    }
    b.segments = SatAddU(b.segments, segs);
    tasks = SatMulU(tasks, std::min(segs, static_cast<uint64_t>(layout.grid[ud])));
  }
  b.tasks = tasks;
  b.pieces = tasks;
  // Segments are sorted in place (std::stable_sort may take a buffer of the same size).
  b.bytes = SatAddU(SatMulU(b.segments, 2 * sizeof(Segment) + sizeof(SegmentGroup)),
                    SatMulU(tasks, TaskBytes(nd) + kPieceBytes + static_cast<uint64_t>(nd) * sizeof(uint32_t)));
  return b;
}

void PieceBoxDims(const ArrayLayout& layout, const Plan& plan, const Piece& pc, int64_t* dims) {
  const BoxBatch& bb = *plan.boxes;
  const ChunkTask& t = plan.tasks[pc.task];
  for (int d = 0; d < plan.ndim; ++d) {
    const int64_t C = layout.chunk[static_cast<size_t>(d)];
    const int64_t origin = plan.coords[t.coords + static_cast<size_t>(d)] * C;
    const int64_t start = bb.Start(pc.box, d);
    const int64_t step = bb.Step(pc.box, d);
    const int64_t count = bb.Count(pc.box, d);
    const int64_t k0 = CountBelow(start, step, count, origin);
    const int64_t k1 = CountUpTo(start, step, count, SatAdd(origin, C - 1));
    dims[3 * d] = start + k0 * step - origin;
    dims[3 * d + 1] = k1 - k0;
    dims[3 * d + 2] = step;
  }
}

Status BuildTasks(const ArrayLayout& layout, const std::vector<Selection>& sels,
                  const std::vector<DstView>& dsts, Plan* plan, bool allow_direct) {
  plan->owned = std::make_unique<BoxBatchStorage>(sels, dsts);
  plan->owned->batch.ndim = layout.ndim();
  return BuildTasks(layout, plan->owned->batch, plan, allow_direct);
}

Status BuildTasks(const ArrayLayout& layout, const BoxBatch& bb, Plan* plan, bool allow_direct,
                  const std::function<bool()>& interrupted) {
  const int nd = layout.ndim();
  plan->ndim = nd;
  plan->boxes = &bb;
  const PlanBound bound = PlanBytesBound(layout, bb);
  if (bound.pieces > kMaxIndex) return Status::ResourceExhausted("the read touches more than 2^32 chunk pieces");
  plan->pieces.reserve(bound.pieces);
  plan->tasks.reserve(bound.tasks);
  plan->coords.reserve(bound.tasks * static_cast<uint64_t>(nd));
  const bool dedup = bb.size > 1;
  std::optional<TaskOfChunk> task_of_chunk;
  if (dedup) task_of_chunk.emplace(bound.tasks);
  TaskBuilder builder(layout, plan);

  std::vector<std::vector<DimSpan>> spans(static_cast<size_t>(nd));
  std::vector<size_t> odo(static_cast<size_t>(nd));
  std::vector<int64_t> g(static_cast<size_t>(nd));

  for (size_t b = 0; b < bb.size; ++b) {
    // Millions of crops take a while to plan: let Ctrl-C through (nothing is read yet).
    if ((b & 4095) == 4095 && interrupted && interrupted()) return Status::Cancelled("read interrupted");
    const int64_t* strides = bb.DstStrides(b);
    uint8_t* const base = bb.Dst(b);
    bool empty = false;
    for (int d = 0; d < nd; ++d) {
      const size_t ud = static_cast<size_t>(d);
      SplitDim(bb.Start(b, d), bb.Count(b, d), bb.Step(b, d), layout.chunk[ud], &spans[ud]);
      empty |= spans[ud].empty();
    }
    if (empty) continue;
    std::fill(odo.begin(), odo.end(), 0);
    for (;;) {
      // One chunk: the combination spans[d][odo[d]].
      bool whole = true;
      uint8_t* dst = base;
      for (int d = 0; d < nd; ++d) {
        const size_t ud = static_cast<size_t>(d);
        const DimSpan& sp = spans[ud][odo[ud]];
        const int64_t C = layout.chunk[ud];
        const int64_t step = bb.Step(b, d);
        g[ud] = sp.chunk;
        const int64_t count = sp.k1 - sp.k0;
        const int64_t src_start = bb.Start(b, d) + sp.k0 * step - sp.chunk * C;
        dst += sp.k0 * strides[d];
        whole &= src_start == 0 && count == C && (step == 1 || count == 1) && sp.chunk * C <= layout.shape[ud] - C;
      }
      uint8_t* direct = whole && allow_direct && ContiguousChunk(layout, strides) ? dst : nullptr;

      uint32_t task_idx;
      if (dedup) {
        bool inserted = false;
        task_idx = task_of_chunk->FindOrAdd(builder.Linear(g.data()), &inserted,
                                            [&] { return builder.Add(g.data(), direct); });
        if (!inserted && plan->tasks[task_idx].direct == nullptr) plan->tasks[task_idx].direct = direct;
      } else {
        task_idx = builder.Add(g.data(), direct);
      }
      plan->pieces.push_back(Piece{task_idx, static_cast<uint32_t>(b), dst});

      // Advance the odometer.
      int d = nd - 1;
      for (; d >= 0; --d) {
        const size_t ud = static_cast<size_t>(d);
        if (++odo[ud] < spans[ud].size()) break;
        odo[ud] = 0;
      }
      if (d < 0) break;
    }
  }
  task_of_chunk.reset();  // free before the counting sort's copy

  // Group pieces by task (stable counting sort), so a task's pieces are contiguous.
  std::vector<uint32_t> counts(plan->tasks.size() + 1, 0);
  for (const Piece& p : plan->pieces) ++counts[p.task + 1];
  std::partial_sum(counts.begin(), counts.end(), counts.begin());
  for (size_t t = 0; t < plan->tasks.size(); ++t) {
    plan->tasks[t].first_piece = counts[t];
    plan->tasks[t].num_pieces = counts[t + 1] - counts[t];
  }
  if (dedup) {
    std::vector<Piece> sorted(plan->pieces.size());
    for (const Piece& p : plan->pieces) sorted[counts[p.task]++] = p;
    plan->pieces.swap(sorted);
  }
  return Status::Ok();
}

Status BuildTasks(const ArrayLayout& layout, const OuterSelection& sel, Plan* plan, bool allow_direct) {
  const int nd = layout.ndim();
  plan->ndim = nd;
  plan->outer = &sel;
  const PlanBound bound = PlanBytesBound(layout, sel);
  if (bound.segments > kMaxIndex || bound.tasks > kMaxIndex) {
    return Status::ResourceExhausted("the outer selection touches more than 2^32 chunks or runs");
  }
  plan->segments.reserve(bound.segments);

  // Per axis: split each run per chunk (walking it upwards), then group by chunk.
  std::vector<uint32_t> axis_groups(static_cast<size_t>(nd) + 1, 0);
  for (int d = 0; d < nd; ++d) {
    const size_t ud = static_cast<size_t>(d);
    const int64_t C = layout.chunk[ud];
    const size_t first_seg = plan->segments.size();
    for (size_t r = 0; r < sel.num_runs[ud]; ++r) {
      const int64_t* row = sel.runs[ud] + 4 * r;
      const int64_t count = row[1];
      if (count <= 0) continue;
      const bool up = row[2] > 0 || count == 1;
      const int64_t step = count == 1 ? 1 : (up ? row[2] : -row[2]);
      const int64_t lo = up ? row[0] : row[0] + (count - 1) * row[2];
      const int64_t dst_lo = up ? row[3] : row[3] + count - 1;
      const int64_t dst_step = up ? 1 : -1;
      ForEachChunkSpan(lo, count, step, C, [&](int64_t c, int64_t k0, int64_t k1) {
        plan->segments.push_back(Segment{c, lo + k0 * step - c * C, k1 - k0, step, dst_lo + dst_step * k0, dst_step});
      });
    }
    std::stable_sort(plan->segments.begin() + static_cast<std::ptrdiff_t>(first_seg), plan->segments.end(),
                     [](const Segment& a, const Segment& b) { return a.chunk < b.chunk; });
    axis_groups[ud] = static_cast<uint32_t>(plan->groups.size());
    for (size_t i = first_seg; i < plan->segments.size();) {
      size_t j = i + 1;
      while (j < plan->segments.size() && plan->segments[j].chunk == plan->segments[i].chunk) ++j;
      plan->groups.push_back(SegmentGroup{plan->segments[i].chunk, static_cast<uint32_t>(i), static_cast<uint32_t>(j - i)});
      i = j;
    }
    if (plan->groups.size() == axis_groups[ud]) return Status::Ok();  // nothing selected
  }
  axis_groups[static_cast<size_t>(nd)] = static_cast<uint32_t>(plan->groups.size());

  uint64_t num_tasks = 1;
  for (int d = 0; d < nd; ++d) num_tasks *= axis_groups[static_cast<size_t>(d) + 1] - axis_groups[static_cast<size_t>(d)];
  plan->tasks.reserve(num_tasks);
  plan->pieces.reserve(num_tasks);
  plan->coords.reserve(num_tasks * static_cast<uint64_t>(nd));
  plan->piece_groups.reserve(num_tasks * static_cast<uint64_t>(nd));
  TaskBuilder builder(layout, plan);
  const bool contiguous = allow_direct && ContiguousChunk(layout, sel.byte_strides.data());
  std::vector<uint32_t> odo(axis_groups.begin(), axis_groups.end() - 1);
  std::vector<int64_t> g(static_cast<size_t>(nd));
  // Tasks come out in C order of the chunk grid (groups are sorted by chunk).
  for (;;) {
    bool whole = contiguous;
    uint8_t* dst = sel.dst;
    const uint32_t at = static_cast<uint32_t>(plan->piece_groups.size());
    for (int d = 0; d < nd; ++d) {
      const size_t ud = static_cast<size_t>(d);
      const SegmentGroup& grp = plan->groups[odo[ud]];
      const Segment& s = plan->segments[grp.first];
      const int64_t C = layout.chunk[ud];
      g[ud] = grp.chunk;
      plan->piece_groups.push_back(odo[ud]);
      whole &= grp.count == 1 && s.src_start == 0 && s.count == C && (s.step == 1 || C == 1) &&
               (s.dst_step == 1 || C == 1) && grp.chunk * C <= layout.shape[ud] - C;
      if (whole) dst += s.dst_first * sel.byte_strides[ud];
    }
    uint8_t* direct = whole ? dst : nullptr;
    const uint32_t task_idx = builder.Add(g.data(), direct);
    plan->tasks[task_idx].first_piece = static_cast<uint32_t>(plan->pieces.size());
    plan->tasks[task_idx].num_pieces = 1;
    plan->pieces.push_back(Piece{task_idx, at, direct});

    int d = nd - 1;
    for (; d >= 0; --d) {
      const size_t ud = static_cast<size_t>(d);
      if (++odo[ud] < axis_groups[ud + 1]) break;
      odo[ud] = axis_groups[ud];
    }
    if (d < 0) break;
  }
  return Status::Ok();
}

void Coalesce(const ArrayLayout& layout, const PlanOptions& opts, uint32_t first, uint32_t last,
              Plan* plan) {
  const bool raw = layout.chain->stored_is_decoded();
  std::vector<uint32_t> reads;
  std::vector<uint32_t> fills;
  std::vector<uint32_t> cached;
  for (uint32_t i = first; i < last; ++i) {
    const ChunkTask& t = plan->tasks[i];
    if (t.cached >= 0) {
      cached.push_back(i);
    } else if (t.missing) {
      fills.push_back(i);
    } else if (raw && t.direct != nullptr) {
      // Stored bytes are the decoded chunk: read them straight into the output.
      IoUnit u;
      u.file = t.file;
      u.offset = t.offset;
      u.length = t.nbytes;
      u.dst = t.direct;
      u.first_task = static_cast<uint32_t>(plan->unit_tasks.size());
      u.num_tasks = 1;
      plan->unit_tasks.push_back(i);
      plan->units.push_back(u);
    } else {
      reads.push_back(i);
    }
  }
  std::sort(reads.begin(), reads.end(), [&](uint32_t a, uint32_t b) {
    const ChunkTask& x = plan->tasks[a];
    const ChunkTask& y = plan->tasks[b];
    return x.file != y.file ? x.file < y.file : x.offset < y.offset;
  });
  for (size_t i = 0; i < reads.size();) {
    const ChunkTask& first = plan->tasks[reads[i]];
    IoUnit u;
    u.file = first.file;
    u.offset = first.offset;
    uint64_t end = first.offset + first.nbytes;
    u.first_task = static_cast<uint32_t>(plan->unit_tasks.size());
    plan->unit_tasks.push_back(reads[i]);
    size_t j = i + 1;
    for (; j < reads.size(); ++j) {
      const ChunkTask& t = plan->tasks[reads[j]];
      if (t.file != u.file) break;
      const uint64_t t_end = t.offset + t.nbytes;
      const uint64_t new_end = std::max(end, t_end);
      // t.offset >= u.offset (sorted); overlapping or adjacent ranges have no gap.
      if (t.offset > end && t.offset - end > opts.max_gap) break;
      if (new_end - u.offset > opts.max_request) break;
      end = new_end;
      plan->unit_tasks.push_back(reads[j]);
    }
    u.length = end - u.offset;
    u.num_tasks = static_cast<uint32_t>(j - i);
    plan->units.push_back(u);
    i = j;
  }
  // Fills and cached chunks (no read, file -1): a few tasks per unit so threads share them;
  // a cached chunk is copied, more work than a fill.
  auto no_read_units = [plan](const std::vector<uint32_t>& tasks, size_t per_unit) {
    for (size_t i = 0; i < tasks.size(); i += per_unit) {
      IoUnit u;
      u.first_task = static_cast<uint32_t>(plan->unit_tasks.size());
      u.num_tasks = static_cast<uint32_t>(std::min(per_unit, tasks.size() - i));
      plan->unit_tasks.insert(plan->unit_tasks.end(), tasks.begin() + static_cast<long>(i),
                              tasks.begin() + static_cast<long>(i + u.num_tasks));
      plan->units.push_back(u);
    }
  };
  no_read_units(cached, 4);
  no_read_units(fills, 16);
}

}  // namespace lsio
