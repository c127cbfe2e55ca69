// Bindings of lsio/manifest.h: kerchunk references (python/lsio/_kerchunk.py) as a store
// arrays and groups are read through (_core.References, _core.ReferenceView, open_references).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "errors.h"
#include "gil.h"
#include "node.h"
#include "lsio/array.h"
#include "lsio/manifest.h"
#include "lsio/remote.h"

namespace py = pybind11;

namespace lsio_py {

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
             std::vector<std::string> keys) { return Value(r.RemoteView(prefix, *target, std::move(keys))); },
          py::arg("prefix"), py::arg("target"), py::arg("keys"));

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
