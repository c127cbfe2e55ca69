// Planner: selections -> chunk tasks (deduplicated) -> coalesced reads. Pure computation.
#include "read/planner.h"

#include <algorithm>
#include <numeric>
#include <unordered_map>

namespace lsio {
namespace {

// The part of one dimension's selection that falls in one chunk.
struct DimSpan {
  int64_t chunk;    // chunk index along the dimension
  int64_t k0;       // first selection index (0-based position in the selection)
  int64_t k1;       // one past the last
};

// Chunks touched by one dimension's selection. O(chunks touched), also for large steps.
void SplitDim(const DimSel& s, int64_t chunk, std::vector<DimSpan>* out) {
  out->clear();
  int64_t k = 0;
  while (k < s.count) {
    const int64_t idx = s.start + k * s.step;
    const int64_t c = idx / chunk;
    const int64_t end = (c + 1) * chunk;  // first index past this chunk
    // selection indices k' with start + k'*step < end
    int64_t k_end = (end - s.start + s.step - 1) / s.step;
    k_end = std::min(k_end, s.count);
    out->push_back({c, k, k_end});
    k = k_end;
  }
}

}  // namespace

std::string TaskCoords(const Plan& plan, const ChunkTask& t) {
  std::string s = "(";
  for (int d = 0; d < plan.ndim; ++d) {
    if (d) s += ", ";
    s += std::to_string(plan.coords[t.coords + static_cast<size_t>(d)]);
  }
  return s + ")";
}

void BuildTasks(const ArrayLayout& layout, const std::vector<Selection>& sels,
                const std::vector<DstView>& dsts, Plan* plan, bool allow_direct) {
  const int nd = layout.ndim();
  plan->ndim = nd;
  const int64_t isz = static_cast<int64_t>(layout.itemsize);
  const bool dedup = sels.size() > 1;
  std::unordered_map<uint64_t, uint32_t> task_of_chunk;
  std::unordered_map<uint64_t, int32_t> shard_of_id;

  // Chunk-internal C-order strides.
  std::vector<int64_t> cstride(static_cast<size_t>(nd));
  {
    int64_t s = isz;
    for (int d = nd - 1; d >= 0; --d) {
      cstride[static_cast<size_t>(d)] = s;
      s *= layout.chunk[static_cast<size_t>(d)];
    }
  }
  std::vector<uint64_t> shard_grid(static_cast<size_t>(nd), 1);
  if (layout.sharded) {
    for (int d = 0; d < nd; ++d) {
      const int64_t cps = layout.shard.chunks_per_shard[static_cast<size_t>(d)];
      shard_grid[static_cast<size_t>(d)] = static_cast<uint64_t>((layout.grid[static_cast<size_t>(d)] + cps - 1) / cps);
    }
  }

  std::vector<std::vector<DimSpan>> spans(static_cast<size_t>(nd));
  std::vector<size_t> odo(static_cast<size_t>(nd));
  std::vector<int64_t> g(static_cast<size_t>(nd));

  for (size_t b = 0; b < sels.size(); ++b) {
    const Selection& sel = sels[b];
    const DstView& dv = dsts[b];
    bool empty = false;
    for (int d = 0; d < nd; ++d) {
      SplitDim(sel[static_cast<size_t>(d)], layout.chunk[static_cast<size_t>(d)], &spans[static_cast<size_t>(d)]);
      empty |= spans[static_cast<size_t>(d)].empty();
    }
    if (empty) continue;
    std::fill(odo.begin(), odo.end(), 0);
    for (;;) {
      // One chunk: the combination spans[d][odo[d]].
      uint64_t lin = 0;
      bool whole = true;
      uint8_t* dst = dv.data;
      const uint32_t dims_at = static_cast<uint32_t>(plan->piece_dims.size());
      for (int d = 0; d < nd; ++d) {
        const size_t ud = static_cast<size_t>(d);
        const DimSpan& sp = spans[ud][odo[ud]];
        const DimSel& s = sel[ud];
        const int64_t C = layout.chunk[ud];
        g[ud] = sp.chunk;
        lin = lin * static_cast<uint64_t>(layout.grid[ud]) + static_cast<uint64_t>(sp.chunk);
        const int64_t first = s.start + sp.k0 * s.step;
        const int64_t count = sp.k1 - sp.k0;
        const int64_t src_start = first - sp.chunk * C;
        plan->piece_dims.push_back(src_start);
        plan->piece_dims.push_back(count);
        plan->piece_dims.push_back(s.step);
        dst += sp.k0 * dv.byte_strides[ud];
        whole &= src_start == 0 && count == C && (s.step == 1 || count == 1) &&
                 (sp.chunk + 1) * C <= layout.shape[ud];
      }
      // Contiguous destination: strides of dims with extent > 1 are the packed ones.
      uint8_t* direct = nullptr;
      if (whole && allow_direct) {
        int64_t expect = isz;
        bool contiguous = true;
        for (int d = nd - 1; d >= 0; --d) {
          const size_t ud = static_cast<size_t>(d);
          if (layout.chunk[ud] > 1 && dv.byte_strides[ud] != expect) contiguous = false;
          expect *= layout.chunk[ud];
        }
        if (contiguous) direct = dst;
      }

      uint32_t task_idx;
      auto it = dedup ? task_of_chunk.find(lin) : task_of_chunk.end();
      if (it != task_of_chunk.end()) {
        task_idx = it->second;
        if (plan->tasks[task_idx].direct == nullptr) plan->tasks[task_idx].direct = direct;
      } else {
        task_idx = static_cast<uint32_t>(plan->tasks.size());
        if (dedup) task_of_chunk.emplace(lin, task_idx);
        ChunkTask t;
        t.coords = static_cast<uint32_t>(plan->coords.size());
        plan->coords.insert(plan->coords.end(), g.begin(), g.end());
        t.direct = direct;
        if (layout.sharded) {
          uint64_t sid = 0;
          uint64_t local = 0;
          for (int d = 0; d < nd; ++d) {
            const size_t ud = static_cast<size_t>(d);
            const int64_t cps = layout.shard.chunks_per_shard[ud];
            sid = sid * shard_grid[ud] + static_cast<uint64_t>(g[ud] / cps);
            local = local * static_cast<uint64_t>(cps) + static_cast<uint64_t>(g[ud] % cps);
          }
          auto sit = shard_of_id.find(sid);
          if (sit == shard_of_id.end()) {
            const int32_t si = static_cast<int32_t>(plan->shard_ids.size());
            plan->shard_ids.push_back(sid);
            for (int d = 0; d < nd; ++d) {
              const size_t ud = static_cast<size_t>(d);
              plan->shard_coords.push_back(g[ud] / layout.shard.chunks_per_shard[ud]);
            }
            sit = shard_of_id.emplace(sid, si).first;
          }
          t.shard = sit->second;
          t.local = local;
        }
        plan->tasks.push_back(t);
      }
      plan->pieces.push_back(Piece{task_idx, static_cast<uint32_t>(b), dst, dims_at});

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
}

void Coalesce(const ArrayLayout& layout, const PlanOptions& opts, uint32_t first, uint32_t last,
              Plan* plan) {
  const bool raw = layout.chain->stored_is_decoded();
  std::vector<uint32_t> reads;
  std::vector<uint32_t> fills;
  for (uint32_t i = first; i < last; ++i) {
    const ChunkTask& t = plan->tasks[i];
    if (t.missing) {
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
  // Fills: a few tasks per unit so threads share them.
  constexpr size_t kFillsPerUnit = 16;
  for (size_t i = 0; i < fills.size(); i += kFillsPerUnit) {
    IoUnit u;
    u.first_task = static_cast<uint32_t>(plan->unit_tasks.size());
    u.num_tasks = static_cast<uint32_t>(std::min(kFillsPerUnit, fills.size() - i));
    plan->unit_tasks.insert(plan->unit_tasks.end(), fills.begin() + static_cast<long>(i),
                            fills.begin() + static_cast<long>(i + u.num_tasks));
    plan->units.push_back(u);
  }
}

}  // namespace lsio
