// lsio/box.h: selections in array space and views into the caller's output memory.
//
// A Selection picks, per dimension, `count` indices start, start+step, ... (step >= 1).
// A DstView describes where the selected elements go: element (i0, i1, ...) of the
// selection is written at data + sum(i_d * byte_strides[d]). Strides may be negative
// internally (the Python layer flips views for negative steps); the public checks on
// caller-provided `out` arrays reject negative and overlapping strides before any I/O.
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

}  // namespace lsio
