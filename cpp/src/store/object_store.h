// ObjectStore: the Store over HTTP(S) objects: plain servers with Range support, S3 and
// S3-compatible stores (SigV4), GCS through its XML API (HMAC keys, a bearer token, or
// anonymous). One class, because the three differ only in URL layout and signing.
//
// Usage:
//   1. ObjectStoreConfig c;                      // normally built from python/lsio/_storage.py
//      c.scheme = "https"; c.host = "bucket.s3.us-west-2.amazonaws.com"; c.root = "/era5.zarr/t2m";
//      c.signing = HttpSigning::kSigV4; c.region = "us-west-2"; c.credentials = {...};
//      c.display_root = "s3://bucket/era5.zarr/t2m";
//   2. auto store = std::make_shared<ObjectStore>(c);
//      Array::Open(store, c.display_root, options);   // metadata and chunks through it
//   3. store->SetCredentials(...) when a credentials callable refreshed them (any thread).
//   4. store->stats() counts requests, bytes fetched and retries (Array::stats in Python).
//
// Objects: key "c/0/1" is the URL scheme://host + encode(root + "/" + key), each path
// segment percent-encoded once (RFC 3986 unreserved kept), which is also the path SigV4
// signs (kS3 style). Open() does no I/O: a remote object's size and version come with the
// first read (a suffix range for a shard index). A 404/410 is "missing" (fill values, or
// "no zarr.json" at open); 401/403 fail with EACCES naming the URL. Stat is a HEAD; ReadAll
// a GET of the whole object, refused from its Content-Length above max_bytes (or as a body
// without one passes it), never buffered whole first; whole-object chunk reads
// (RangeRead::max_length) and listing pages are bounded the same way.
//
// Versions (VersionOf): the answer's ETag, strong or weak, else "last-modified: <date>",
// else none. Pinned reads send If-Match only with a strong ETag (If-Match compares strongly:
// a weak tag there would fail on every conforming server); every pinned answer's version
// and size are compared with the object's as well, so a weak ETag, a date or a server that
// ignores If-Match still fail with kIoError (ESTALE) "changed since its index was read"
// instead of mixing versions; a 412 keeps the server's code, message and request id.
// AdoptVersion takes any non-empty remembered version (none: the caller reads the index
// again, the only way to see a rewrite); an adopted version starts unconfirmed. A pinned
// read that succeeds over the network confirms it; disk-cache blocks of it are served only
// with a conditional HEAD (If-None-Match) in flight, sent at the start of the stream
// (ReadStream's `confirm`) so that it overlaps the disk reads; ConfirmServed asks for those
// still unconfirmed at the end of a wave and fails the call with ESTALE for any that changed.
// cache_max_age_s lets a confirmation seen within that many seconds stand instead.
//
// Request timings: each range read's answer reports its first-byte and total seconds
// (RangeRead::first_byte_s / total_s) for the read layer's coalescing tuner
// (read/coalescing_tuner.h); the store itself keeps no estimate.
//
// Errors name Location(key): display_root + "/" + key (e.g. "s3://bucket/x.zarr/c/0"), never
// a signature, token or secret; the HTTP client's messages add the status and request id.
//
// Thread-safety: every method may run on any thread at once. Fork: the store holds no
// connection; the HTTP client (net/http_client.h) is per process.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "net/http_client.h"
#include "store/providers.h"
#include "store/store.h"

namespace lsio {

// Signing and providers are store/providers.h's (one file each); these are their names here.
using HttpSigning = SigningKind;
using HttpCredentials = SignerCredentials;

struct ObjectStoreConfig {
  std::string scheme = "https";   ///< "http" or "https"
  std::string host;               ///< "host" or "host:port" (IPv6 in brackets)
  std::string root;               ///< unencoded path prefix, "" or starting with '/', no trailing '/'
  HttpSigning signing = HttpSigning::kNone;
  std::string region = "us-east-1";
  std::string service = "s3";
  HttpCredentials credentials;
  std::vector<std::pair<std::string, std::string>> headers;  ///< sent with every request
  std::string display_root;       ///< the user's URL for messages, without secrets
  /// Whose servers these are (store/providers.h): error vocabulary and request ids, how
  /// they list, whether they take suffix ranges. Null: plain HTTP.
  std::shared_ptr<const Provider> provider;
  HttpClientOptions client;       ///< client.dialect, if unset, is the provider's
  /// Unencoded path of the bucket's listing endpoint ("" virtual-hosted, "/bucket" path
  /// style); listable false: not known, or the provider has no Lister.
  bool listable = false;
  std::string list_root;
  /// Seconds a version the server confirmed is trusted without asking again (storage option
  /// cache_max_age, given with a disk cache): AdoptVersion then takes it as confirmed. 0:
  /// every read call confirms each adopted version it serves from a copy.
  double cache_max_age_s = 0;
};

class ObjectStore final : public Store {
 public:
  /// Fails (in Check()) for an unusable config: empty host, bad scheme, CR/LF in headers.
  explicit ObjectStore(ObjectStoreConfig config);

