// What differs between the object stores lsio reads over HTTP: one file per provider.
//   store/s3.cc    Amazon S3 and S3-compatible stores: the XML error vocabulary
//                  (<Error><Code>...), SlowDown in a 2xx body, x-amz-request-id, and the
//                  ListObjectsV2 page format.
//   store/gcs.cc   Google Cloud Storage's XML API: S3's vocabulary, x-guploader-uploadid.
//   store/http.cc  plain HTTP(S) servers, which often front S3 or GCS buckets: S3's
//                  vocabulary when a body speaks it, every request-id header.
//   store/signers.cc  authorisation: none, bearer token, SigV4 (for S3 and GCS HMAC).
// HttpStore (store/http_store.h) takes the provider from its config and hands the dialect
// to the transport (net/http_client.h knows HTTP only). A new provider (Azure Blob: its own
// error XML, x-ms-request-id) is one more file here and one enum value.
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

/// One page of an S3 ListObjectsV2 answer (delimiter "/"): appends the child "directory"
/// names below `key_prefix` to `names` and sets `next_token` (empty on the last page).
/// kDataLoss when the answer is no ListBucketResult.
Status ParseListPage(std::string_view xml, std::string_view key_prefix, std::vector<std::string>* names,
                     std::string* next_token);

}  // namespace lsio
