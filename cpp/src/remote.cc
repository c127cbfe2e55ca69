// The facade of remote stores (lsio/remote.h) over store/object_store, wrapped in the disk
// cache (store/disk_cache_store.h) when cache_dir is given.
#include "lsio/remote.h"

#include <cmath>
#include <string>
#include <span>
#include <cerrno>

#include "store/disk_cache_store.h"
#include "store/object_store.h"

namespace lsio {

struct RemoteStore::Impl {
  RemoteOptions options;  // credentials blanked; the live ones are in the ObjectStore
  std::shared_ptr<ObjectStore> http;
  std::shared_ptr<Store> store;  // what arrays read through: http, or the disk cache over it
};

namespace {

uint64_t Millis(double seconds) {
  if (!(seconds > 0)) return 0;
  return static_cast<uint64_t>(std::llround(std::min(seconds, 1e9) * 1000.0));
}

Result<ObjectStoreConfig> ToConfig(const RemoteOptions& o) {
  ObjectStoreConfig c;
  c.scheme = o.scheme;
  c.host = o.host;
  c.root = o.root;
  c.display_root = o.display_root.empty() ? o.scheme + "://" + o.host + o.root : o.display_root;
  if (o.signing == "none") c.signing = HttpSigning::kNone;
  else if (o.signing == "sigv4") c.signing = HttpSigning::kSigV4;
  else if (o.signing == "bearer") c.signing = HttpSigning::kBearer;
  else return Status::InvalidArgument("signing must be 'none', 'sigv4' or 'bearer', got '" + o.signing + "'");
  if (o.provider == "s3" || (o.provider.empty() && (c.signing == HttpSigning::kSigV4 || o.listable))) {
    c.provider = ProviderOf(ObjectProvider::kS3);
  } else if (o.provider == "gcs" || o.provider == "gs") {
    c.provider = ProviderOf(ObjectProvider::kGcs);
  } else if (o.provider == "http" || o.provider.empty()) {
    c.provider = ProviderOf(ObjectProvider::kHttp);
  } else {
    return Status::InvalidArgument("provider must be 's3', 'gcs' or 'http', got '" + o.provider + "'");
  }
  c.region = o.region;
  c.service = o.service;
  c.credentials = HttpCredentials{o.access_key_id, o.secret_access_key, o.session_token, o.token};
  c.headers = o.headers;
  if (o.request_concurrency < 1 || o.request_concurrency > 4096) {
    return Status::InvalidArgument("request_concurrency must be in 1..4096");
  }
  if (!(o.timeout_s > 0) || !(o.connect_timeout_s > 0) || !(o.total_timeout_s > 0)) {
    return Status::InvalidArgument("timeouts must be > 0 seconds");
  }
  if (o.retries > 100) return Status::InvalidArgument("retries must be in 0..100");
  c.client.max_in_flight = o.request_concurrency;
  c.client.timeout_ms = Millis(o.timeout_s);
  c.client.connect_timeout_ms = Millis(o.connect_timeout_s);
  c.client.stall_timeout_ms = std::min(c.client.timeout_ms, c.client.stall_timeout_ms);
  c.client.max_attempts = o.retries + 1;
  c.client.total_timeout_ms = Millis(o.total_timeout_s);
  c.client.verify_ssl = o.verify_ssl;
  c.client.ca_file = o.ca_file;
  c.listable = o.listable;
  c.list_root = o.list_root;
  if (!o.cache_dir.empty()) {
    if (o.cache_bytes == 0) return Status::InvalidArgument("cache_dir needs cache_bytes > 0");
    if (!(o.cache_max_age_s >= 0)) return Status::InvalidArgument("cache_max_age must be >= 0 seconds");
    c.cache_max_age_s = o.cache_max_age_s;
  }
  return c;
}

// The store arrays read through: the HTTP store, wrapped in the disk cache if one is asked for.
Result<std::shared_ptr<Store>> ReadingStore(const RemoteOptions& o, const std::shared_ptr<ObjectStore>& http) {
  if (o.cache_dir.empty()) return std::shared_ptr<Store>(http);
  LSIO_ASSIGN_OR_RETURN(std::shared_ptr<DiskCache> cache, SharedDiskCache(o.cache_dir, o.cache_bytes));
  return std::shared_ptr<Store>(std::make_shared<DiskCacheStore>(http, std::move(cache)));
}

}  // namespace

RemoteStore::RemoteStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
RemoteStore::~RemoteStore() = default;

Result<std::shared_ptr<RemoteStore>> RemoteStore::Create(const RemoteOptions& options) {
  LSIO_ASSIGN_OR_RETURN(ObjectStoreConfig config, ToConfig(options));
  auto http = std::make_shared<ObjectStore>(std::move(config));
  LSIO_RETURN_IF_ERROR(http->Check());
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->options.access_key_id.clear();
  impl->options.secret_access_key.clear();
  impl->options.session_token.clear();
  impl->options.token.clear();
  LSIO_ASSIGN_OR_RETURN(impl->store, ReadingStore(options, http));
  impl->http = std::move(http);
  return std::shared_ptr<RemoteStore>(new RemoteStore(std::move(impl)));
}

Result<std::shared_ptr<RemoteStore>> RemoteStore::Sub(const std::string& path) const {
  std::string clean;
  size_t begin = 0;
  while (begin <= path.size()) {
    size_t end = path.find('/', begin);
    if (end == std::string::npos) end = path.size();
    const std::string seg = path.substr(begin, end - begin);
    if (seg == "..") return Status::InvalidArgument("path must not contain '..': '" + path + "'");
    if (!seg.empty() && seg != ".") clean += "/" + seg;
    begin = end + 1;
  }
  RemoteOptions o = impl_->options;
  o.root += clean;
  o.display_root = impl_->http->config().display_root + clean;
  LSIO_ASSIGN_OR_RETURN(ObjectStoreConfig config, ToConfig(o));
  auto http = std::make_shared<ObjectStore>(std::move(config));
  http->SetCredentials(impl_->http->CurrentCredentials());
  auto impl = std::make_unique<Impl>();
  impl->options = o;
  LSIO_ASSIGN_OR_RETURN(impl->store, ReadingStore(o, http));
  impl->http = std::move(http);
  return std::shared_ptr<RemoteStore>(new RemoteStore(std::move(impl)));
}

Result<std::optional<std::string>> RemoteStore::Get(const std::string& key, uint64_t max_bytes) {
  return impl_->http->ReadAll(key, max_bytes);
}

Result<bool> RemoteStore::Exists(const std::string& key) {
  LSIO_ASSIGN_OR_RETURN(ObjectInfo info, impl_->http->Stat(key));
  return info.found;
}

Result<std::optional<std::pair<uint64_t, std::string>>> RemoteStore::Stat(const std::string& key) {
  LSIO_ASSIGN_OR_RETURN(ObjectInfo info, impl_->http->Stat(key));
  if (!info.found) return std::optional<std::pair<uint64_t, std::string>>();
  return std::optional<std::pair<uint64_t, std::string>>(std::make_pair(info.size, info.version));
}

Result<std::optional<RemoteStore::Head>> RemoteStore::StatHead(const std::string& key) {
  LSIO_ASSIGN_OR_RETURN(ObjectInfo info, impl_->http->Stat(key));
  if (!info.found) return std::optional<Head>();
  return std::optional<Head>(Head{info.size, info.version, info.last_modified});
}

Result<std::vector<std::string>> RemoteStore::ReadRanges(const std::string& key,
                                                         const std::vector<std::pair<uint64_t, uint64_t>>& ranges,
                                                         const std::string& version, uint64_t size) {
  ObjectStore& http = *impl_->http;
  LSIO_ASSIGN_OR_RETURN(ObjectRef obj, http.Open(key));
  std::vector<std::string> out(ranges.size());
  std::vector<RangeRead> reads;
  reads.reserve(ranges.size());
  const bool pin = !version.empty() && http.AdoptVersion(*obj, version, size);
  for (size_t i = 0; i < ranges.size(); ++i) {
    out[i].resize(static_cast<size_t>(ranges[i].second));
    if (ranges[i].second == 0) continue;
    RangeRead r;
    r.object = obj.get();
    r.kind = ReadKind::kRange;
    r.offset = ranges[i].first;
    r.length = ranges[i].second;
    r.dst = reinterpret_cast<uint8_t*>(out[i].data());
    r.pin_version = pin;
    reads.push_back(r);
  }
  if (!reads.empty()) http.Read(std::span<RangeRead>(reads.data(), reads.size()), [](size_t) {});
  for (const RangeRead& r : reads) {
    if (!r.status.ok()) return Status(r.status).WithPath(http.Location(key)).WithRange(r.offset, r.length);
    if (r.missing) return Status::IoError("no such object", ENOENT).WithPath(http.Location(key));
    if (r.transferred != r.length) {
      return Status::IoError("object ends before the range", EIO).WithPath(http.Location(key)).WithRange(r.offset, r.length);
    }
  }
  return out;
}

Result<std::string> RemoteStore::ReadRange(const std::string& key, uint64_t offset, uint64_t length,
                                           const std::string& version, uint64_t size) {
  LSIO_ASSIGN_OR_RETURN(std::vector<std::string> one, ReadRanges(key, {{offset, length}}, version, size));
  return std::move(one[0]);
}

Result<std::vector<std::string>> RemoteStore::ListChildren(const std::string& prefix) {
  return impl_->http->ListChildren(prefix);
}

void RemoteStore::SetCredentials(const std::string& access_key_id, const std::string& secret_access_key,
                                 const std::string& session_token, const std::string& token) {
  impl_->http->SetCredentials(HttpCredentials{access_key_id, secret_access_key, session_token, token});
}

StoreCounters RemoteStore::Counters() const {
  return Snapshot(impl_->http->stats());
}

const RemoteOptions& RemoteStore::options() const { return impl_->options; }
std::string RemoteStore::Location(const std::string& key) const {
  return key.empty() ? impl_->http->config().display_root : impl_->http->Location(key);
}
std::shared_ptr<Store> RemoteStore::store() const { return impl_->store; }

}  // namespace lsio
