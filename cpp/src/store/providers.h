// What differs between the object stores lsio reads over HTTP: one file per provider, each
// defining its Provider (error dialect, Lister, range support).
//   store/s3.cc    Amazon S3 and S3-compatible stores: the XML error vocabulary
//                  (<Error><Code>...), SlowDown in a 2xx body, x-amz-request-id, and the
//                  ListObjectsV2 Lister.
//   store/gcs.cc   Google Cloud Storage's XML API: S3's vocabulary and listing,
//                  x-guploader-uploadid.
//   store/http.cc  plain HTTP(S) servers, which often front S3 or GCS buckets: S3's
//                  vocabulary when a body speaks it, every request-id header; no listing.
//   store/signers.cc  authorisation: none, bearer token, SigV4 (for S3 and GCS HMAC).
// ObjectStore (store/object_store.h), the one generic object store (ranged GET, HEAD, list),
// takes the Provider from its config, hands the dialect to the transport (net/http_client.h
// knows HTTP only), lists through the Lister and reads an index at the end of an object
// with a suffix range, or, for a provider whose servers take none, with a HEAD for the size
// first. A new provider (Azure Blob: its own error XML, x-ms-request-id, List Blobs pages,
// no suffix ranges) is one more file here, one enum value and one case in ProviderOf.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "lsio/status.h"
#include "net/http_client.h"

namespace lsio {

enum class ObjectProvider { kHttp, kS3, kGcs };
class Lister;

/// How requests are authorised (store/signers.cc): none, a bearer token (GCS OAuth), or
/// AWS Signature V4 (S3, and GCS with HMAC keys). Chosen by the credentials, not the
/// provider. Credentials are passed per request: they are refreshed while the store lives.
struct SignerCredentials {
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;
  std::string token;
};
class Signer {
 public:
  virtual ~Signer() = default;
  /// Adds what authorises `q` for the unencoded `path` and decoded `query` it was built
  /// from (headers now, or a per-attempt `sign` callback: SigV4 dates change between
  /// retries).
  virtual void Sign(const std::string& path, const std::vector<std::pair<std::string, std::string>>& query,
                    const std::shared_ptr<const SignerCredentials>& creds, HttpRequest* q) const = 0;
};
enum class SigningKind { kNone, kSigV4, kBearer };
std::shared_ptr<const Signer> MakeSigner(SigningKind kind, std::string host, std::string region, std::string service);

/// The error dialect of `provider` (shared, immutable).
std::shared_ptr<const ErrorDialect> ProviderErrorDialect(ObjectProvider provider);

/// S3's dialect (store/s3.cc); GCS and plain HTTP build on it.
std::shared_ptr<const ErrorDialect> S3ErrorDialect();
std::shared_ptr<const ErrorDialect> GcsErrorDialect();
std::shared_ptr<const ErrorDialect> HttpErrorDialect();
/// S3's ListObjectsV2 (store/s3.cc); GCS's XML API lists the same way.
std::shared_ptr<const Lister> ListObjectsV2Lister();

/// How a provider lists the child "directories" below a key prefix, one page per request.
class Lister {
 public:
  virtual ~Lister() = default;
  /// The (decoded) query of the request for one page of the children of `key_prefix`
  /// (bucket-relative, "" or ending in '/'); `token`: "" for the first page, else the
  /// previous page's next token. The request goes to the bucket's listing path.
  virtual std::vector<std::pair<std::string, std::string>> PageQuery(std::string_view key_prefix,
                                                                     std::string_view token) const = 0;
  /// One answer: appends the child names (without `key_prefix` and trailing '/') to `names`
  /// and sets `next_token` ("" on the last page). kDataLoss when it is no listing page.
  virtual Status ParsePage(std::string_view body, std::string_view key_prefix, std::vector<std::string>* names,
                           std::string* next_token) const = 0;
  /// The listing's name in messages ("S3's ListObjectsV2").
  virtual const char* name() const = 0;
};

/// What the object store needs to know of one provider's servers.
struct Provider {
  const char* name = "http";
  std::shared_ptr<const ErrorDialect> dialect;  ///< error vocabulary, request-id headers
  std::shared_ptr<const Lister> lister;         ///< null: its servers cannot list
  /// Whether its servers answer suffix ranges ("Range: bytes=-N", a shard index at the end
  /// of an object of unknown size). False: a HEAD learns size and version first, then the
  /// bytes are read with a plain range pinned to that version (one round trip more).
  bool suffix_ranges = true;
};
std::shared_ptr<const Provider> S3Provider();    // store/s3.cc
std::shared_ptr<const Provider> GcsProvider();   // store/gcs.cc
std::shared_ptr<const Provider> HttpProvider();  // store/http.cc
/// The provider `provider` names (shared, immutable).
std::shared_ptr<const Provider> ProviderOf(ObjectProvider provider);

/// One page of an S3 ListObjectsV2 answer (delimiter "/"): appends the child "directory"
/// names below `key_prefix` to `names` and sets `next_token` (empty on the last page).
/// kDataLoss when the answer is no ListBucketResult.
Status ParseListPage(std::string_view xml, std::string_view key_prefix, std::vector<std::string>* names,
                     std::string* next_token);

}  // namespace lsio
