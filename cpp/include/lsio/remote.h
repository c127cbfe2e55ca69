// lsio/remote.h: the public C++ API for remote stores (HTTP(S), S3 and S3-compatible, GCS).
//
// Usage:
//   1. lsio::RemoteOptions o;              // python/lsio/_storage.py builds these from a URL,
//      o.scheme = "https";                 // storage_options and the environment
//      o.host = "bucket.s3.us-west-2.amazonaws.com";
//      o.root = "/era5.zarr";              // unencoded; each segment is percent-encoded once
//      o.signing = "sigv4"; o.region = "us-west-2"; o.access_key_id = ...; ...
//      o.display_root = "s3://bucket/era5.zarr";
//   2. auto store = lsio::RemoteStore::Create(o);             // no I/O
//   3. (*store)->Get("zarr.json", 64 << 20)                   // metadata (groups), nullopt if absent
//      auto sub = (*store)->Sub("t2m");                          // an array below the root
//      lsio::Array::Open((*sub)->store(), (*sub)->Location(""), options)
//   4. (*store)->SetCredentials(...) after a credentials callable refreshed them.
//
// Every request of a store shares the process's HTTP client (net/http_client.h): keep-alive
// connections, DNS and TLS sessions are reused across Arrays; a forked child starts afresh.
// Thread-safety: all methods may be called from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "lsio/status.h"

namespace lsio {

class Store;

struct RemoteOptions {
  std::string scheme = "https";   ///< "http" or "https"
  std::string host;               ///< "host" or "host:port"
  std::string root;               ///< unencoded path prefix: "" or "/a/b" (no trailing '/')
  std::string display_root;       ///< what messages call the root (the user's URL, no secrets)
  std::string signing = "none";   ///< "none", "sigv4" (S3, GCS HMAC) or "bearer" (GCS token)
  /// "s3", "gcs" or "http" (store/providers.h); "" = "s3" when signing is SigV4 or the
  /// store can list, else "http".
  std::string provider;
  std::string region = "us-east-1";
  std::string service = "s3";
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;
  std::string token;              ///< bearer token
  std::vector<std::pair<std::string, std::string>> headers;  ///< extra headers, every request
  bool verify_ssl = true;
  std::string ca_file;            ///< "" = the system CA store
  unsigned request_concurrency = 32;  ///< requests in flight per read call (all its workers)
  double timeout_s = 30;          ///< one attempt
  double connect_timeout_s = 5;
  unsigned retries = 9;           ///< attempts after the first
  double total_timeout_s = 180;   ///< one request, every attempt and backoff included
  /// S3/GCS: path of the bucket's listing endpoint ("" virtual-hosted, "/bucket" path
  /// style); listable false for plain HTTP, which cannot list.
  bool listable = false;
  std::string list_root;
  /// Local disk cache of byte ranges (store/disk_cache.h): "" = none. Shared by every store
  /// of the process with the same directory, and by other processes using it.
  std::string cache_dir;
  uint64_t cache_bytes = 0;  ///< its bound (bytes of block files)
  /// Seconds a version the server confirmed may serve disk-cache hits without asking again
  /// (0: each read call revalidates, with one conditional request per shard).
  double cache_max_age_s = 0;
};

/// Counters of one store, since it was created.
struct StoreCounters {
  uint64_t requests = 0;       ///< HTTP requests sent (every attempt)
  uint64_t retries = 0;        ///< attempts after the first
  uint64_t bytes_fetched = 0;  ///< body bytes received
  uint64_t bytes_used = 0;     ///< bytes of metadata, shard indexes and chunks actually needed
  uint64_t errors = 0;         ///< requests that failed after their retries
  uint64_t disk_cache_hits = 0;   ///< reads served by the local disk cache (no request)
  uint64_t disk_cache_bytes = 0;  ///< bytes they served
  /// Local files read with O_DIRECT (direct=True, or "auto" on data larger than the page
  /// cache): reads sent with O_DIRECT, and ranges served from the page cache instead.
  uint64_t direct_reads = 0;
  uint64_t page_cache_reads = 0;
  /// Local files read in place from the page cache through a mapping of the file (io="auto"):
  /// read units (one range each, maybe several chunks), added up per worker at the end of
  /// each call.
  uint64_t mapped_reads = 0;
  /// Array::Stats only: the coalescing the next read uses (measured when adaptive).
  uint64_t max_gap = 0;
  uint64_t max_request = 0;
};

class RemoteStore {
 public:
  /// Fails with kInvalidArgument for an unusable configuration (bad scheme, empty host,
  /// CR/LF in a header, sigv4 without keys, ...), naming what is wrong and no secret.
  static Result<std::shared_ptr<RemoteStore>> Create(const RemoteOptions& options);

  /// A store rooted at `path` below this one ("t2m", "forecast/t2m"), with the same options
  /// and current credentials, and counters of its own (one per Array).
  Result<std::shared_ptr<RemoteStore>> Sub(const std::string& path) const;

  /// The whole object `key` (relative to the root), nullopt when absent (404). Objects over
  /// max_bytes fail with kInvalidFormat.
  Result<std::optional<std::string>> Get(const std::string& key, uint64_t max_bytes);
  /// Whether `key` exists (a HEAD request).
  Result<bool> Exists(const std::string& key);
  /// `key`'s size and version (ETag, or Last-Modified), nullopt when absent (a HEAD request).
  Result<std::optional<std::pair<uint64_t, std::string>>> Stat(const std::string& key);
  struct Head {
    uint64_t size = 0;
    std::string version;        ///< as Stat's
    std::string last_modified;  ///< the Last-Modified header (an HTTP date), "" if none
  };
  /// Stat with the modification date, nullopt when absent (a HEAD request).
  Result<std::optional<Head>> StatHead(const std::string& key);
  /// Bytes [offset, offset + length) of `key`, one range request. With `version` and `size`
  /// (from Stat) the read is pinned to them: an object rewritten since fails with kIoError
  /// (ESTALE), so a reader assembling one file from many ranges (h5py on a NetCDF file)
  /// never mixes two versions.
  Result<std::string> ReadRange(const std::string& key, uint64_t offset, uint64_t length,
                                const std::string& version = "", uint64_t size = 0);
  /// ReadRange for many ranges of `key` at once, all in flight together (the store's own
  /// concurrency, no thread of the caller's): one round trip for a batch of small reads.
  /// Fails with the first range's error, naming it.
  Result<std::vector<std::string>> ReadRanges(const std::string& key,
                                              const std::vector<std::pair<uint64_t, uint64_t>>& ranges,
                                              const std::string& version = "", uint64_t size = 0);
  /// Names directly below `prefix` ("" = the root) that have objects under them (S3
  /// ListObjectsV2 with delimiter '/'), sorted. kUnimplemented for plain HTTP.
  Result<std::vector<std::string>> ListChildren(const std::string& prefix);

  /// New credentials for requests started from now on (keys for sigv4, token for bearer).
  void SetCredentials(const std::string& access_key_id, const std::string& secret_access_key,
                      const std::string& session_token, const std::string& token);

  StoreCounters Counters() const;
  const RemoteOptions& options() const;  ///< as created, credentials blanked
  std::string Location(const std::string& key) const;
  std::shared_ptr<Store> store() const;  ///< for Array::Open

  ~RemoteStore();
  RemoteStore(const RemoteStore&) = delete;
  RemoteStore& operator=(const RemoteStore&) = delete;

 private:
  struct Impl;
  explicit RemoteStore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace lsio
