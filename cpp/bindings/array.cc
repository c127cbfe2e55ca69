// Bindings of lsio::Array: argument checks with the GIL held, reads with it released.
//
// `out` arrays are taken as plain py::array (never array_t, whose default forcecast would
// silently read into a converted temporary) and every property is checked by hand before
// any I/O: exact dtype (byte order included), shape, writeable, aligned, non-overlapping
// strides, and non-negative strides where the caller's array is concerned.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <optional>

#include "errors.h"
#include "gil.h"
#include "node.h"
#include "lsio/array.h"
#include "lsio/strings.h"

#include <nlohmann/json.hpp>

namespace py = pybind11;

namespace lsio_py {
namespace {

std::string DtypeStr(const py::dtype& dt) { return py::str(dt.attr("str")); }

// What the output holds: the array's own elements, or transformed ones.
struct OutType {
  std::string typestr;
  size_t itemsize;
  py::object record;  ///< record types: the numpy dtype out must equal (every record's str is |V<n>)
};

// numpy's descr from the engine's JSON of it (zarr/dtype.h): lists of [name, format(, shape)],
// or numpy's dict form (HDF5 compounds) with {"subarray", "shape"} formats.
py::object DescrFormat(const nlohmann::json& f) {
  if (f.is_string()) return py::str(f.get<std::string>());
  if (f.is_object() && f.contains("subarray")) {
    py::tuple shape(f["shape"].size());
    for (size_t k = 0; k < f["shape"].size(); ++k) shape[k] = py::int_(f["shape"][k].get<int64_t>());
    return py::make_tuple(DescrFormat(f["subarray"]), shape);
  }
  if (f.is_object()) {
    py::dict d;
    py::list names, formats, offsets;
    for (const auto& n : f["names"]) names.append(py::str(n.get<std::string>()));
    for (const auto& x : f["formats"]) formats.append(DescrFormat(x));
    for (const auto& o : f["offsets"]) offsets.append(py::int_(o.get<int64_t>()));
    d["names"] = names;
    d["formats"] = formats;
    d["offsets"] = offsets;
    d["itemsize"] = py::int_(f["itemsize"].get<int64_t>());
    return d;
  }
  py::list fields;
  for (const auto& e : f) {
    py::object name = py::str(e[0].get<std::string>());
    if (e.size() > 2) {
      py::tuple shape(e[2].size());
      for (size_t k = 0; k < e[2].size(); ++k) shape[k] = py::int_(e[2][k].get<int64_t>());
      fields.append(py::make_tuple(name, DescrFormat(e[1]), shape));
    } else {
      fields.append(py::make_tuple(name, DescrFormat(e[1])));
    }
  }
  return fields;
}

// The numpy dtype of a record descr, built once per descr (dtypes are immutable; a read must
// not pay a JSON parse and a dtype build per call). The cache is never destroyed: a py::dict
// freed after the interpreter at exit would crash. Called with the GIL held.
py::object RecordDtype(const std::string& descr) {
  static auto* cache = new py::dict();
  py::str key(descr);
  if (cache->contains(key)) return (*cache)[key];
  py::object dt;
  try {
    dt = py::module_::import("numpy").attr("dtype")(DescrFormat(nlohmann::json::parse(descr)));
  } catch (const py::error_already_set& e) {  // a record type the engine accepts and numpy does not
    ThrowStatus(lsio::Status::InvalidFormat("record dtype " + descr + " is not one numpy makes (" + e.what() + ")"));
  }
  (*cache)[key] = dt;
  return dt;
}

OutType ExpectedOut(const lsio::ArrayInfo& info, const std::optional<lsio::ElementTransform>& t) {
  if (!t && !info.descr.empty()) return {info.typestr, info.itemsize, RecordDtype(info.descr)};
  if (!t) return {info.typestr, info.itemsize, py::none()};
  if (t->out_type == "float64") return {"<f8", 8, py::none()};
  if (t->out_type == "float32") return {"<f4", 4, py::none()};
  ThrowStatus(lsio::Status::InvalidType("transform output type must be float32 or float64"));
}

// Checks an output array. allow_negative: internal views flipped for negative steps.
lsio::DstView CheckedView(py::array out, const OutType& want_type,
                          const std::vector<int64_t>& shape, bool allow_negative) {
  const std::string got = DtypeStr(out.dtype());
  if (!want_type.record.is_none() && !out.dtype().equal(want_type.record)) {
    ThrowStatus(lsio::Status::InvalidType("out has dtype " + std::string(py::str(out.dtype())) + ", expected exactly " +
                                          std::string(py::str(want_type.record)) +
                                          " (the record type as stored, each field in its byte order)"));
  }
  if (got != want_type.typestr) {
    ThrowStatus(lsio::Status::InvalidType("out has dtype " + got + ", expected exactly " + want_type.typestr +
                                          " (no casting: pass an array of that dtype)"));
  }
  const size_t nd = static_cast<size_t>(out.ndim());
  std::string want = "(";
  for (size_t i = 0; i < shape.size(); ++i) want += (i ? ", " : "") + std::to_string(shape[i]);
  want += shape.size() == 1 ? ",)" : ")";
  bool same = nd == shape.size();
  for (size_t d = 0; same && d < nd; ++d) same = out.shape(static_cast<py::ssize_t>(d)) == shape[d];
  if (!same) {
    std::string have = "(";
    for (size_t i = 0; i < nd; ++i) have += (i ? ", " : "") + std::to_string(out.shape(static_cast<py::ssize_t>(i)));
    have += nd == 1 ? ",)" : ")";
    ThrowStatus(lsio::Status::InvalidArgument("out has shape " + have + ", expected " + want));
  }
  if (!out.writeable()) ThrowStatus(lsio::Status::InvalidArgument("out is read-only"));
  if (!py::cast<bool>(out.attr("flags").attr("aligned"))) {
    ThrowStatus(lsio::Status::InvalidArgument("out is not aligned"));
  }
  lsio::DstView v;
  v.data = static_cast<uint8_t*>(out.mutable_data());
  bool empty = false;
  for (size_t d = 0; d < nd; ++d) {
    v.shape.push_back(shape[d]);
    v.byte_strides.push_back(out.strides(static_cast<py::ssize_t>(d)));
    empty |= shape[d] == 0;
  }
  if (empty) return v;
  // Non-overlap: ordered by |stride|, each dimension must step past the whole extent of the
  // smaller ones. (Conservative: rejects some exotic interleavings that do not overlap.)
  std::vector<size_t> order;
  for (size_t d = 0; d < nd; ++d) {
    if (shape[d] <= 1) continue;
    if (v.byte_strides[d] < 0 && !allow_negative) {
      ThrowStatus(lsio::Status::InvalidArgument("out has negative strides"));
    }
    order.push_back(d);
  }
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::llabs(v.byte_strides[a]) < std::llabs(v.byte_strides[b]);
  });
  int64_t extent = static_cast<int64_t>(want_type.itemsize);
  for (size_t d : order) {
    const int64_t s = std::llabs(v.byte_strides[d]);
    if (s < extent) ThrowStatus(lsio::Status::InvalidArgument("out has overlapping strides"));
    // numpy bounds an array's byte extent by the address space, so this cannot overflow for
    // a real array; checked anyway, as the strides come from the caller. (Bindings see only
    // public headers, so the builtin rather than util/checked_math.h's CheckedMul.)
    if (__builtin_mul_overflow(s, shape[d], &extent)) ThrowStatus(lsio::Status::InvalidArgument("out is too large"));
  }
  return v;
}

