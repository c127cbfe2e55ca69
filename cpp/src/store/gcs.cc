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

// The XML API lists buckets with S3's ListObjectsV2 (list-type=2) and takes suffix ranges.
std::shared_ptr<const Provider> GcsProvider() {
  static const std::shared_ptr<const Provider> kProvider = [] {
    auto p = std::make_shared<Provider>();
    p->name = "gcs";
    p->dialect = GcsErrorDialect();
    p->lister = ListObjectsV2Lister();
    return p;
  }();
  return kProvider;
}

}  // namespace lsio
