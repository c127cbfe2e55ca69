// Bindings of lsio::RemoteStore (lsio/remote.h) and of opening an Array on one.
// python/lsio/_storage.py turns a URL and storage_options into the options dict taken here;
// python/lsio/array.py and group.py hold the resulting store.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "errors.h"
#include "gil.h"
#include "node.h"
#include "lsio/array.h"
#include "lsio/remote.h"

namespace py = pybind11;

namespace lsio_py {
namespace {

template <typename T>
void Take(const py::dict& d, const char* key, T* field) {
  if (d.contains(key) && !d[key].is_none()) *field = py::cast<T>(d[key]);
}

lsio::RemoteOptions OptionsFrom(const py::dict& d) {
  static const char* kKnown[] = {"scheme", "host", "root", "display_url", "provider", "signing", "region", "service",
                                 "access_key_id", "secret_access_key", "session_token", "token", "headers",
                                 "verify_ssl", "ca_file", "request_concurrency", "timeout", "connect_timeout",
                                 "retries", "total_timeout", "credentials_expiry", "credential_source", "list_root",
                                 "cache_dir", "cache_bytes", "cache_max_age"};
  for (auto item : d) {
    const std::string k = py::cast<std::string>(item.first);
    bool known = false;
    for (const char* n : kKnown) known |= k == n;
    if (!known) ThrowStatus(lsio::Status::InvalidArgument("unknown remote store option '" + k + "'"));
  }
  lsio::RemoteOptions o;
  Take(d, "scheme", &o.scheme);
  Take(d, "host", &o.host);
  Take(d, "root", &o.root);
  Take(d, "display_url", &o.display_root);
  Take(d, "provider", &o.provider);
  Take(d, "signing", &o.signing);
  Take(d, "region", &o.region);
  Take(d, "service", &o.service);
  Take(d, "access_key_id", &o.access_key_id);
  Take(d, "secret_access_key", &o.secret_access_key);
  Take(d, "session_token", &o.session_token);
  Take(d, "token", &o.token);
  Take(d, "headers", &o.headers);
  Take(d, "verify_ssl", &o.verify_ssl);
  Take(d, "ca_file", &o.ca_file);
  Take(d, "request_concurrency", &o.request_concurrency);
  Take(d, "timeout", &o.timeout_s);
  Take(d, "connect_timeout", &o.connect_timeout_s);
  Take(d, "retries", &o.retries);
  Take(d, "total_timeout", &o.total_timeout_s);
  Take(d, "cache_dir", &o.cache_dir);
  Take(d, "cache_bytes", &o.cache_bytes);
  Take(d, "cache_max_age", &o.cache_max_age_s);
  // None: the store cannot list (plain HTTP).
  if (d.contains("list_root") && !d["list_root"].is_none()) {
    o.listable = true;
    o.list_root = py::cast<std::string>(d["list_root"]);
  }
  return o;
}

py::dict CountersDict(const lsio::StoreCounters& c) {
  py::dict d;
  d["requests"] = c.requests;
  d["retries"] = c.retries;
  d["bytes_fetched"] = c.bytes_fetched;
  d["bytes_used"] = c.bytes_used;
  d["errors"] = c.errors;
  d["disk_cache_hits"] = c.disk_cache_hits;
  d["disk_cache_bytes"] = c.disk_cache_bytes;
  d["direct_reads"] = c.direct_reads;
  d["page_cache_reads"] = c.page_cache_reads;
  d["mapped_reads"] = c.mapped_reads;
  if (c.max_gap != 0) {
    d["max_gap"] = c.max_gap;
    d["max_request"] = c.max_request;
  }
  return d;
}

}  // namespace

void BindRemote(py::module_& m) {
  py::class_<lsio::RemoteStore, std::shared_ptr<lsio::RemoteStore>>(m, "RemoteStore")
      .def(py::init([](const py::dict& options) { return Value(lsio::RemoteStore::Create(OptionsFrom(options))); }),
           py::arg("options"))
      .def("sub", [](const lsio::RemoteStore& s, const std::string& path) { return Value(s.Sub(path)); },
           py::arg("path"))
      .def(
          "get",
          [](lsio::RemoteStore& s, const std::string& key, uint64_t max_bytes) -> py::object {
            auto r = WithoutGil([&] { return s.Get(key, max_bytes); });
            std::optional<std::string> v = Value(std::move(r));
            if (!v) return py::none();
            return py::bytes(*v);
          },
          py::arg("key"), py::arg("max_bytes") = uint64_t{64} << 20)
      .def(
          "exists",
          [](lsio::RemoteStore& s, const std::string& key) {
            return Value(WithoutGil([&] { return s.Exists(key); }));
          },
          py::arg("key"))
      .def(
          "stat",
          [](lsio::RemoteStore& s, const std::string& key) -> py::object {
            auto r = Value(WithoutGil([&] { return s.StatHead(key); }));
            if (!r) return py::none();
            py::dict d;
            d["size"] = r->size;
            d["version"] = r->version;
            d["last_modified"] = r->last_modified;
            return d;
          },
          py::arg("key"))
      .def(
          "read_range",
          [](lsio::RemoteStore& s, const std::string& key, uint64_t offset, uint64_t length,
             const std::string& version, uint64_t size) {
            std::string v = Value(WithoutGil([&] { return s.ReadRange(key, offset, length, version, size); }));
            return py::bytes(v);
          },
          py::arg("key"), py::arg("offset"), py::arg("length"), py::arg("version") = "", py::arg("size") = 0)
      .def(
          "read_ranges",
          [](lsio::RemoteStore& s, const std::string& key, const std::vector<std::pair<uint64_t, uint64_t>>& ranges,
             const std::string& version, uint64_t size) {
            std::vector<std::string> v = Value(WithoutGil([&] { return s.ReadRanges(key, ranges, version, size); }));
            py::list out;
            for (const std::string& x : v) out.append(py::bytes(x));
            return out;
          },
          py::arg("key"), py::arg("ranges"), py::arg("version") = "", py::arg("size") = 0)
      .def(
          "list_children",
          [](lsio::RemoteStore& s, const std::string& prefix) {
            return Value(WithoutGil([&] { return s.ListChildren(prefix); }));
          },
          py::arg("prefix") = "")
      .def("set_credentials", &lsio::RemoteStore::SetCredentials, py::arg("access_key_id"),
           py::arg("secret_access_key"), py::arg("session_token"), py::arg("token"))
      .def("counters", [](const lsio::RemoteStore& s) { return CountersDict(s.Counters()); })
      .def("location", &lsio::RemoteStore::Location, py::arg("key") = "");

  m.def(
      "open_remote",
      [](const std::shared_ptr<lsio::RemoteStore>& store, int threads, uint64_t max_gap, uint64_t max_request,
         uint64_t index_cache_bytes, uint64_t memory_limit, bool adaptive_coalescing, const py::object& files) {
        lsio::OpenOptions o;
        o.adaptive_coalescing = adaptive_coalescing;
        o.threads = threads;
        o.max_gap = max_gap;
        o.max_request = max_request;
        o.index_cache_bytes = index_cache_bytes;
        o.memory_limit = memory_limit;
        const auto read = NodeFilesFrom(files);
        auto r = WithoutGil([&] { return lsio::Array::Open(store->store(), store->Location(""), o, read ? &*read : nullptr); });
        return Value(std::move(r));
      },
      py::arg("store"), py::arg("threads") = 0, py::arg("max_gap") = 1 << 20, py::arg("max_request") = 16 << 20,
      py::arg("index_cache_bytes") = 64 << 20, py::arg("memory_limit") = 0,
      py::arg("adaptive_coalescing") = false, py::arg("files") = py::none());
}

py::dict ArrayStats(const lsio::Array& a) { return CountersDict(a.Stats()); }

}  // namespace lsio_py