void Check(const lsio::Status& st) {
  if (!st.ok()) ThrowStatus(st);
}

// The common case of Array.read / arr[key], decided in C++: a key of exact ints and step-1
// slices, at most one entry per dimension (the rest whole). Returns false, having changed
// nothing the caller sees, for any other key and for keys numpy would reject (an int out of
// range): the Python path then handles them and raises its usual errors. Otherwise fills,
// per array dimension, the selection and whether an int dropped it from the result.
bool SimpleKey(const py::handle key, const std::vector<int64_t>& shape, std::vector<int64_t>* starts,
               std::vector<int64_t>* counts, std::vector<bool>* dropped) {
  const size_t nd = shape.size();
  PyObject* k = key.ptr();
  PyObject* const* items = &k;
  size_t n = 1;
  if (PyTuple_CheckExact(k)) {
    items = &PyTuple_GET_ITEM(k, 0);
    n = static_cast<size_t>(PyTuple_GET_SIZE(k));
  }
  if (n > nd) return false;
  starts->assign(nd, 0);
  counts->assign(shape.begin(), shape.end());
  dropped->assign(nd, false);
  for (size_t d = 0; d < n; ++d) {
    const int64_t len = shape[d];
    PyObject* it = items[d];
    if (PyLong_CheckExact(it)) {  // exact int: not a bool, not a numpy scalar
      int overflow = 0;
      long long i = PyLong_AsLongLongAndOverflow(it, &overflow);
      if (overflow != 0 || (i == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return false;
      }
      if (i < 0) i += len;
      if (i < 0 || i >= len) return false;
      (*starts)[d] = i;
      (*counts)[d] = 1;
      (*dropped)[d] = true;
    } else if (PySlice_Check(it)) {
      Py_ssize_t start = 0, stop = 0, step = 0;
      if (PySlice_Unpack(it, &start, &stop, &step) != 0) {
        PyErr_Clear();
        return false;
      }
      if (step != 1) return false;
      const Py_ssize_t count = PySlice_AdjustIndices(static_cast<Py_ssize_t>(len), &start, &stop, step);
      (*starts)[d] = count > 0 ? start : 0;
      (*counts)[d] = count;
    } else {
      return false;
    }
  }
  return true;
}

py::dict Info(const lsio::Array& a) {
  const lsio::ArrayInfo& i = a.info();
  py::dict d;
  d["path"] = i.path;
  d["shape"] = py::tuple(py::cast(i.shape));
  d["data_type"] = i.data_type;
  d["typestr"] = i.typestr;
  d["descr"] = i.descr;
  d["itemsize"] = i.itemsize;
  d["chunks"] = py::tuple(py::cast(i.chunks));
  d["shards"] = i.shards ? py::object(py::tuple(py::cast(*i.shards))) : py::none();
  d["fill_value"] = py::bytes(reinterpret_cast<const char*>(i.fill_value.data()), i.fill_value.size());
  d["attributes_json"] = i.attributes_json;
  if (i.dimension_names) {
    py::list names;
    for (const auto& n : *i.dimension_names) names.append(n ? py::object(py::str(*n)) : py::none());
    d["dimension_names"] = py::tuple(names);
  } else {
    d["dimension_names"] = py::none();
  }
  d["codecs"] = i.codecs;
  d["zarr_format"] = i.zarr_format;
  return d;
}

}  // namespace

