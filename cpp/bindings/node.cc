// Bindings of lsio/node.h (read_node) and lsio::StringArray (lsio/strings.h). Python's groups,
// listings and string arrays (python/lsio/_nodes.py, _strings.py) use these instead of reading
// or translating metadata themselves.
#include "node.h"

#include <pybind11/stl.h>

#include "errors.h"
#include "gil.h"
#include "lsio/manifest.h"
#include "lsio/remote.h"
#include "lsio/strings.h"

namespace py = pybind11;

namespace lsio_py {
namespace {

// JSON -> Python objects through the json module: bare NaN / Infinity tokens (kept by the
// lenient parser, lsio/node.h) come back as floats, as json.loads reads them.
py::object ToPython(const nlohmann::json& j) {
  return py::module_::import("json").attr("loads")(lsio::NodeJsonText(j));
}

py::object NodeDict(std::optional<lsio::Node> node) {
  if (!node.has_value()) return py::none();
  py::dict d;
  d["node_type"] = node->node_type;
  d["zarr_format"] = node->zarr_format;
  d["metadata"] = ToPython(node->metadata);
  d["consolidated"] = node->consolidated.is_null() ? py::object(py::none()) : ToPython(node->consolidated);
  py::list files;
  for (const lsio::NodeFile& f : node->files) {
    py::dict one;
    one["key"] = f.key;
    one["location"] = f.location;
    one["text"] = py::bytes(f.text);
    files.append(one);
  }
  d["files"] = files;
  return d;
}

std::vector<int64_t> Coords(const py::sequence& s) {
  std::vector<int64_t> c;
  for (auto v : s) c.push_back(py::cast<int64_t>(v));
  return c;
}

nlohmann::json FromPythonJson(const std::string& text) {
  // Bounded nesting, as the engine's own metadata parser (zarr/metadata.cc ParseJsonLenient):
  // dump() and comparisons recurse.
  bool deep = false;
  auto depth_check = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json&) {
    if (depth > 256 && (event == nlohmann::json::parse_event_t::object_start ||
                        event == nlohmann::json::parse_event_t::array_start)) {
      deep = true;
      return false;
    }
    return true;
  };
  nlohmann::json j = nlohmann::json::parse(text, depth_check, /*allow_exceptions=*/false);
  if (deep) ThrowStatus(lsio::Status::InvalidFormat("metadata JSON is nested deeper than 256 levels"));
  if (j.is_discarded()) ThrowStatus(lsio::Status::InvalidArgument("metadata must be JSON text"));
  return j;
}

}  // namespace

std::optional<std::vector<lsio::NodeFile>> NodeFilesFrom(const py::object& files) {
  if (files.is_none()) return std::nullopt;
  std::vector<lsio::NodeFile> out;
  for (auto f : files) {
    py::dict d = py::reinterpret_borrow<py::dict>(f);
    out.push_back({py::cast<std::string>(d["key"]), py::cast<std::string>(d["location"]),
                   py::cast<std::string>(d["text"])});
  }
  return out;
}

void BindNode(py::module_& m) {
  m.def(
      "read_node",
      [](const py::object& source, const std::string& key, bool v2_consolidated) -> py::object {
        if (py::isinstance<py::str>(source)) {
          const std::string dir = py::cast<std::string>(source);
          return NodeDict(Value(WithoutGil([&] { return lsio::ReadNode(dir, key, v2_consolidated); })));
        }
        if (py::isinstance<lsio::ReferenceView>(source)) {
          auto view = py::cast<std::shared_ptr<lsio::ReferenceView>>(source);
          return NodeDict(Value(WithoutGil([&] { return lsio::ReadNode(*view->store(), key, v2_consolidated); })));
        }
        auto store = py::cast<std::shared_ptr<lsio::RemoteStore>>(source);
        return NodeDict(Value(WithoutGil([&] { return lsio::ReadNode(*store->store(), key, v2_consolidated); })));
      },
      py::arg("source"), py::arg("key") = "", py::arg("v2_consolidated") = true,
      "The node (array or group) at `key` below `source` (a local directory or a RemoteStore): "
      "a dict with node_type, zarr_format, metadata (v3 form), consolidated (members or None) and "
      "files (what was read); None when there is no zarr.json, .zarray or .zgroup.");

  py::class_<lsio::StringArray>(m, "StringArray")
      .def(py::init([](const py::object& source, const std::string& metadata_json, const std::string& location) {
             const nlohmann::json meta = FromPythonJson(metadata_json);
             if (py::isinstance<py::str>(source)) {
               return Value(lsio::StringArray::Open(py::cast<std::string>(source), meta, location));
             }
             if (py::isinstance<lsio::ReferenceView>(source)) {  // references: the view of the array
               return Value(lsio::StringArray::Open(py::cast<std::shared_ptr<lsio::ReferenceView>>(source)->store(),
                                                    meta, location));
             }
             auto store = py::cast<std::shared_ptr<lsio::RemoteStore>>(source);
             return Value(lsio::StringArray::Open(store->store(), meta, location));
           }),
           py::arg("source"), py::arg("metadata_json"), py::arg("metadata_location"))
      .def_property_readonly("shape", &lsio::StringArray::shape)
      .def_property_readonly("chunks", &lsio::StringArray::chunks)
      .def_property_readonly("fill_value", &lsio::StringArray::fill_value)
      .def_property_readonly("codecs", &lsio::StringArray::codecs_description)
      .def("chunk_key", [](const lsio::StringArray& a, const py::sequence& c) { return a.ChunkKey(Coords(c)); })
      .def("location", &lsio::StringArray::Location, py::arg("key"))
      .def("read_chunk", [](const lsio::StringArray& a, const py::sequence& c) -> py::object {
        const std::vector<int64_t> coords = Coords(c);
        auto items = Value(WithoutGil([&] { return a.ReadChunk(coords); }));
        if (!items.has_value()) return py::none();
        py::list out(items->size());
        for (size_t i = 0; i < items->size(); ++i) {
          const std::string& s = (*items)[i];
          out[i] = py::reinterpret_steal<py::object>(
              PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "strict"));
        }
        return out;
      });
}

}  // namespace lsio_py
