// Bindings of lsio/manifest.h: kerchunk references (python/lsio/_kerchunk.py) as a store
// arrays and groups are read through (_core.References, _core.ReferenceView, open_references).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "errors.h"
#include "gil.h"
#include "node.h"
#include "lsio/array.h"
#include "lsio/icechunk.h"
#include "lsio/manifest.h"
#include "lsio/remote.h"

namespace py = pybind11;

namespace lsio_py {

namespace {

// An Icechunk metadata file parsed without the GIL; errors name the file.
template <typename T>
T ParseFile(lsio::Result<T> (*parse)(std::string_view), const py::bytes& file, const std::string& location) {
  std::string f = file;
  return Value(WithoutGil([&] {
    lsio::Result<T> x = parse(f);
    return x.ok() ? std::move(x) : lsio::Result<T>(lsio::Status(x.status()).WithPath(location));
  }));
}

}  // namespace

void BindManifest(py::module_& m) {
  py::class_<lsio::ReferenceView, std::shared_ptr<lsio::ReferenceView>>(m, "ReferenceView")
      .def("sub", &lsio::ReferenceView::Sub, py::arg("prefix"))
      .def("location", &lsio::ReferenceView::Location, py::arg("key") = "");

  py::class_<lsio::References, std::shared_ptr<lsio::References>>(m, "References")
      .def_static(
          "from_kerchunk",
          [](const py::bytes& text, const std::string& location) {
            std::string t = text;
            return Value(WithoutGil([&] { return lsio::References::FromKerchunk(t, location); }));
          },
          py::arg("text"), py::arg("location"))
      .def_static(
          "from_entries",
          [](const py::dict& inline_values, std::vector<std::string> keys, std::vector<std::string> urls,
             const std::vector<int64_t>& url_ids, const std::vector<int64_t>& offsets,
             const std::vector<int64_t>& lengths, const std::string& location) {
            std::vector<std::pair<std::string, std::string>> inl;
            inl.reserve(inline_values.size());
            for (auto item : inline_values) {
              inl.emplace_back(py::cast<std::string>(item.first), py::cast<std::string>(item.second));
            }
            return Value(lsio::References::FromEntries(std::move(inl), std::move(keys), std::move(urls), url_ids,
                                                       offsets, lengths, location));
          },
          py::arg("inline_values"), py::arg("keys"), py::arg("urls"), py::arg("url_ids"), py::arg("offsets"),
          py::arg("lengths"), py::arg("location"))
      .def_static(
          "from_icechunk",
          [](const py::dict& inline_values, const py::list& arrays, const std::vector<py::bytes>& manifest_files,
             const std::vector<std::string>& manifest_locations, const std::string& location) {
            std::vector<std::pair<std::string, std::string>> inl;
            inl.reserve(inline_values.size());
            for (auto item : inline_values) {
              inl.emplace_back(py::cast<std::string>(item.first), py::cast<std::string>(item.second));
            }
            // arrays: (node_id, root, separator, v2_keys, ndim, [(manifest number, [(from, to), ...]), ...])
            std::vector<lsio::References::IcechunkArray> arr;
            for (const py::handle& h : arrays) {
              const auto t = py::cast<py::tuple>(h);
              lsio::References::IcechunkArray a;
              a.node_id = py::cast<std::string>(t[0]);
              a.root = py::cast<std::string>(t[1]);
              const auto sep = py::cast<std::string>(t[2]);
              if (sep.size() != 1) throw py::value_error("a chunk key separator is one character");
              a.separator = sep[0];
              a.v2_keys = py::cast<bool>(t[3]);
              a.ndim = py::cast<size_t>(t[4]);
              a.manifests = py::cast<std::vector<std::pair<size_t, std::vector<std::pair<uint32_t, uint32_t>>>>>(t[5]);
              arr.push_back(std::move(a));
            }
            std::vector<std::string> files;
            files.reserve(manifest_files.size());
            for (const py::bytes& b : manifest_files) files.emplace_back(b);
            return Value(WithoutGil([&] {
              return lsio::References::FromIcechunk(std::move(inl), arr, files, manifest_locations, location);
            }));
          },
          py::arg("inline_values"), py::arg("arrays"), py::arg("manifest_files"), py::arg("manifest_locations"),
          py::arg("location"))
      .def("checks", &lsio::References::checks)
      .def("urls", &lsio::References::urls)
      .def("__len__", &lsio::References::size)
      .def("memory_bytes", &lsio::References::memory_bytes)
      .def("children", &lsio::References::Children, py::arg("prefix") = "")
      .def(
          "local_view",
          [](const lsio::References& r, const std::string& prefix, const std::string& root,
             std::vector<std::string> keys, const std::string& io, unsigned queue_depth, bool direct) {
            return Value(r.LocalView(prefix, root, std::move(keys), io, queue_depth, direct));
          },
          py::arg("prefix"), py::arg("root"), py::arg("keys"), py::arg("io") = "auto", py::arg("queue_depth") = 64,
          py::arg("direct") = false)
      .def(
          "remote_view",
          [](const lsio::References& r, const std::string& prefix, const std::shared_ptr<lsio::RemoteStore>& target,
             std::vector<std::string> keys, std::vector<std::string> versions) {
            return Value(r.RemoteView(prefix, *target, std::move(keys), std::move(versions)));
          },
          py::arg("prefix"), py::arg("target"), py::arg("keys"), py::arg("versions") = std::vector<std::string>())
      .def(
          "mixed_view",
          // targets: a local directory (str) or a RemoteStore each
          [](const lsio::References& r, const std::string& prefix, const py::list& targets,
             std::vector<uint32_t> target_of, std::vector<std::string> keys, std::vector<std::string> versions,
             const std::string& io, unsigned queue_depth) {
            std::vector<lsio::References::ViewTarget> t;
            for (const py::handle& h : targets) {
              lsio::References::ViewTarget v;
              if (py::isinstance<py::str>(h)) v.local_root = py::cast<std::string>(h);
              else v.remote = py::cast<std::shared_ptr<lsio::RemoteStore>>(h);
              t.push_back(std::move(v));
            }
            return Value(r.MixedView(prefix, t, std::move(target_of), std::move(keys), std::move(versions), io,
                                     queue_depth));
          },
          py::arg("prefix"), py::arg("targets"), py::arg("target_of"), py::arg("keys"),
          py::arg("versions") = std::vector<std::string>(), py::arg("io") = "auto", py::arg("queue_depth") = 64);

  // Icechunk's repo info and snapshot files (python/lsio/_icechunk.py).
  m.def(
      "icechunk_repo",
      [](const py::bytes& file, const std::string& location) {
        lsio::IcechunkRepoInfo info = ParseFile(&lsio::ParseIcechunkRepo, file, location);
        py::dict d;
        d["spec_version"] = info.spec_version;
        d["branches"] = py::cast(info.branches);
        d["tags"] = py::cast(info.tags);
        d["deleted_tags"] = py::cast(info.deleted_tags);
        d["snapshots"] = py::cast(info.snapshots);
        d["config"] = info.config_json;
        return d;
      },
      py::arg("file"), py::arg("location"));
  m.def(
      "icechunk_snapshot",
      [](const py::bytes& file, const std::string& location) {
        lsio::IcechunkSnapshot s = ParseFile(&lsio::ParseIcechunkSnapshot, file, location);
        py::list nodes;
        for (const lsio::IcechunkNode& n : s.nodes) {
          py::list manifests;
          for (const lsio::IcechunkManifestRef& m : n.manifests) manifests.append(py::make_tuple(m.id, py::cast(m.extents)));
          py::dict d;
          d["path"] = n.path;
          d["node_id"] = py::bytes(n.node_id);
          d["is_array"] = n.is_array;
          d["zarr_json"] = py::bytes(n.user_data);
          d["manifests"] = manifests;
          nodes.append(d);
        }
        py::dict d;
        d["spec_version"] = s.spec_version;
        d["id"] = s.id;
        d["parent_id"] = s.parent_id;
        d["flushed_at_us"] = s.flushed_at_us;
        d["message"] = s.message;
        d["nodes"] = nodes;
        return d;
      },
      py::arg("file"), py::arg("location"));

  m.def(
      "open_references",
      [](const std::shared_ptr<lsio::ReferenceView>& view, int threads, uint64_t max_gap, uint64_t max_request,
         uint64_t index_cache_bytes, uint64_t memory_limit, uint64_t cache_bytes, bool adaptive_coalescing,
         const py::object& files) {
        lsio::OpenOptions o;
        o.threads = threads;
        o.max_gap = max_gap;
        o.max_request = max_request;
        o.index_cache_bytes = index_cache_bytes;
        o.memory_limit = memory_limit;
        o.cache_bytes = cache_bytes;
        o.adaptive_coalescing = adaptive_coalescing;
        const auto read = NodeFilesFrom(files);
        auto r = WithoutGil([&] { return lsio::Array::Open(view->store(), view->Location(""), o, read ? &*read : nullptr); });
        return Value(std::move(r));
      },
      py::arg("view"), py::arg("threads") = 0, py::arg("max_gap") = 16 << 10, py::arg("max_request") = 1 << 20,
      py::arg("index_cache_bytes") = 64 << 20, py::arg("memory_limit") = 0, py::arg("cache_bytes") = 0,
      py::arg("adaptive_coalescing") = false, py::arg("files") = py::none());
}

}  // namespace lsio_py
