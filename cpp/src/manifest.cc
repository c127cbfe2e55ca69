// References and ReferenceView (lsio/manifest.h): the facade over store/manifest.h and
// store/kerchunk.h.
#include "lsio/manifest.h"

#include <utility>

#include "io/select_backend.h"
#include "lsio/remote.h"
#include "store/kerchunk.h"
#include "store/local_store.h"
#include "store/manifest.h"

namespace lsio {

ReferenceView::ReferenceView(std::shared_ptr<ManifestStore> store) : store_(std::move(store)) {}

std::shared_ptr<Store> ReferenceView::store() const { return store_; }

std::string ReferenceView::Location(std::string_view key) const { return store_->Location(key); }

std::shared_ptr<ReferenceView> ReferenceView::Sub(std::string_view prefix) const {
  return std::make_shared<ReferenceView>(store_->Sub(prefix));
}

Result<std::shared_ptr<References>> References::FromKerchunk(std::string_view json, std::string location) {
  Result<std::shared_ptr<const Manifest>> m = ParseKerchunkJson(json);
  if (!m.ok()) return Status(m.status()).WithPath(location);
  std::shared_ptr<References> r(new References());
  r->manifest_ = std::move(m).value();
  r->location_ = std::move(location);
  return r;
}

const std::vector<std::string>& References::urls() const { return manifest_->urls(); }
size_t References::size() const { return manifest_->size(); }
uint64_t References::memory_bytes() const { return manifest_->memory_bytes(); }
std::vector<std::string> References::Children(std::string_view prefix) const { return manifest_->Children(prefix); }

Result<std::shared_ptr<ReferenceView>> References::LocalView(std::string_view prefix, const std::string& root,
                                                             std::vector<std::string> target_keys,
                                                             const std::string& io, unsigned queue_depth,
                                                             bool direct) const {
  if (target_keys.size() != manifest_->urls().size()) {
    return Status::InvalidArgument("one target key per referenced URL is needed");
  }
  LSIO_ASSIGN_OR_RETURN(IoMode mode, ParseIoMode(io));
  LocalStoreOptions so;
  so.mode = mode;
  so.queue_depth = queue_depth;
  so.direct = direct;
  auto store = std::make_shared<ManifestStore>(manifest_, std::string(prefix), std::make_shared<LocalStore>(root, so),
                                               std::move(target_keys), location_);
  return std::make_shared<ReferenceView>(std::move(store));
}

Result<std::shared_ptr<ReferenceView>> References::RemoteView(std::string_view prefix, const RemoteStore& target,
                                                              std::vector<std::string> target_keys) const {
  if (target_keys.size() != manifest_->urls().size()) {
    return Status::InvalidArgument("one target key per referenced URL is needed");
  }
  auto store = std::make_shared<ManifestStore>(manifest_, std::string(prefix), target.store(), std::move(target_keys),
                                               location_);
  return std::make_shared<ReferenceView>(std::move(store));
}

}  // namespace lsio