py::dict ArrayStats(const lsio::Array& a);  // remote.cc

// direct=: True, False or "auto" (Python's _options.direct_option resolved it already).
static lsio::DirectIo DirectFrom(const py::object& v) {
  if (py::isinstance<py::bool_>(v)) return v.cast<bool>() ? lsio::DirectIo::kOn : lsio::DirectIo::kOff;
  if (py::isinstance<py::str>(v) && v.cast<std::string>() == "auto") return lsio::DirectIo::kAuto;
  throw py::type_error("direct must be True, False or \"auto\"");
}

void BindArray(py::module_& m) {
  py::class_<lsio::Array>(m, "Array")
      .def("info", &Info)
      .def("stats", &ArrayStats, "Counters of the array's store (requests, retries, bytes fetched and used).")
      .def("direct_decision",
           [](const lsio::Array& a) {
             const lsio::DirectDecision& d = a.direct_decision();
             py::dict out;
             out["mode"] = d.mode;
             out["direct_misses"] = d.direct_misses;
             out["direct_all"] = d.direct_all;
             out["stored_bytes"] = d.stored_bytes;
             out["room_bytes"] = d.room_bytes;
             out["room_source"] = d.room_source;
             out["reason"] = d.reason;
             return out;
           },
           "How the array reads local files (direct=True/False/auto) and, for auto, why.")
      .def("close", [](lsio::Array& a) { a.Close(); },
           "Drops this array's cached descriptors and shard indexes (the Array stays usable).")
      .def("backend_name",
           [](lsio::Array& a) {
             auto r = a.BackendName();
             Check(r.status());
             return r.value();
           })
      .def("stored_chunk_nbytes",
           [](lsio::Array& a) {
             lsio::Result<std::vector<int64_t>> r = WithoutGil([&] { return a.StoredChunkBytes(); });
             Check(r.status());
             const lsio::ArrayInfo& i = a.info();
             std::vector<py::ssize_t> grid;
             for (size_t d = 0; d < i.shape.size(); ++d) grid.push_back((i.shape[d] + i.chunks[d] - 1) / i.chunks[d]);
             py::array_t<int64_t> out(grid);
             std::copy(r.value().begin(), r.value().end(), out.mutable_data());
             return out;
           })
      .def(
          "read_into",
          [](lsio::Array& a, const std::vector<int64_t>& starts, const std::vector<int64_t>& counts,
             const std::vector<int64_t>& steps, const py::array& out,
             const std::optional<lsio::ElementTransform>& transform) {
            const size_t nd = a.info().shape.size();
            if (starts.size() != nd || counts.size() != nd || steps.size() != nd) {
              ThrowStatus(lsio::Status::InvalidArgument("selection rank does not match the array"));
            }
            lsio::DstView v = CheckedView(out, ExpectedOut(a.info(), transform), counts, /*allow_negative=*/true);
            lsio::Selection sel(nd);
            for (size_t d = 0; d < nd; ++d) sel[d] = {starts[d], counts[d], steps[d]};
            const lsio::Status st = WithoutGil([&](const std::function<bool()>& interrupted) {
              return a.ReadBatch({sel}, {v}, interrupted, transform ? &*transform : nullptr);
            });
            Check(st);
          },
          py::arg("starts"), py::arg("counts"), py::arg("steps"), py::arg("out"),
          py::arg("transform") = py::none())
      .def(
          "read_simple",
          // Array.read's fast path (SimpleKey): fills and returns `out` (a new array of
          // `dtype` when None), or returns None, having read nothing, when the key needs the
          // general Python path. `out` gets the same checks and errors as read_into.
          [](lsio::Array& a, const py::handle key, const py::object& out_obj, const py::dtype& dtype) -> py::object {
            const lsio::ArrayInfo& info = a.info();
            std::vector<int64_t> starts, counts;
            std::vector<bool> dropped;
            if (!SimpleKey(key, info.shape, &starts, &counts, &dropped)) return py::none();
            std::vector<int64_t> out_shape;
            for (size_t d = 0; d < counts.size(); ++d) {
              if (!dropped[d]) out_shape.push_back(counts[d]);
            }
            py::array out;
            if (out_obj.is_none()) {
              out = py::array(dtype, std::vector<py::ssize_t>(out_shape.begin(), out_shape.end()));
            } else {
              if (!py::isinstance<py::array>(out_obj)) return py::none();  // the Python path says why
              out = py::reinterpret_borrow<py::array>(out_obj);
            }
            const lsio::DstView v = CheckedView(out, ExpectedOut(info, std::nullopt), out_shape, /*allow_negative=*/false);
            if (std::find(counts.begin(), counts.end(), 0) != counts.end()) return out;
            // The engine addresses every array dimension: an int-indexed one has count 1.
            lsio::DstView full;
            full.data = v.data;
            lsio::Selection sel(counts.size());
            for (size_t d = 0, o = 0; d < counts.size(); ++d) {
              sel[d] = {starts[d], counts[d], 1};
              full.shape.push_back(counts[d]);
              full.byte_strides.push_back(dropped[d] ? 0 : v.byte_strides[o++]);
            }
            const lsio::Status st = WithoutGil([&](const std::function<bool()>& interrupted) {
              return a.ReadBatch({sel}, {full}, interrupted, nullptr);
            });
            Check(st);
            return out;
          },
          py::arg("key"), py::arg("out"), py::arg("dtype"))
      .def(
          "read_outer_into",
          // Outer (orthogonal) indexing: per dimension, runs of evenly spaced indices given as
          // rows (start, count, step, dst_offset); a negative step fills its output backwards.
          // The selection is the cartesian product of the runs; the engine plans it without
          // expanding that product (Array::ReadOuter), so memory grows with the runs and the
          // chunks touched, and chunks shared by several indices are read and decoded once.
          [](lsio::Array& a, const std::vector<py::array>& runs_obj, const py::array& out,
             const std::optional<lsio::ElementTransform>& transform) {
            const size_t nd = a.info().shape.size();
            if (runs_obj.size() != nd) ThrowStatus(lsio::Status::InvalidArgument("one run list per dimension is required"));
            std::vector<py::array_t<int64_t, py::array::c_style>> runs;
            lsio::OuterSelection sel;
            std::vector<int64_t> shape(nd, 0);
            for (size_t d = 0; d < nd; ++d) {
              auto r = py::array_t<int64_t, py::array::c_style>::ensure(runs_obj[d]);
              if (!r || r.ndim() != 2 || r.shape(1) != 4) {
                ThrowStatus(lsio::Status::InvalidArgument("runs must be int64 arrays of shape (K, 4)"));
              }
              const int64_t* p = r.data();
              for (py::ssize_t k = 0; k < r.shape(0); ++k) {
                if ((p[4 * k + 2] == 0 && p[4 * k + 1] > 1) || p[4 * k + 1] < 0 || p[4 * k + 3] < 0) {
                  ThrowStatus(lsio::Status::InvalidArgument("bad run (zero step or negative count/offset)"));
                }
                int64_t end = 0;  // Array::ReadOuter checks the runs themselves exactly
                if (__builtin_add_overflow(p[4 * k + 3], p[4 * k + 1], &end)) {
                  ThrowStatus(lsio::Status::OutOfRange("run output range overflows int64"));
                }
                shape[d] = std::max(shape[d], end);
              }
              sel.runs.push_back(p);
              sel.num_runs.push_back(static_cast<size_t>(r.shape(0)));
              runs.push_back(std::move(r));
            }
            lsio::DstView v = CheckedView(out, ExpectedOut(a.info(), transform), shape, /*allow_negative=*/false);
            sel.dst = v.data;
            sel.shape = std::move(v.shape);
            sel.byte_strides = std::move(v.byte_strides);
            const lsio::Status st = WithoutGil([&](const std::function<bool()>& interrupted) {
              return a.ReadOuter(sel, interrupted, transform ? &*transform : nullptr);
            });
            Check(st);
          },
          py::arg("runs"), py::arg("out"), py::arg("transform") = py::none())
      .def(
          "read_crops_into",
          [](lsio::Array& a, const py::array& starts_obj, const std::vector<int64_t>& crop,
             const py::array& out, const std::optional<lsio::ElementTransform>& transform) {
            const size_t nd = a.info().shape.size();
            auto starts = py::array_t<int64_t, py::array::c_style>::ensure(starts_obj);
            if (!starts || starts.ndim() != 2 || static_cast<size_t>(starts.shape(1)) != nd) {
              ThrowStatus(lsio::Status::InvalidArgument("starts must be an integer array of shape (N, ndim)"));
            }
            if (crop.size() != nd) ThrowStatus(lsio::Status::InvalidArgument("crop shape rank does not match the array"));
            const int64_t n = starts.shape(0);
            std::vector<int64_t> full{n};
            full.insert(full.end(), crop.begin(), crop.end());
            lsio::DstView v = CheckedView(out, ExpectedOut(a.info(), transform), full, /*allow_negative=*/false);
            // The crops as one BoxBatch over the caller's `starts` buffer: nothing is allocated
            // per crop (10^6 crops used to cost ~300 bytes each before planning began).
            lsio::BoxBatch batch;
            batch.ndim = static_cast<int>(nd);
            batch.size = static_cast<size_t>(n);
            batch.starts = starts.data();
            batch.starts_stride = nd;
            batch.counts = crop.data();
            batch.dst_strides = v.byte_strides.data() + 1;
            batch.dst = v.data;
            batch.dst_box_stride = v.byte_strides[0];
            const lsio::Status st = WithoutGil([&](const std::function<bool()>& interrupted) {
              return a.ReadBoxes(batch, interrupted, transform ? &*transform : nullptr);
            });
            Check(st);
          },
          py::arg("starts"), py::arg("shape"), py::arg("out"), py::arg("transform") = py::none())
      .def(
          "stage_boxes",
          // The device path's host half (lsio/stage.h): the boxes' chunks into `staging`
          // (a writable uint8 buffer, pinned host memory for a GPU), the plan as arrays.
          [](lsio::Array& a, const py::array& starts_obj, const std::vector<int64_t>& counts,
             const std::optional<std::vector<int64_t>>& steps, int64_t out_box_stride,
             const std::vector<int64_t>& out_strides, const py::array& staging_obj, bool gpu_codecs) {
            const size_t nd = a.info().shape.size();
            auto starts = py::array_t<int64_t, py::array::c_style>::ensure(starts_obj);
            if (!starts || starts.ndim() != 2 || static_cast<size_t>(starts.shape(1)) != nd) {
              ThrowStatus(lsio::Status::InvalidArgument("starts must be an integer array of shape (N, ndim)"));
            }
            if (counts.size() != nd || out_strides.size() != nd || (steps && steps->size() != nd)) {
              ThrowStatus(lsio::Status::InvalidArgument("counts, steps and strides must have one entry per dimension"));
            }
            py::buffer_info sb = py::buffer(staging_obj).request(/*writable=*/true);
            if (sb.ndim != 1 || sb.itemsize != 1 || (sb.size > 1 && sb.strides[0] != 1)) {
              ThrowStatus(lsio::Status::InvalidArgument("staging must be a contiguous 1-d uint8 buffer"));
            }
            lsio::BoxBatch batch;
            batch.ndim = static_cast<int>(nd);
            batch.size = static_cast<size_t>(starts.shape(0));
            batch.starts = starts.data();
            batch.starts_stride = nd;
            batch.counts = counts.data();
            if (steps) batch.steps = steps->data();
            batch.dst_strides = out_strides.data();
            batch.dst_box_stride = out_box_stride;
            std::span<uint8_t> staging(static_cast<uint8_t*>(sb.ptr), static_cast<size_t>(sb.size));
            lsio::StagedBatch out;
            const lsio::Status st = WithoutGil([&](const std::function<bool()>& interrupted) {
              return a.StageBoxes(batch, staging, gpu_codecs, &out, interrupted);
            });
            Check(st);
            auto table = [](std::vector<int64_t>& v, size_t cols) {
              const size_t rows = cols == 0 ? 0 : v.size() / cols;
              py::array_t<int64_t> arr({static_cast<py::ssize_t>(rows), static_cast<py::ssize_t>(cols)});
              if (!v.empty()) std::memcpy(arr.mutable_data(), v.data(), v.size() * sizeof(int64_t));
              return arr;
            };
            py::dict d;
            d["needed"] = out.needed;
            d["staging_used"] = out.staging_used;
            d["decoded_bytes"] = out.decoded_bytes;
            d["max_decoded"] = out.max_decoded;
            d["bytes_read"] = out.bytes_read;
            d["frames"] = table(out.frames, lsio::kFrameCols);
            d["ops"] = table(out.ops, lsio::kOpCols);
            d["coords"] = table(out.coords, nd);
            d["files"] = out.files;
            return d;
          },
          py::arg("starts"), py::arg("counts"), py::arg("steps"), py::arg("out_box_stride"), py::arg("out_strides"),
          py::arg("staging"), py::arg("gpu_codecs") = true);

  m.def(
      "decode_staged_frame",
      [](int64_t codec, const py::buffer& src, const py::buffer& dst, int64_t check) {
        py::buffer_info in = src.request();
        py::buffer_info out = dst.request(/*writable=*/true);
        if (in.ndim != 1 || in.itemsize != 1 || out.ndim != 1 || out.itemsize != 1 ||
            (in.size > 1 && in.strides[0] != 1) || (out.size > 1 && out.strides[0] != 1)) {
          ThrowStatus(lsio::Status::InvalidArgument("frames are contiguous 1-d uint8 buffers"));
        }
        std::span<const uint8_t> i(static_cast<const uint8_t*>(in.ptr), static_cast<size_t>(in.size));
        std::span<uint8_t> o(static_cast<uint8_t*>(out.ptr), static_cast<size_t>(out.size));
        Check(WithoutGil([&] { return lsio::DecodeStagedFrame(codec, i, o, check); }));
      },
      py::arg("codec"), py::arg("src"), py::arg("dst"), py::arg("check") = -1);

  m.def(
      "open",
      [](const std::string& path, int threads, const std::string& io, unsigned queue_depth,
         uint64_t max_gap, uint64_t max_request, uint64_t index_cache_bytes, uint64_t memory_limit,
         const py::object& direct, uint64_t cache_bytes, const py::object& files) {
        lsio::OpenOptions o;
        o.cache_bytes = cache_bytes;
        o.threads = threads;
        o.io = io;
        o.queue_depth = queue_depth;
        o.max_gap = max_gap;
        o.max_request = max_request;
        o.index_cache_bytes = index_cache_bytes;
        o.memory_limit = memory_limit;
        o.direct = DirectFrom(direct);
        const auto read = NodeFilesFrom(files);
        lsio::Result<std::unique_ptr<lsio::Array>> r =
            WithoutGil([&] { return lsio::Array::Open(path, o, read ? &*read : nullptr); });
        Check(r.status());
        return std::move(r).value();
      },
      py::arg("path"), py::arg("threads") = 0, py::arg("io") = "auto", py::arg("queue_depth") = 64,
      py::arg("max_gap") = 16 << 10, py::arg("max_request") = 1 << 20,
      py::arg("index_cache_bytes") = 64 << 20, py::arg("memory_limit") = 0, py::arg("direct") = "auto",
      py::arg("cache_bytes") = 0, py::arg("files") = py::none());

  m.def("cache_info", [] {
    const lsio::ChunkCacheStats c = lsio::GetChunkCacheStats();
    py::dict d;
    d["capacity"] = c.capacity;
    d["bytes"] = c.bytes;
    d["entries"] = c.entries;
    d["hits"] = c.hits;
    d["misses"] = c.misses;
    d["inserts"] = c.inserts;
    d["evictions"] = c.evictions;
    return d;
  });
  m.def("cache_clear", &lsio::ClearChunkCache);
  m.def("close_files", &lsio::CloseLocalFiles, py::call_guard<py::gil_scoped_release>());
  // Private: benchmarks/python/scaling.py measures the serial share of a call with it.
  m.def("_last_call_profile", [] {
    const lsio::CallProfile p = lsio::GetLastCallProfile();
    py::dict d;
    d["total_ns"] = p.total_ns;
    d["workers_ns"] = p.workers_ns;
    d["plan_ns"] = p.plan_ns;
    d["resolve_ns"] = p.resolve_ns;
    d["coalesce_ns"] = p.coalesce_ns;
    d["waves"] = p.waves;
    d["workers"] = p.workers;
    d["units"] = p.units;
    d["streamed"] = p.streamed;
    d["stream_threshold_bytes"] = p.stream_threshold_bytes;
    return d;
  });

  m.def(
      "check_out",
      [](const py::object& out, const lsio::Array& a, const std::vector<int64_t>& shape,
         const std::optional<lsio::ElementTransform>& transform) {
        if (!py::isinstance<py::array>(out) || !py::isinstance(out, py::module_::import("numpy").attr("ndarray"))) {
          ThrowStatus(lsio::Status::InvalidType("out must be a numpy.ndarray"));
        }
        CheckedView(py::reinterpret_borrow<py::array>(out), ExpectedOut(a.info(), transform), shape,
                    /*allow_negative=*/false);
      },
      py::arg("out"), py::arg("array"), py::arg("shape"), py::arg("transform") = py::none());

  py::class_<lsio::ElementTransform>(m, "ElementTransform")
      .def(py::init([](const std::string& out_type, double scale, double offset) {
             return lsio::ElementTransform{out_type, scale, offset};
           }),
           py::arg("out_type"), py::arg("scale") = 1.0, py::arg("offset") = 0.0)
      .def_readonly("out_type", &lsio::ElementTransform::out_type)
      .def_readonly("scale", &lsio::ElementTransform::scale)
      .def_readonly("offset", &lsio::ElementTransform::offset);
}

}  // namespace lsio_py
