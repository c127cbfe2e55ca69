// lsio/box.h: selections in array space and views into the caller's output memory.
//
// A Selection picks, per dimension, `count` indices start, start+step, ... (step >= 1).
// A DstView describes where the selected elements go: element (i0, i1, ...) of the
// selection is written at data + sum(i_d * byte_strides[d]). Strides may be negative
// internally (the Python layer flips views for negative steps); the public checks on
// caller-provided `out` arrays reject negative and overlapping strides before any I/O.
//
// Batch forms, for calls that would otherwise need a heap-allocated Selection and DstView
// per box (planning memory must stay a few bytes per crop, see Array::ReadBoxes):
//   - BoxBatch: N boxes described by flat arrays the caller owns (e.g. read_crops' numpy
//     `starts`), with shared counts/steps/strides where they are the same for every box.
//   - OuterSelection: outer (orthogonal) indexing as per-dimension run lists; the
//     selection is their cartesian product, which is never expanded.
#pragma once

#include <cstdint>
#include <vector>

namespace lsio {

/// One dimension of a selection: indices start + k*step for k in [0, count).
struct DimSel {
  int64_t start = 0;
  int64_t count = 0;
  int64_t step = 1;
};

using Selection = std::vector<DimSel>;

/// A strided n-d view into caller memory (typically a numpy array).
struct DstView {
  uint8_t* data = nullptr;
  std::vector<int64_t> shape;
  std::vector<int64_t> byte_strides;
};

/// N boxes in flat arrays, read in one plan. Box b selects, per dimension d < ndim, the
/// indices Start(b,d) + k*Step(b,d) for k < Count(b,d), and writes element (k_0, k_1, ...)
/// at Dst(b) + sum k_d * DstStride(b,d). Each `*_stride` is the distance in elements
/// between consecutive boxes' rows of that array; 0 means every box shares row 0. Nothing
/// is owned: the arrays must outlive the read.
struct BoxBatch {
  int ndim = 0;
  size_t size = 0;  ///< number of boxes
  const int64_t* starts = nullptr;
  size_t starts_stride = 0;
  const int64_t* counts = nullptr;
  size_t counts_stride = 0;
  const int64_t* steps = nullptr;  ///< null: every step is 1
  size_t steps_stride = 0;
  const int64_t* dst_strides = nullptr;  ///< bytes
  size_t dst_strides_stride = 0;
  uint8_t* dst = nullptr;         ///< box b's output starts at dst + b * dst_box_stride ...
  int64_t dst_box_stride = 0;
  uint8_t* const* dsts = nullptr; ///< ... unless per-box output addresses are given here

  int64_t Start(size_t b, int d) const { return starts[b * starts_stride + static_cast<size_t>(d)]; }
  int64_t Count(size_t b, int d) const { return counts[b * counts_stride + static_cast<size_t>(d)]; }
  int64_t Step(size_t b, int d) const { return steps ? steps[b * steps_stride + static_cast<size_t>(d)] : 1; }
  const int64_t* DstStrides(size_t b) const { return dst_strides + b * dst_strides_stride; }
  uint8_t* Dst(size_t b) const { return dsts ? dsts[b] : dst + static_cast<int64_t>(b) * dst_box_stride; }
};

/// Outer (orthogonal) indexing without expanding the product. Per dimension d, runs[d]
/// points at num_runs[d] rows (start, count, step, dst_offset): indices start + k*step
/// (step may be negative) for k < count, written at output position dst_offset + k along
/// d. The selection is the cartesian product of the dimensions' runs; the output is the
/// strided view (dst, shape, byte_strides). Runs are borrowed: they must outlive the read.
struct OuterSelection {
  std::vector<const int64_t*> runs;
  std::vector<size_t> num_runs;
  uint8_t* dst = nullptr;
  std::vector<int64_t> shape;         ///< output extent per dimension
  std::vector<int64_t> byte_strides;  ///< output strides per dimension
};

}  // namespace lsio
