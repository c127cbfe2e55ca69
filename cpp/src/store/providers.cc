// The provider an ObjectProvider names (see providers.h): the one place a new provider is
// added besides its own file.
#include "store/providers.h"

namespace lsio {

std::shared_ptr<const Provider> ProviderOf(ObjectProvider provider) {
  switch (provider) {
    case ObjectProvider::kS3: return S3Provider();
    case ObjectProvider::kGcs: return GcsProvider();
    case ObjectProvider::kHttp: break;
  }
  return HttpProvider();
}

std::shared_ptr<const ErrorDialect> ProviderErrorDialect(ObjectProvider provider) {
  return ProviderOf(provider)->dialect;
}

}  // namespace lsio
