// ObjectStore (see object_store.h): URLs, versions, and RangeRead <-> HttpRequest (signing:
// store/signers.cc; the provider's error vocabulary and listing pages: store/s3.cc ...).
#include "store/object_store.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <chrono>
#include <ctime>
#include <deque>
#include <unordered_map>
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

// A remote object within one read call: its URL; size and version arrive with the first read
// or from AdoptVersion.
class HttpObject final : public StoreObject {
 public:
  explicit HttpObject(std::string k) : key(std::move(k)) {}
  std::string key;
  // Whether the server confirmed `version` in this call. An adopted version (AdoptVersion)
  // starts unconfirmed; a pinned read that succeeds over the network confirms it, and so
  // does the conditional HEAD the store sends (kAsking) when it serves bytes from the disk
  // cache or when ConfirmServed finds the object still unconfirmed. kChanged: the object is
  // no longer that version (or the check failed): `changed` says why, written before the
  // state is stored (release) and read after it is loaded (acquire).
  enum State : int { kConfirmed = 0, kUnconfirmed = 1, kAsking = 2, kChanged = 3 };
  std::atomic<int> state{kConfirmed};
  Status changed;

  // Marks a pinned read's success as the server's confirmation.
  void Confirmed() {
    int expect = kUnconfirmed;
    state.compare_exchange_strong(expect, kConfirmed, std::memory_order_acq_rel);
  }
};

HttpObject& AsHttp(StoreObject& o) { return static_cast<HttpObject&>(o); }

// What a finished request taught about its object. Unpinned reads (resolving, on the calling
// thread) record size and version; pinned reads (workers, concurrently) only compare, so an
// object's fields are never written by two threads: a version that changed under a pinned
// read (a server that ignores If-Match, or a weak or Last-Modified validator, which is
// never sent as If-Match) fails instead of mixing versions.
Status Learn(const HttpRequest& q, StoreObject* obj, bool pinned) {
  const std::string version = ObjectStore::VersionOf(q);
  if (pinned) {
    if (!version.empty() && !obj->version.empty() && version != obj->version) {
      return Status::IoError("object changed since its index was read (version " + obj->version + ", now " + version +
                                 ")",
                             ESTALE);
    }
    if (q.object_size_known && obj->size_known && q.object_size != obj->size) {
      return Status::IoError("object changed since its index was read (size " + std::to_string(obj->size) + ", now " +
                                 std::to_string(q.object_size) + ")",
                             ESTALE);
    }
    return Status::Ok();
  }
  obj->version = version;
  AsHttp(*obj).state.store(HttpObject::kConfirmed, std::memory_order_relaxed);
  if (q.object_size_known) {
    obj->size = q.object_size;
    obj->size_known = true;
  }
  return Status::Ok();
}

}  // namespace

ObjectStore::ObjectStore(ObjectStoreConfig config)
    : config_(std::move(config)), credentials_(std::make_shared<const HttpCredentials>(config_.credentials)) {
  config_.credentials = HttpCredentials{};  // the live copy is credentials_
  if (config_.provider == nullptr) config_.provider = HttpProvider();
  if (config_.client.dialect == nullptr) config_.client.dialect = config_.provider->dialect;
  signer_ = MakeSigner(config_.signing, config_.host, config_.region, config_.service);
  while (!config_.root.empty() && config_.root.back() == '/') config_.root.pop_back();
  while (!config_.display_root.empty() && config_.display_root.back() == '/') config_.display_root.pop_back();
}