  /// kInvalidArgument describing what is wrong with the config, else Ok.
  Status Check() const;

  Result<ObjectInfo> Stat(std::string_view key) override;
  Result<std::optional<std::string>> ReadAll(std::string_view key, uint64_t max_bytes) override;
  std::string Location(std::string_view key) const override;
  Result<ObjectRef> Open(std::string_view key) override;
  void Read(std::span<RangeRead> reads, const std::function<void(size_t)>& on_done,
            const std::function<bool()>& cancelled = {}) override;
  void ReadStream(const std::function<RangeRead*()>& next, const std::function<void(RangeRead&)>& on_done,
                  const std::function<bool()>& cancelled = {}, std::span<const ObjectRef> confirm = {}) override;
  StoreTraits traits() override;
  Result<std::string> TransportName() override { return std::string("http"); }
  bool AdoptVersion(StoreObject& obj, const std::string& version, uint64_t size) override;
  std::string Identity(const StoreObject& obj) const override;
  bool VersionIdentifiesBytes(const StoreObject& obj) const override;
  Status ConfirmServed(std::span<const ObjectRef> objects, const std::function<bool()>& cancelled = {}) override;

  /// The version an answer tells: its ETag (strong or weak, as sent), else its
  /// Last-Modified date ("last-modified: <date>"), else "" (no validator).
  static std::string VersionOf(const HttpRequest& q);
  static bool IsEtag(const std::string& version);        ///< "..." or W/"..."
  static bool IsStrongEtag(const std::string& version);  ///< "..." (If-Match, disk-cache keys)

  /// Names of the "directories" directly below `prefix` (a key prefix relative to the root,
  /// "" for the root itself), from S3's ListObjectsV2 with delimiter '/' (all pages), sorted.
  /// kUnimplemented when the store cannot list.
  Result<std::vector<std::string>> ListChildren(std::string_view prefix);

  /// Replaces the credentials for requests started from now on.
  void SetCredentials(HttpCredentials credentials);
  HttpCredentials CurrentCredentials() const { return *Credentials(); }

  const ObjectStoreConfig& config() const { return config_; }

  /// The URL of `key` (percent-encoded path; no credentials in it).
  std::string Url(std::string_view key) const;

 private:
  // Prepares `r` for the key's object: URL, headers, signing callback.
  void Prepare(std::string_view key, HttpRequest* r, const std::shared_ptr<const HttpCredentials>& creds) const;
  // The same for any unencoded path and (decoded) query parameters (listing).
  void PrepareAt(std::string path, std::vector<std::pair<std::string, std::string>> query, HttpRequest* r,
                 const std::shared_ptr<const HttpCredentials>& creds) const;
  std::shared_ptr<const HttpCredentials> Credentials() const;
  // The request for one range read, and the read's outcome from its finished request.
  void PrepareRead(const RangeRead& r, HttpRequest* q, const std::shared_ptr<const HttpCredentials>& creds) const;
  void Complete(RangeRead& r, HttpRequest& q);
  // Adds a finished request to stats(); `failed`: the read or call it served failed.
  void Count(const HttpRequest& r, bool failed);
  Status Scrub(Status st) const;
  // Records that the server confirmed `version` of `key` now (for AdoptVersion within
  // cache_max_age; only kept with a disk cache and a positive cache_max_age).
  void NoteConfirmed(const std::string& key, const std::string& version);
  // Version confirmation by a conditional HEAD (If-None-Match: 304 when unchanged).
  // TakeConfirmation: true for the one caller that must send it for an adopted, still
  // unconfirmed object (the state goes to kAsking).
  bool TakeConfirmation(StoreObject& obj);
  void PrepareConfirm(StoreObject& obj, HttpRequest* q, const std::shared_ptr<const HttpCredentials>& creds) const;
  void FinishConfirm(StoreObject& obj, const HttpRequest& q);
  // A provider without suffix ranges: turns a suffix read into a plain range pinned to the
  // version its HEAD `q` saw (true: send it), or ends it (false: missing, empty, failed).
  bool SuffixAsRange(RangeRead& r, const HttpRequest& q);
  struct Confirmation {
    std::string version;
    std::chrono::steady_clock::time_point at;
  };
  static constexpr size_t kMaxConfirmed = 1 << 16;

  ObjectStoreConfig config_;
  std::shared_ptr<const Signer> signer_;  // from config_.signing
  mutable std::mutex mu_;
  std::shared_ptr<const HttpCredentials> credentials_;
  std::unordered_map<std::string, Confirmation> confirmed_;  // guarded by mu_
};

}  // namespace lsio
