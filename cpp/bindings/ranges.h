// The argument checks shared by the bindings that read byte ranges (read_ranges in
// ranges.cc, records_gather in records.cc): sources, per-range arrays and output buffers
// turned into an lsio::ReadRanges call, with the buffers held until it returns.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "buffer.h"
#include "lsio/ranges.h"

namespace lsio_py {

using U64 = pybind11::array_t<uint64_t, pybind11::array::c_style | pybind11::array::forcecast>;
using U32 = pybind11::array_t<uint32_t, pybind11::array::c_style | pybind11::array::forcecast>;

struct RangeCall {
  std::vector<lsio::RangeSource> sources;
  std::vector<lsio::ByteRange> ranges;
  std::vector<std::unique_ptr<BufferView>> held;  // the output buffers, held (not resizable)
  lsio::RangeOptions options;
};

/// Checks with the GIL held: the arrays' lengths, each range's room in `out` (one buffer
/// with `out_offsets`, or a list of one buffer per range) and that no two ranges' buffers
/// overlap. Throws the typed error otherwise.
RangeCall PrepareRangeCall(const pybind11::list& sources, const U32& source_index, const U64& offsets,
                           const U64& lengths, const pybind11::object& out, const pybind11::object& out_offsets,
                           int threads, const std::string& io, unsigned queue_depth,
                           std::optional<uint64_t> max_gap, uint64_t max_request);

}  // namespace lsio_py
