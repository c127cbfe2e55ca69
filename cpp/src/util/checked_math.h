// Overflow-checked int64 index arithmetic, the one place index math goes when its operands
// come from callers (starts, counts, steps, shapes, byte strides).
//
// Usage:
//   1. int64_t last;
//      if (!CheckedMulAdd(count - 1, step, start, &last)) return Status::OutOfRange(...);
//   2. Saturating forms for bounds that only need to compare correctly:
//      SatAdd(chunk_origin, chunk - 1) is INT64_MAX instead of wrapping.
//   3. CeilDiv / counts of a strided range for values already known to be in range.
//
// Why: a selection such as arr[::sys.maxsize] or a crop of shape 2**63 - 1 makes the
// obvious expressions (start + count * step, (end - start + step - 1) / step, products of
// extents) wrap, and a wrapped index is either a read out of bounds or an endless loop.
// Like TensorStore's internal::MulOverflow/AddOverflow, these return false (or saturate)
// instead of wrapping; they are thin wrappers over the compiler's __builtin_*_overflow.
//
// Invariants: every function is total (defined for all int64 inputs, no UB), constexpr and
// allocation-free.
#pragma once

#include <cstdint>
#include <limits>

namespace lsio {

/// *out = a + b; false (and *out unspecified) when the sum does not fit in int64.
constexpr bool CheckedAdd(int64_t a, int64_t b, int64_t* out) { return !__builtin_add_overflow(a, b, out); }

/// *out = a - b; false when the difference does not fit in int64.
constexpr bool CheckedSub(int64_t a, int64_t b, int64_t* out) { return !__builtin_sub_overflow(a, b, out); }

/// *out = a * b; false when the product does not fit in int64.
constexpr bool CheckedMul(int64_t a, int64_t b, int64_t* out) { return !__builtin_mul_overflow(a, b, out); }

/// *out = a * b + c; false when the product or the sum does not fit in int64.
constexpr bool CheckedMulAdd(int64_t a, int64_t b, int64_t c, int64_t* out) {
  int64_t p = 0;
  return CheckedMul(a, b, &p) && CheckedAdd(p, c, out);
}

/// a + b, clamped to [INT64_MIN, INT64_MAX].
constexpr int64_t SatAdd(int64_t a, int64_t b) {
  int64_t r = 0;
  if (!__builtin_add_overflow(a, b, &r)) return r;
  return b > 0 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
}

/// a * b for a, b >= 0, clamped to INT64_MAX.
constexpr int64_t SatMulNonNeg(int64_t a, int64_t b) {
  int64_t r = 0;
  return __builtin_mul_overflow(a, b, &r) ? std::numeric_limits<int64_t>::max() : r;
}

/// a * b for unsigned byte counts, clamped to UINT64_MAX.
constexpr uint64_t SatMulU(uint64_t a, uint64_t b) {
  uint64_t r = 0;
  return __builtin_mul_overflow(a, b, &r) ? std::numeric_limits<uint64_t>::max() : r;
}

/// a + b for unsigned byte counts, clamped to UINT64_MAX.
constexpr uint64_t SatAddU(uint64_t a, uint64_t b) {
  uint64_t r = 0;
  return __builtin_add_overflow(a, b, &r) ? std::numeric_limits<uint64_t>::max() : r;
}

/// ceil(a / b) for a >= 0, b > 0, without the overflowing (a + b - 1) / b.
constexpr int64_t CeilDiv(int64_t a, int64_t b) { return a == 0 ? 0 : (a - 1) / b + 1; }

/// How many of the indices start, start + step, ... (count of them, step >= 1) are <= last.
/// 0 when last < start. Never overflows.
constexpr int64_t CountUpTo(int64_t start, int64_t step, int64_t count, int64_t last) {
  if (count <= 0 || last < start) return 0;
  // last - start can exceed INT64_MAX (start < 0 <= last); in uint64 it is exact.
  const uint64_t span = static_cast<uint64_t>(last) - static_cast<uint64_t>(start);
  const uint64_t k = span / static_cast<uint64_t>(step);  // index of the last one <= last
  return k >= static_cast<uint64_t>(count - 1) ? count : static_cast<int64_t>(k) + 1;
}

/// How many of the indices start, start + step, ... (step >= 1) are < first: the selection
/// index of the first one >= first (0 when first <= start). Never overflows.
constexpr int64_t CountBelow(int64_t start, int64_t step, int64_t count, int64_t first) {
  if (count <= 0 || first <= start) return 0;
  const uint64_t span = static_cast<uint64_t>(first) - static_cast<uint64_t>(start);
  const uint64_t k = (span - 1) / static_cast<uint64_t>(step) + 1;
  return k >= static_cast<uint64_t>(count) ? count : static_cast<int64_t>(k);
}

}  // namespace lsio
