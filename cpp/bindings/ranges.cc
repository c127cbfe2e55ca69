// Binding of lsio::ReadRanges (lsio/ranges.h) for python/lsio/_ranges.py, which normalises
// the arguments: sources (a str path, or a (RemoteStore, key) pair each), and per range
// source index, offset and length as flat arrays. Output buffers are taken through the
// buffer protocol as writeable and C-contiguous, and held (so they cannot be resized or
// freed) until the call returns; each range's room and the buffers' disjointness are
// checked with the GIL held, before the engine runs without it (PrepareRangeCall, shared
// with records_gather: ranges.h).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ranges.h"

#include "buffer.h"
#include "errors.h"
#include "gil.h"
#include "lsio/ranges.h"
#include "lsio/remote.h"

namespace py = pybind11;

namespace lsio_py {

RangeCall PrepareRangeCall(const py::list& sources, const U32& source_index, const U64& offsets, const U64& lengths,
                           const py::object& out, const py::object& out_offsets, int threads, const std::string& io,
                           unsigned queue_depth, std::optional<uint64_t> max_gap, uint64_t max_request) {
  RangeCall call;
  const size_t n = static_cast<size_t>(offsets.size());
  if (static_cast<size_t>(lengths.size()) != n || static_cast<size_t>(source_index.size()) != n) {
    ThrowStatus(lsio::Status::InvalidArgument("source_index, offsets and lengths differ in length"));
  }
  std::vector<lsio::RangeSource>& srcs = call.sources;
  srcs.reserve(sources.size());
  for (const py::handle& s : sources) {
    if (py::isinstance<py::str>(s)) {
      srcs.push_back(lsio::RangeSource::File(py::cast<std::string>(s)));
    } else {
      auto pair = py::cast<py::tuple>(s);
      srcs.push_back(lsio::RangeSource::Object(py::cast<std::shared_ptr<lsio::RemoteStore>>(pair[0]),
                                               py::cast<std::string>(pair[1])));
    }
  }
  const uint32_t* src = source_index.data();
  const uint64_t* off = offsets.data();
  const uint64_t* len = lengths.data();
  std::vector<lsio::ByteRange>& ranges = call.ranges;
  ranges.resize(n);
  std::vector<std::unique_ptr<BufferView>>& held = call.held;
  if (py::isinstance<py::list>(out)) {
    const py::list bufs = out;
    if (bufs.size() != n) {
      ThrowStatus(lsio::Status::InvalidArgument("out has " + std::to_string(bufs.size()) + " buffers for " +
                                                std::to_string(n) + " ranges"));
    }
    held.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      held.push_back(std::make_unique<BufferView>(bufs[i], "out[" + std::to_string(i) + "]", true));
      if (held.back()->size() != len[i]) {
        ThrowStatus(lsio::Status::InvalidArgument("out[" + std::to_string(i) + "] has " +
                                                  std::to_string(held.back()->size()) + " bytes, range " +
                                                  std::to_string(i) + " has " + std::to_string(len[i])));
      }
      ranges[i] = {src[i], off[i], len[i], held.back()->data()};
    }
  } else {
    held.push_back(std::make_unique<BufferView>(out, "out", true));
    const U64 at = py::cast<U64>(out_offsets);
    if (static_cast<size_t>(at.size()) != n) ThrowStatus(lsio::Status::InvalidArgument("out_offsets has the wrong length"));
    const uint64_t room = held.back()->size();
    for (size_t i = 0; i < n; ++i) {
      const uint64_t a = at.data()[i];
      if (a > room || len[i] > room - a) {
        ThrowStatus(lsio::Status::InvalidArgument("out has " + std::to_string(room) + " bytes; range " +
                                                  std::to_string(i) + " needs [" + std::to_string(a) + ", " +
                                                  std::to_string(a + len[i]) + ")"));
      }
      ranges[i] = {src[i], off[i], len[i], held.back()->data() + a};
    }
  }
  // Buffers of different ranges must not overlap: two workers would write the same bytes.
  std::vector<size_t> order;
  order.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    if (ranges[i].length > 0) order.push_back(i);
  }
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ranges[a].dst < ranges[b].dst; });
  for (size_t k = 1; k < order.size(); ++k) {
    const auto& p = ranges[order[k - 1]];
    if (static_cast<const uint8_t*>(p.dst) + p.length > static_cast<const uint8_t*>(ranges[order[k]].dst)) {
      ThrowStatus(lsio::Status::InvalidArgument("the output buffers of ranges " + std::to_string(order[k - 1]) +
                                                " and " + std::to_string(order[k]) + " overlap"));
    }
  }
  lsio::RangeOptions& o = call.options;
  o.threads = threads;
  o.io = io;
  o.queue_depth = queue_depth;
  o.max_gap = max_gap.value_or(lsio::RangeOptions::kStoreDefault);  // None: by store kind
  o.max_request = max_request;
  return call;
}

namespace {

// Returns the call's counts (lsio::RangeStats) as a dict.
py::dict ReadRangesPy(const py::list& sources, const U32& source_index, const U64& offsets, const U64& lengths,
                  const py::object& out, const py::object& out_offsets, int threads, const std::string& io,
                  unsigned queue_depth, std::optional<uint64_t> max_gap, uint64_t max_request) {
  const RangeCall call = PrepareRangeCall(sources, source_index, offsets, lengths, out, out_offsets, threads, io,
                                          queue_depth, max_gap, max_request);
  lsio::RangeStats stats;
  const lsio::Status st = WithoutGil([&](const std::function<bool()>& interrupted) {
    return lsio::ReadRanges(call.sources, call.ranges, call.options, interrupted, &stats);
  });
  if (!st.ok()) ThrowStatus(st);
  py::dict counts;
  counts["ranges"] = stats.ranges;
  counts["requests"] = stats.requests;
  counts["bytes_read"] = stats.bytes_read;
  return counts;
}

}  // namespace

void BindRanges(py::module_& m) {
  m.def("read_ranges", &ReadRangesPy, py::arg("sources"), py::arg("source_index"), py::arg("offsets"),
        py::arg("lengths"), py::arg("out"), py::arg("out_offsets") = py::none(), py::arg("threads") = 0,
        py::arg("io") = "auto", py::arg("queue_depth") = 64, py::arg("max_gap") = py::none(), py::arg("max_request") = 0);
}

}  // namespace lsio_py
