// Plain HTTP(S) servers (see providers.h). An https:// URL often fronts an S3 or GCS bucket
// (public datasets are published that way), so a body that speaks S3's error vocabulary is
// read as such, and every known request-id header is taken.
#include "store/providers.h"

namespace lsio {

std::shared_ptr<const ErrorDialect> HttpErrorDialect() {
  static const std::shared_ptr<const ErrorDialect> kDialect = [] {
    auto d = std::make_shared<ErrorDialect>(*S3ErrorDialect());
    d->request_id_headers = {"x-amz-request-id", "x-guploader-uploadid", "x-request-id"};
    return d;
  }();
  return kDialect;
}

// No listing: a plain server has no way to enumerate what is below a path.
std::shared_ptr<const Provider> HttpProvider() {
  static const std::shared_ptr<const Provider> kProvider = [] {
    auto p = std::make_shared<Provider>();
    p->name = "http";
    p->dialect = HttpErrorDialect();
    return p;
  }();
  return kProvider;
}

}  // namespace lsio
