// References and ReferenceView (lsio/manifest.h): the facade over store/manifest.h and
// store/kerchunk.h.
#include "lsio/manifest.h"

#include <utility>

#include "io/select_backend.h"
#include "lsio/remote.h"
#include "store/icechunk.h"
#include "store/kerchunk.h"
#include "store/local_store.h"
#include "store/manifest.h"
#include "store/store.h"

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

Result<std::shared_ptr<References>> References::FromEntries(
    std::vector<std::pair<std::string, std::string>> inline_values, std::vector<std::string> keys,
    std::vector<std::string> urls, const std::vector<int64_t>& url_ids, const std::vector<int64_t>& offsets,
    const std::vector<int64_t>& lengths, std::string location) {
  if (url_ids.size() != keys.size() || offsets.size() != keys.size() || lengths.size() != keys.size()) {
    return Status::InvalidArgument("one URL number, offset and length per key are needed");
  }
  Manifest::Builder b;
  std::vector<uint32_t> ids;
  ids.reserve(urls.size());
  for (const std::string& u : urls) ids.push_back(b.Url(u));
  for (auto& [k, v] : inline_values) {
    if (!ValidateKey(k).ok()) return Status::InvalidFormat("reference key \"" + k + "\" leaves the store").WithPath(location);
    b.AddInline(std::move(k), std::move(v));
  }
  for (size_t i = 0; i < keys.size(); ++i) {
    if (!ValidateKey(keys[i]).ok()) {
      return Status::InvalidFormat("reference key \"" + keys[i] + "\" leaves the store").WithPath(location);
    }
    if (url_ids[i] < 0 || static_cast<uint64_t>(url_ids[i]) >= ids.size()) {
      return Status::InvalidFormat("reference \"" + keys[i] + "\" names URL number " + std::to_string(url_ids[i]) +
                                   " of " + std::to_string(ids.size()))
          .WithPath(location);
    }
    const uint32_t u = ids[static_cast<size_t>(url_ids[i])];
    if (lengths[i] < 0) {
      b.AddWhole(std::move(keys[i]), u);
    } else {
      if (offsets[i] < 0) return Status::InvalidFormat("reference \"" + keys[i] + "\" has a negative offset").WithPath(location);
      b.AddRange(std::move(keys[i]), u, static_cast<uint64_t>(offsets[i]), static_cast<uint64_t>(lengths[i]));
    }
  }
  Result<std::shared_ptr<const Manifest>> m = std::move(b).Finish();
  if (!m.ok()) return Status(m.status()).WithPath(location);
  std::shared_ptr<References> r(new References());
  r->manifest_ = std::move(m).value();
  r->location_ = std::move(location);
  return r;
}

Result<std::shared_ptr<References>> References::FromIcechunk(
    std::vector<std::pair<std::string, std::string>> inline_values, const std::vector<IcechunkArray>& arrays,
    const std::vector<std::string>& manifest_files, const std::vector<std::string>& manifest_locations,
    std::string location) {
  if (manifest_locations.size() != manifest_files.size()) {
    return Status::InvalidArgument("one location per manifest file is needed");
  }
  Manifest::Builder b;
  for (auto& [k, v] : inline_values) {
    if (!ValidateKey(k).ok()) return Status::InvalidFormat("node key \"" + k + "\" leaves the store").WithPath(location);
    b.AddInline(std::move(k), std::move(v));
  }
  std::vector<IcechunkCheck> checks;
  for (const IcechunkArray& a : arrays) {
    if (a.node_id.size() != 8) return Status::InvalidArgument("an Icechunk node id has 8 bytes");
    IcechunkArrayKeys keys{a.node_id, a.root, a.separator, a.v2_keys, a.ndim};
    for (const auto& [file, extents] : a.manifests) {
      if (file >= manifest_files.size()) return Status::InvalidArgument("manifest number out of range");
      Status s = AddIcechunkManifest(manifest_files[file], keys, extents, &b, &checks);
      if (!s.ok()) return s.WithPath(manifest_locations[file]);
    }
  }
  Result<std::shared_ptr<const Manifest>> m = std::move(b).Finish();
  if (!m.ok()) return Status(m.status()).WithPath(location);
  std::shared_ptr<References> r(new References());
  r->manifest_ = std::move(m).value();
  r->location_ = std::move(location);
  r->checks_.resize(r->manifest_->urls().size());
  for (size_t i = 0; i < checks.size() && i < r->checks_.size(); ++i) {
    r->checks_[i] = {checks[i].etag, checks[i].last_modified};
  }
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
  so.direct = direct ? DirectMode::kOn : DirectMode::kOff;
  auto store = std::make_shared<ManifestStore>(manifest_, std::string(prefix), std::make_shared<LocalStore>(root, so),
                                               std::move(target_keys), location_);
  return std::make_shared<ReferenceView>(std::move(store));
}

Result<std::shared_ptr<ReferenceView>> References::RemoteView(std::string_view prefix, const RemoteStore& target,
                                                              std::vector<std::string> target_keys,
                                                              std::vector<std::string> versions) const {
  if (target_keys.size() != manifest_->urls().size() || (!versions.empty() && versions.size() != target_keys.size())) {
    return Status::InvalidArgument("one target key (and version, if any) per referenced URL is needed");
  }
  auto store = std::make_shared<ManifestStore>(manifest_, std::string(prefix), target.store(), std::move(target_keys),
                                               location_, std::move(versions));
  return std::make_shared<ReferenceView>(std::move(store));
}

Result<std::shared_ptr<ReferenceView>> References::MixedView(std::string_view prefix,
                                                             const std::vector<ViewTarget>& targets,
                                                             std::vector<uint32_t> target_of,
                                                             std::vector<std::string> target_keys,
                                                             std::vector<std::string> versions, const std::string& io,
                                                             unsigned queue_depth) const {
  const size_t n = manifest_->urls().size();
  if (targets.empty() || target_keys.size() != n || target_of.size() != n || (!versions.empty() && versions.size() != n)) {
    return Status::InvalidArgument("one target, target key (and version, if any) per referenced URL is needed");
  }
  LSIO_ASSIGN_OR_RETURN(IoMode mode, ParseIoMode(io));
  std::vector<std::shared_ptr<Store>> stores;
  for (const ViewTarget& t : targets) {
    if (t.remote != nullptr) {
      stores.push_back(t.remote->store());
    } else {
      LocalStoreOptions so;
      so.mode = mode;
      so.queue_depth = queue_depth;
      stores.push_back(std::make_shared<LocalStore>(t.local_root, so));
    }
  }
  for (uint32_t i : target_of) {
    if (i >= stores.size()) return Status::InvalidArgument("target number out of range");
  }
  auto store = std::make_shared<ManifestStore>(manifest_, std::string(prefix), std::move(stores), std::move(target_of),
                                               std::move(target_keys), location_, std::move(versions));
  return std::make_shared<ReferenceView>(std::move(store));
}

}  // namespace lsio
