// Google Cloud Storage through its XML API (see providers.h): S3's error vocabulary, with
// GCS's own request-id header first.
#include "store/providers.h"

namespace lsio {

std::shared_ptr<const ErrorDialect> GcsErrorDialect() {
  static const std::shared_ptr<const ErrorDialect> kDialect = [] {
    auto d = std::make_shared<ErrorDialect>(*S3ErrorDialect());
    d->request_id_headers = {"x-guploader-uploadid", "x-request-id"};
    return d;
  }();
  return kDialect;
}

}  // namespace lsio
