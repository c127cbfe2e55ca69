// HttpStore (see http_store.h): URLs, signing, and RangeRead <-> HttpRequest.
#include "store/http_store.h"

#include <cerrno>
#include <ctime>
#include <utility>

#include "net/sigv4.h"

namespace lsio {
namespace {

bool HasControl(std::string_view s) {
  for (char c : s) {
    if (c == '\r' || c == '\n' || c == '\0') return true;
  }
  return false;
}

// A remote object within one read call: its URL; size and version arrive with the first read.
class HttpObject final : public StoreObject {
 public:
  explicit HttpObject(std::string k) : key(std::move(k)) {}
  std::string key;
};

// What a finished request taught about its object, and whether it contradicts what was
// known (a version that changed under a pinned read).
Status Learn(const HttpRequest& q, StoreObject* obj, bool pinned) {
  if (!q.etag.empty()) {
    if (obj->version.empty()) {
      obj->version = q.etag;
    } else if (pinned && q.etag != obj->version) {
      // The server ignored If-Match (or sent no ETag before): never mix versions.
      return Status::IoError("object changed since its index was read (ETag " + obj->version + ", now " + q.etag + ")",
                             ESTALE);
    }
  }
  if (q.object_size_known) {
    if (!obj->size_known) {
      obj->size = q.object_size;
      obj->size_known = true;
    } else if (pinned && q.object_size != obj->size) {
      return Status::IoError("object changed since its index was read (size " + std::to_string(obj->size) + ", now " +
                                 std::to_string(q.object_size) + ")",
                             ESTALE);
    }
  }
  return Status::Ok();
}

}  // namespace

HttpStore::HttpStore(HttpStoreConfig config)
    : config_(std::move(config)), credentials_(std::make_shared<const HttpCredentials>(config_.credentials)) {
  config_.credentials = HttpCredentials{};  // the live copy is credentials_
  while (!config_.root.empty() && config_.root.back() == '/') config_.root.pop_back();
  while (!config_.display_root.empty() && config_.display_root.back() == '/') config_.display_root.pop_back();
}

Status HttpStore::Check() const {
  if (config_.scheme != "http" && config_.scheme != "https") {
    return Status::InvalidArgument("URL scheme must be http or https, got '" + config_.scheme + "'");
  }
  if (config_.host.empty() || HasControl(config_.host) || config_.host.find('/') != std::string::npos) {
    return Status::InvalidArgument("invalid host '" + config_.host + "'");
  }
  if (!config_.root.empty() && config_.root.front() != '/') {
    return Status::InvalidArgument("store root must start with '/'");
  }
  if (HasControl(config_.root)) return Status::InvalidArgument("store root contains control characters");
  for (const auto& [name, value] : config_.headers) {
    if (name.empty() || HasControl(name) || HasControl(value) || name.find(':') != std::string::npos) {
      return Status::InvalidArgument("invalid HTTP header '" + RedactSecrets(name) + "'");
    }
  }
  if (config_.signing == HttpSigning::kSigV4) {
    auto c = Credentials();
    if (c->access_key_id.empty() || c->secret_access_key.empty()) {
      return Status::InvalidArgument("SigV4 signing needs an access key id and a secret access key");
    }
  }
  if (config_.signing == HttpSigning::kBearer && Credentials()->token.empty()) {
    return Status::InvalidArgument("bearer signing needs a token");
  }
  return Status::Ok();
}

std::shared_ptr<const HttpCredentials> HttpStore::Credentials() const {
  std::lock_guard<std::mutex> lock(mu_);
  return credentials_;
}

void HttpStore::SetCredentials(HttpCredentials credentials) {
  auto next = std::make_shared<const HttpCredentials>(std::move(credentials));
  std::lock_guard<std::mutex> lock(mu_);
  credentials_ = std::move(next);
}

std::string HttpStore::Location(std::string_view key) const {
  std::string s = config_.display_root;
  s += '/';
  s.append(key);
  return s;
}

std::string HttpStore::Url(std::string_view key) const {
  std::string path = config_.root;
  path += '/';
  path.append(key);
  return config_.scheme + "://" + config_.host + UriEncode(path, /*keep_slash=*/true);
}

void HttpStore::Prepare(std::string_view key, HttpRequest* r, const std::shared_ptr<const HttpCredentials>& creds) const {
  r->url = Url(key);
  r->headers = config_.headers;
  switch (config_.signing) {
    case HttpSigning::kNone:
      break;
    case HttpSigning::kBearer:
      r->headers.emplace_back("Authorization", "Bearer " + creds->token);
      break;
    case HttpSigning::kSigV4: {
      std::string path = config_.root;
      path += '/';
      path.append(key);
      // Signed per attempt: x-amz-date must be current when a retry goes out minutes later.
      r->sign = [this, creds, path](const HttpRequest& req, std::vector<std::pair<std::string, std::string>>* headers) {
        SigV4Request s;
        s.method = req.method;
        s.host = config_.host;
        s.path = path;
        s.headers = *headers;
        s.payload_hash = std::string(kUnsignedPayload);
        SigV4Credentials c{creds->access_key_id, creds->secret_access_key, creds->session_token};
        SigV4Scope scope{config_.region, config_.service, SigV4Style::kS3};
        LSIO_ASSIGN_OR_RETURN(SigV4Signature sig, SignV4(s, c, scope, static_cast<int64_t>(std::time(nullptr))));
        for (auto& h : sig.headers) headers->push_back(std::move(h));
        return Status::Ok();
      };
      break;
    }
  }
}

void HttpStore::Count(const HttpRequest& r, bool failed) {
  StoreStats& st = stats();
  st.requests.fetch_add(r.attempts, std::memory_order_relaxed);
  if (r.attempts > 1) st.retries.fetch_add(r.attempts - 1, std::memory_order_relaxed);
  st.bytes_fetched.fetch_add(r.transferred, std::memory_order_relaxed);
  if (failed) st.errors.fetch_add(1, std::memory_order_relaxed);
}

StoreTraits HttpStore::traits() {
  StoreTraits t;
  t.remote = true;
  t.one_at_a_time = false;
  // No descriptors are held per object; the bound is memory for unsharded arrays, whose
  // chunks are fetched whole while resolving (one wave's worth at a time).
  t.open_budget = 1024;
  t.max_in_flight = std::max(1u, config_.client.max_in_flight);
  return t;
}

Result<ObjectRef> HttpStore::Open(std::string_view key) {
  LSIO_RETURN_IF_ERROR(ValidateKey(key));
  return ObjectRef(std::make_shared<HttpObject>(std::string(key)));
}

Result<ObjectInfo> HttpStore::Stat(std::string_view key) {
  LSIO_RETURN_IF_ERROR(ValidateKey(key));
  LSIO_ASSIGN_OR_RETURN(HttpClient * client, ProcessHttpClient());
  HttpRequest q;
  Prepare(key, &q, Credentials());
  q.method = "HEAD";
  client->Run(std::span<HttpRequest>(&q, 1), config_.client, [](size_t) {});
  Count(q, !q.status.ok());
  ObjectInfo info;
  if (!q.status.ok()) return Status(q.status).WithPath(Location(key));
  if (q.missing) return info;
  info.found = true;
  info.size = q.object_size;
  info.version = q.etag;
  return info;
}

Result<std::optional<std::string>> HttpStore::ReadAll(std::string_view key, uint64_t max_bytes) {
  LSIO_RETURN_IF_ERROR(ValidateKey(key));
  LSIO_ASSIGN_OR_RETURN(HttpClient * client, ProcessHttpClient());
  HttpRequest q;
  Prepare(key, &q, Credentials());
  client->Run(std::span<HttpRequest>(&q, 1), config_.client, [](size_t) {});
  Count(q, !q.status.ok());
  if (!q.status.ok()) return Status(q.status).WithPath(Location(key));
  if (q.missing) return std::optional<std::string>();
  if (q.body.size() > max_bytes) {
    return Status::InvalidFormat("object is larger than the limit of " + std::to_string(max_bytes) + " bytes")
        .WithPath(Location(key));
  }
  stats().bytes_used.fetch_add(q.body.size(), std::memory_order_relaxed);
  return std::optional<std::string>(std::move(q.body));
}

void HttpStore::Read(std::span<RangeRead> reads, const std::function<void(size_t)>& on_done,
                     const std::function<bool()>& cancelled) {
  auto client = ProcessHttpClient();
  if (!client.ok()) {
    for (size_t i = 0; i < reads.size(); ++i) {
      reads[i].status = client.status();
      on_done(i);
    }
    return;
  }
  const auto creds = Credentials();
  std::vector<HttpRequest> qs(reads.size());
  for (size_t i = 0; i < reads.size(); ++i) {
    const RangeRead& r = reads[i];
    HttpRequest& q = qs[i];
    Prepare(static_cast<const HttpObject&>(*r.object).key, &q, creds);
    switch (r.kind) {
      case ReadKind::kRange:
        q.range = RangeKind::kRange;
        q.offset = r.offset;
        q.length = r.length;
        q.dst = r.dst;
        break;
      case ReadKind::kSuffix:
        q.range = RangeKind::kSuffix;
        q.length = r.length;
        q.dst = r.dst;
        break;
      case ReadKind::kWhole:
        q.range = RangeKind::kNone;
        break;
    }
    if (r.pin_version && !r.object->version.empty()) q.if_match = r.object->version;
  }
  client.value()->Run(qs, config_.client, [&](size_t i) {
    RangeRead& r = reads[i];
    HttpRequest& q = qs[i];
    r.transferred = q.transferred;
    r.missing = false;
    if (!q.status.ok()) {
      r.status = q.status;
      if (q.precondition_failed) {
        // 412, or an answer with another ETag from a server that ignores If-Match.
        r.status = Status::IoError("object changed since its index was read (If-Match " + r.object->version +
                                       (q.http_status == 412 ? std::string(" failed: HTTP 412)")
                                                             : " ignored: HTTP " + std::to_string(q.http_status) +
                                                                   " with another ETag)"),
                                   ESTALE);
      }
    } else if (q.missing) {
      if (r.pin_version) {
        // Its index said the chunk is there: the object went away in between.
        r.status = Status::IoError("object disappeared since its index was read (HTTP " +
                                       std::to_string(q.http_status) + ")",
                                   ESTALE);
      } else {
        r.missing = true;
      }
    } else {
      r.status = Learn(q, r.object, r.pin_version);
      if (r.status.ok() && r.kind == ReadKind::kWhole) {
        r.body = std::move(q.body);
        r.transferred = r.body.size();
        if (!r.object->size_known) {
          r.object->size = r.body.size();
          r.object->size_known = true;
        }
      }
    }
    // Counted after the outcome is known: a pinned read that found its object gone (404)
    // or changed is a failed read although its request succeeded.
    Count(q, !r.status.ok());
    on_done(i);
  }, cancelled);
}

}  // namespace lsio