Status ObjectStore::Check() const {
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

std::shared_ptr<const HttpCredentials> ObjectStore::Credentials() const {
  std::lock_guard<std::mutex> lock(mu_);
  return credentials_;
}

void ObjectStore::SetCredentials(HttpCredentials credentials) {
  auto next = std::make_shared<const HttpCredentials>(std::move(credentials));
  std::lock_guard<std::mutex> lock(mu_);
  credentials_ = std::move(next);
}

std::string ObjectStore::Location(std::string_view key) const {
  std::string s = config_.display_root;
  s += '/';
  s.append(key);
  return s;
}

std::string ObjectStore::Url(std::string_view key) const {
  std::string path = config_.root;
  path += '/';
  path.append(key);
  return config_.scheme + "://" + config_.host + UriEncode(path, /*keep_slash=*/true);
}

void ObjectStore::Prepare(std::string_view key, HttpRequest* r, const std::shared_ptr<const HttpCredentials>& creds) const {
  std::string path = config_.root;
  path += '/';
  path.append(key);
  PrepareAt(std::move(path), {}, r, creds);
}

void ObjectStore::PrepareAt(std::string path, std::vector<std::pair<std::string, std::string>> query, HttpRequest* r,
                          const std::shared_ptr<const HttpCredentials>& creds) const {
  // The query in SigV4's canonical form (sorted, each part encoded once): the URL must carry
  // exactly the query that is signed.
  std::sort(query.begin(), query.end());
  std::string qs;
  for (const auto& [k, v] : query) qs += (qs.empty() ? "" : "&") + UriEncode(k, false) + "=" + UriEncode(v, false);
  r->url = config_.scheme + "://" + config_.host + UriEncode(path, /*keep_slash=*/true) + (qs.empty() ? "" : "?" + qs);
  r->headers = config_.headers;
  signer_->Sign(path, query, creds, r);
}

// A server may echo a credential back in an error body (a proxy quoting the Authorization
// header): mask this store's own secrets and header values in every status it returns.
Status ObjectStore::Scrub(Status st) const {
  if (st.ok()) return st;
  auto creds = Credentials();
  for (const std::string* s : {&creds->token, &creds->session_token, &creds->secret_access_key}) {
    if (!s->empty()) st.Redact(*s);
  }
  for (const auto& h : config_.headers) st.Redact(h.second);
  return st;
}

void ObjectStore::Count(const HttpRequest& r, bool failed) {
  StoreStats& st = stats();
  st.requests.fetch_add(r.attempts, std::memory_order_relaxed);
  if (r.attempts > 1) st.retries.fetch_add(r.attempts - 1, std::memory_order_relaxed);
  st.bytes_fetched.fetch_add(r.transferred, std::memory_order_relaxed);
  if (failed) st.errors.fetch_add(1, std::memory_order_relaxed);
}

namespace {
// One listing page (ListObjectsV2: at most 1000 keys of at most 1 KiB each, XML-escaped) is
// well under this; a larger answer is no listing page and is refused, not buffered.
constexpr uint64_t kListPageLimit = 16u << 20;
}  // namespace

Result<std::vector<std::string>> ObjectStore::ListChildren(std::string_view prefix) {
  const Lister* lister = config_.provider->lister.get();
  if (!config_.listable || lister == nullptr) {
    return Status::Unimplemented(std::string("this store cannot list its objects (") +
                                 (lister == nullptr ? config_.provider->name : "no listing endpoint") + ")")
        .WithPath(Location(prefix));
  }
  LSIO_ASSIGN_OR_RETURN(HttpClient * client, ProcessHttpClient());
  // Key prefix within the bucket: the root below the listing endpoint, then `prefix`.
  std::string key_prefix = config_.root.substr(std::min(config_.root.size(), config_.list_root.size()));
  while (!key_prefix.empty() && key_prefix.front() == '/') key_prefix.erase(0, 1);
  std::string rel(prefix);
  while (!rel.empty() && rel.back() == '/') rel.pop_back();
  if (!rel.empty()) key_prefix += (key_prefix.empty() ? "" : "/") + rel;
  if (!key_prefix.empty()) key_prefix += '/';
  const std::string path = config_.list_root.empty() ? "/" : config_.list_root;
  std::vector<std::string> names;
  std::string token;
  for (int page = 0; page < 100000; ++page) {
    HttpRequest q;
    PrepareAt(path, lister->PageQuery(key_prefix, token), &q, Credentials());
    q.max_body = kListPageLimit;
    client->Run(std::span<HttpRequest>(&q, 1), config_.client, [](size_t) {});
    Count(q, !q.status.ok());
    if (q.too_large) {
      return Status::DataLoss("listing answer is larger than " + std::to_string(kListPageLimit) +
                              " bytes, far more than a page of " + lister->name() + " holds")
          .WithPath(Location(rel));
    }
    if (!q.status.ok()) return Scrub(Status(q.status).ReplacePath(Location(rel)));
    if (q.missing) return Status::IoError("the bucket does not exist (HTTP 404 listing it)", ENOENT).WithPath(Location(rel));
    std::string next;
    Status page_status = lister->ParsePage(q.body, key_prefix, &names, &next);
    if (!page_status.ok()) return page_status.WithPath(Location(rel));
    if (next.empty()) break;
    if (next == token) {  // the same page again: a server that never ends the listing
      return Status::DataLoss("the listing repeats its continuation token; it would never end")
          .WithPath(Location(rel));
    }
    token = std::move(next);
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

StoreTraits ObjectStore::traits() {
  StoreTraits t;
  t.remote = true;
  t.one_at_a_time = false;
  // No descriptors are held per object; the bound is memory for unsharded arrays, whose
  // chunks are fetched whole while resolving (one wave's worth at a time).
  t.open_budget = 1024;
  t.max_in_flight = std::max(1u, config_.client.max_in_flight);
  return t;
}

std::string ObjectStore::VersionOf(const HttpRequest& q) {
  if (!q.etag.empty()) return q.etag;
  // No ETag: the modification date stands in (1 s granularity: a rewrite within the same
  // second that keeps the size goes unseen; docs/guide/remote.md says so).
  if (!q.last_modified.empty()) return "last-modified: " + q.last_modified;
  return std::string();
}

bool ObjectStore::IsEtag(const std::string& v) {
  return (v.size() >= 2 && v.front() == '"') || (v.size() >= 4 && v[0] == 'W' && v[1] == '/' && v[2] == '"');
}

bool ObjectStore::IsStrongEtag(const std::string& v) { return v.size() >= 2 && v.front() == '"' && v.back() == '"'; }

bool ObjectStore::AdoptVersion(StoreObject& obj, const std::string& version, uint64_t size) {
  if (version.empty()) return false;  // no validator: nothing would notice a rewrite
  HttpObject& h = AsHttp(obj);
  h.version = version;
  h.size = size;
  h.size_known = true;
  h.state.store(HttpObject::kUnconfirmed, std::memory_order_relaxed);
  if (config_.cache_max_age_s > 0 && IsStrongEtag(version)) {
    // cache_max_age: a version the server confirmed that recently needs no confirmation.
    const auto now = std::chrono::steady_clock::now();
    std::lock_guard<std::mutex> lock(mu_);
    const auto it = confirmed_.find(h.key);
    if (it != confirmed_.end() && it->second.version == version &&
        now - it->second.at <= std::chrono::duration<double>(config_.cache_max_age_s)) {
      h.state.store(HttpObject::kConfirmed, std::memory_order_relaxed);
    }
  }
  return true;
}

void ObjectStore::NoteConfirmed(const std::string& key, const std::string& version) {
  if (!(config_.cache_max_age_s > 0) || !IsStrongEtag(version)) return;
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(mu_);
  if (confirmed_.size() >= kMaxConfirmed) confirmed_.clear();  // bounded: forgetting costs a request
  confirmed_[key] = Confirmation{version, now};
}

void ObjectStore::PrepareConfirm(StoreObject& obj, HttpRequest* q,
                               const std::shared_ptr<const HttpCredentials>& creds) const {
  Prepare(AsHttp(obj).key, q, creds);
  q->method = "HEAD";
  // 304 when unchanged (weak comparison: weak ETags confirm too); an answer without an
  // ETag is compared by its Last-Modified and size.
  if (IsEtag(obj.version)) q->if_none_match = obj.version;
}

void ObjectStore::FinishConfirm(StoreObject& obj, const HttpRequest& q) {
  HttpObject& h = AsHttp(obj);
  Count(q, !q.status.ok());
  Status st;
  if (!q.status.ok()) {
    st = Scrub(Status(q.status).ReplacePath(Location(h.key)));
  } else if (q.missing) {
    st = Status::IoError("object disappeared since its index was read (HTTP " + std::to_string(q.http_status) + ")",
                         ESTALE)
             .WithPath(Location(h.key));
  } else if (!q.not_modified) {
    const std::string now = VersionOf(q);
    if (now != h.version || (q.object_size_known && q.object_size != h.size)) {
      st = Status::IoError("object changed since its index was read (version " + h.version + ", now " +
                               (now.empty() ? std::string("unknown") : now) + ", " +
                               std::to_string(q.object_size) + " bytes)",
                           ESTALE)
               .WithPath(Location(h.key));
    }
  }
  if (st.ok()) {
    NoteConfirmed(h.key, h.version);
    h.state.store(HttpObject::kConfirmed, std::memory_order_release);
  } else {
    h.changed = std::move(st);
    h.state.store(HttpObject::kChanged, std::memory_order_release);
  }
}

Status ObjectStore::ConfirmServed(std::span<const ObjectRef> objects, const std::function<bool()>& cancelled) {
  std::vector<StoreObject*> ask;
  for (const ObjectRef& o : objects) {
    if (o == nullptr) continue;
    int expect = HttpObject::kUnconfirmed;
    if (AsHttp(*o).state.compare_exchange_strong(expect, HttpObject::kAsking, std::memory_order_acq_rel)) {
      ask.push_back(o.get());
    }
  }
  if (!ask.empty()) {
    auto client = ProcessHttpClient();
    if (!client.ok()) return client.status();
    const auto creds = Credentials();
    std::vector<HttpRequest> qs(ask.size());
    for (size_t i = 0; i < ask.size(); ++i) PrepareConfirm(*ask[i], &qs[i], creds);
    client.value()->Run(qs, config_.client, [&](size_t i) { FinishConfirm(*ask[i], qs[i]); }, cancelled);
  }
  for (const ObjectRef& o : objects) {
    if (o == nullptr) continue;
    HttpObject& h = AsHttp(*o);
    const int st = h.state.load(std::memory_order_acquire);
    if (st == HttpObject::kChanged) return h.changed;
    if (st != HttpObject::kConfirmed) {
      return Status::Internal("the version of an object served from a cache was never confirmed")
          .WithPath(Location(h.key));
    }
  }
  return Status::Ok();
}

Result<ObjectRef> ObjectStore::Open(std::string_view key) {
  LSIO_RETURN_IF_ERROR(ValidateKey(key));
  return ObjectRef(std::make_shared<HttpObject>(std::string(key)));
}

Result<ObjectInfo> ObjectStore::Stat(std::string_view key) {
  LSIO_RETURN_IF_ERROR(ValidateKey(key));
  LSIO_ASSIGN_OR_RETURN(HttpClient * client, ProcessHttpClient());
  HttpRequest q;
  Prepare(key, &q, Credentials());
  q.method = "HEAD";
  client->Run(std::span<HttpRequest>(&q, 1), config_.client, [](size_t) {});
  Count(q, !q.status.ok());
  ObjectInfo info;
  if (!q.status.ok()) return Scrub(Status(q.status).ReplacePath(Location(key)));
  if (q.missing) return info;
  if (!q.object_size_known) {
    return Status::IoError("the server's answer to HEAD has no Content-Length: lsio cannot size the object", EPROTO)
        .WithPath(Location(key));
  }
  info.found = true;
  info.size = q.object_size;
  // What range reads pin and compare: the ETag, else the Last-Modified date (a server
  // without ETags still says when an object changed).
  info.version = VersionOf(q);
  info.last_modified = q.last_modified;
  return info;
}

Result<std::optional<std::string>> ObjectStore::ReadAll(std::string_view key, uint64_t max_bytes) {
  LSIO_RETURN_IF_ERROR(ValidateKey(key));
  LSIO_ASSIGN_OR_RETURN(HttpClient * client, ProcessHttpClient());
  HttpRequest q;
  Prepare(key, &q, Credentials());
  // Refused from its Content-Length (or as the body grows), never buffered whole first.
  q.max_body = std::max<uint64_t>(max_bytes, 1);
  client->Run(std::span<HttpRequest>(&q, 1), config_.client, [](size_t) {});
  Count(q, !q.status.ok());
  if (q.too_large) {
    return Status::InvalidFormat("object is larger than the limit of " + std::to_string(max_bytes) + " bytes")
        .WithPath(Location(key));
  }
  if (!q.status.ok()) return Scrub(Status(q.status).ReplacePath(Location(key)));
  if (q.missing) return std::optional<std::string>();
  if (q.body.size() > max_bytes) {
    return Status::InvalidFormat("object is larger than the limit of " + std::to_string(max_bytes) + " bytes")
        .WithPath(Location(key));
  }
  stats().bytes_used.fetch_add(q.body.size(), std::memory_order_relaxed);
  return std::optional<std::string>(std::move(q.body));
}

void ObjectStore::PrepareRead(const RangeRead& r, HttpRequest* q,
                            const std::shared_ptr<const HttpCredentials>& creds) const {
  Prepare(static_cast<const HttpObject&>(*r.object).key, q, creds);
  switch (r.kind) {
    case ReadKind::kRange:
      q->range = RangeKind::kRange;
      q->offset = r.offset;
      q->length = r.length;
      q->dst = r.dst;
      break;
    case ReadKind::kSuffix:
      q->range = RangeKind::kSuffix;
      q->length = r.length;
      q->dst = r.dst;
      break;
    case ReadKind::kWhole:
      q->range = RangeKind::kNone;
      q->max_body = r.max_length;
      break;
  }
  // If-Match compares strongly: a weak ETag or a Last-Modified version is checked against
  // the answer instead (Learn), never sent (a conforming server would answer 412 forever).
  if (r.pin_version && IsStrongEtag(r.object->version)) q->if_match = r.object->version;
}

void ObjectStore::Complete(RangeRead& r, HttpRequest& q) {
  r.first_byte_s = q.status.ok() ? q.first_byte_s : 0;
  r.total_s = q.status.ok() ? q.total_s : 0;
  r.transferred = q.transferred;
  r.missing = false;
  if (!q.status.ok()) {
    // Named by the user's URL (the executor adds the same Location), not the endpoint's.
    r.status = Scrub(Status(q.status).ReplacePath(Location(static_cast<const HttpObject&>(*r.object).key)));
    if (q.precondition_failed) {
      // 412, or an answer with another ETag from a server that ignores If-Match. The
      // client's own words follow: the server's code and message, the request id.
      r.status = Scrub(Status::IoError("object changed since its index was read (If-Match " + r.object->version +
                                           (q.http_status == 412 ? std::string(" failed: HTTP 412)")
                                                                 : " ignored: HTTP " + std::to_string(q.http_status) +
                                                                       " with another ETag)") +
                                           ": " + q.status.message(),
                                       ESTALE));
    } else if (q.too_large) {
      r.too_large = true;
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
    if (r.status.ok()) {
      // The server answered for this version (If-Match, or the validator compared equal).
      if (r.pin_version && VersionOf(q) == r.object->version) AsHttp(*r.object).Confirmed();
      NoteConfirmed(AsHttp(*r.object).key, r.object->version);
    }
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
}

void ObjectStore::Read(std::span<RangeRead> reads, const std::function<void(size_t)>& on_done,
                     const std::function<bool()>& cancelled) {
  auto client = ProcessHttpClient();
  if (!client.ok()) {
    for (size_t i = 0; i < reads.size(); ++i) {
      reads[i].status = client.status();
      on_done(i);
    }
    return;
  }
  if (!config_.provider->suffix_ranges &&
      std::any_of(reads.begin(), reads.end(), [](const RangeRead& r) { return r.kind == ReadKind::kSuffix; })) {
    // A HEAD goes before each suffix read: ReadStream chains the two.
    size_t at = 0;
    ReadStream([&]() -> RangeRead* { return at < reads.size() ? &reads[at++] : nullptr; },
               [&](RangeRead& r) { on_done(static_cast<size_t>(&r - reads.data())); }, cancelled);
    return;
  }
  const auto creds = Credentials();
  std::vector<HttpRequest> qs(reads.size());
  for (size_t k = 0; k < reads.size(); ++k) PrepareRead(reads[k], &qs[k], creds);
  client.value()->Run(qs, config_.client, [&](size_t k) {
    Complete(reads[k], qs[k]);
    on_done(k);
  }, cancelled);
}

bool ObjectStore::SuffixAsRange(RangeRead& r, const HttpRequest& q) {
  const std::string& key = AsHttp(*r.object).key;
  Count(q, !q.status.ok());
  r.transferred = 0;
  r.missing = false;
  if (!q.status.ok()) {
    r.status = Scrub(Status(q.status).ReplacePath(Location(key)));
    return false;
  }
  if (q.missing) {  // as a 404 to the suffix read itself
    r.missing = true;
    return false;
  }
  if (!q.object_size_known) {
    r.status = Status::IoError("the object's size is unknown (its HEAD answer has no Content-Length)", EPROTO)
                   .WithPath(Location(key));
    return false;
  }
  r.status = Learn(q, r.object, /*pinned=*/false);
  const uint64_t n = std::min(r.length, r.object->size);
  if (!r.status.ok() || n == 0) return false;  // an empty object: nothing to read
  // The suffix's bytes as a plain range, pinned to the version the HEAD saw: the object
  // cannot change between the two requests unnoticed.
  r.kind = ReadKind::kRange;
  r.offset = r.object->size - n;
  r.length = n;
  r.pin_version = true;
  return true;
}

bool ObjectStore::TakeConfirmation(StoreObject& obj) {
  int expect = HttpObject::kUnconfirmed;
  return AsHttp(obj).state.compare_exchange_strong(expect, HttpObject::kAsking, std::memory_order_acq_rel);
}

std::string ObjectStore::Identity(const StoreObject& obj) const {
  // The endpoint's URL, not the user's: two endpoints may show the same s3:// URL.
  return config_.scheme + "://" + config_.host + config_.root + "/" + AsHttp(const_cast<StoreObject&>(obj)).key;
}

bool ObjectStore::VersionIdentifiesBytes(const StoreObject& obj) const {
  // A weak ETag or a Last-Modified date does not say the bytes are the same.
  return IsStrongEtag(obj.version) &&
         AsHttp(const_cast<StoreObject&>(obj)).state.load(std::memory_order_acquire) != HttpObject::kChanged;
}

void ObjectStore::ReadStream(const std::function<RangeRead*()>& next, const std::function<void(RangeRead&)>& on_done,
                           const std::function<bool()>& cancelled, std::span<const ObjectRef> confirm) {
  auto client = ProcessHttpClient();
  if (!client.ok()) {
    while (RangeRead* r = next()) {
      r->status = client.status();
      on_done(*r);
    }
    return;
  }
  const auto creds = Credentials();
  // One request per read in flight, reused as reads finish (a deque: the client holds
  // their addresses while they run).
  std::deque<HttpRequest> requests;
  std::unordered_map<const HttpRequest*, StoreObject*> confirming;  // HEADs confirming a version
  // A provider without suffix ranges: HEADs learning the size for a suffix read, and those
  // reads once sized (plain ranges now, sent before the caller's next read).
  std::unordered_map<const HttpRequest*, RangeRead*> sizing;
  std::deque<RangeRead*> sized;
  const bool suffix_ranges = config_.provider->suffix_ranges;
  std::vector<HttpRequest*> free;
  auto take_slot = [&]() {
    HttpRequest* q;
    if (!free.empty()) {
      q = free.back();
      free.pop_back();
      *q = HttpRequest();
    } else {
      q = &requests.emplace_back();
    }
    return q;
  };
  // Adopted versions the caller wants confirmed (a disk cache above serves them) go out
  // first thing, and are on the wire (kSendNow) before next() runs: a caching store serves
  // its blocks inside next(), and the HEADs run meanwhile, so a warm call costs at most one
  // round trip, not one after its last disk read (W7 warm call: 77.7 -> 32.4 ms median).
  size_t confirm_at = 0;
  bool sent_confirmations = true;
  client.value()->RunStream(
      [&]() -> HttpRequest* {
        while (confirm_at < confirm.size()) {
          StoreObject* obj = confirm[confirm_at++].get();
          if (obj != nullptr && TakeConfirmation(*obj)) {
            HttpRequest* q = take_slot();
            PrepareConfirm(*obj, q, creds);
            confirming[q] = obj;
            sent_confirmations = false;
            return q;
          }
        }
        if (!sent_confirmations) {
          sent_confirmations = true;
          return HttpClient::kSendNow;
        }
        RangeRead* r;
        if (!sized.empty()) {
          r = sized.front();
          sized.pop_front();
        } else {
          r = next();
          if (r == nullptr) return nullptr;
        }
        HttpRequest* q = take_slot();
        if (r->kind == ReadKind::kSuffix && !suffix_ranges) {
          Prepare(AsHttp(*r->object).key, q, creds);
          q->method = "HEAD";
          sizing[q] = r;
          return q;
        }
        PrepareRead(*r, q, creds);
        q->user = r;
        return q;
      },
      config_.client,
      [&](HttpRequest& q) {
        if (auto it = confirming.find(&q); it != confirming.end()) {
          FinishConfirm(*it->second, q);
          confirming.erase(it);
          free.push_back(&q);
          return;
        }
        if (auto it = sizing.find(&q); it != sizing.end()) {
          RangeRead& r = *it->second;
          sizing.erase(it);
          const bool ranged = SuffixAsRange(r, q);
          free.push_back(&q);
          if (ranged) sized.push_back(&r);
          else on_done(r);
          return;
        }
        RangeRead& r = *static_cast<RangeRead*>(q.user);
        Complete(r, q);
        free.push_back(&q);
        on_done(r);
      },
      cancelled);
}

}  // namespace lsio
