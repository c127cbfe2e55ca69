// lsio/node.h: a node's metadata files read through the store, translated by zarr/node.h.
#include "lsio/node.h"

#include "store/local_store.h"
#include "zarr/metadata.h"
#include "zarr/node.h"

namespace lsio {
namespace {

// Metadata above this is refused unread: real metadata is kilobytes (consolidated metadata of
// ten thousand arrays a few MiB), and a huge file there is a mistake that would otherwise be
// read whole into memory. A body sent without a Content-Length is buffered up to this bound,
// so it is also the most a refused metadata read can cost in memory (kept under 64 MiB).
constexpr uint64_t kMaxMetadataBytes = uint64_t{32} << 20;

std::string Join(const std::string& prefix, const char* name) {
  return prefix.empty() ? std::string(name) : prefix + "/" + name;
}

bool EndsWith(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// A metadata file through the store, appended to `files` when it exists.
Result<bool> Read(Store& store, const std::string& prefix, const char* name, std::vector<NodeFile>* files) {
  const std::string key = Join(prefix, name);
  auto read = store.ReadAll(key, kMaxMetadataBytes);
  if (!read.ok()) {
    // The store's only kInvalidFormat is "larger than max_bytes" (store.h): say what it was.
    if (read.status().code() == StatusCode::kInvalidFormat) {
      return Status::InvalidFormat("metadata file is larger than " + std::to_string(kMaxMetadataBytes >> 20) + " MiB").WithPath(store.Location(key));
    }
    return read.status();
  }
  if (!read.value().has_value()) return false;
  files->push_back({key, store.Location(key), std::move(*read.value())});
  return true;
}

}  // namespace

Result<std::vector<NodeFile>> ReadNodeFiles(Store& store, const std::string& prefix, bool v2_consolidated) {
  std::vector<NodeFile> files;
  LSIO_ASSIGN_OR_RETURN(bool found, Read(store, prefix, "zarr.json", &files));
  if (found) return files;
  LSIO_ASSIGN_OR_RETURN(const bool array, Read(store, prefix, ".zarray", &files));
  if (!array) {
    LSIO_ASSIGN_OR_RETURN(found, Read(store, prefix, ".zgroup", &files));
    if (!found) return files;
  }
  LSIO_RETURN_IF_ERROR(Read(store, prefix, ".zattrs", &files).status());
  if (!array && v2_consolidated) LSIO_RETURN_IF_ERROR(Read(store, prefix, ".zmetadata", &files).status());
  return files;
}

Result<Node> NodeFromFiles(std::vector<NodeFile> files) {
  Node node;
  node.files = std::move(files);
  const NodeFile& first = node.files.front();
  if (EndsWith(first.key, "zarr.json")) {
    auto parsed = ParseNodeV3(first.text);
    if (!parsed.ok()) return Status(parsed.status()).WithPath(first.location);
    node.metadata = std::move(parsed).value();
    node.node_type = node.metadata["node_type"].get<std::string>();
    if (node.node_type == "group") node.consolidated = ConsolidatedMembersV3(node.metadata);
    return node;
  }
  node.zarr_format = 2;
  const bool array = EndsWith(first.key, ".zarray");
  const NodeFile* zattrs = nullptr;
  const NodeFile* zmetadata = nullptr;
  for (const NodeFile& f : node.files) {
    if (EndsWith(f.key, ".zattrs")) zattrs = &f;
    if (EndsWith(f.key, ".zmetadata")) zmetadata = &f;
  }
  std::optional<std::string_view> attrs_text;
  if (zattrs != nullptr) attrs_text = zattrs->text;
  auto parsed = ParseNodeV2(array, first.text, attrs_text);
  if (!parsed.ok()) {
    // The message starts with the file that is wrong; the path names it in full.
    const bool attrs_bad = zattrs != nullptr && parsed.status().message().rfind(".zattrs", 0) == 0;
    return Status(parsed.status()).WithPath(attrs_bad ? zattrs->location : first.location);
  }
  node.metadata = std::move(parsed).value();
  node.node_type = array ? "array" : "group";
  if (zmetadata != nullptr) {
    auto members = ParseZmetadata(zmetadata->text);
    if (!members.ok()) return Status(members.status()).WithPath(zmetadata->location);
    node.consolidated = std::move(members).value();
  }
  return node;
}

Result<std::optional<Node>> ReadNode(Store& store, const std::string& prefix, bool v2_consolidated) {
  LSIO_ASSIGN_OR_RETURN(std::vector<NodeFile> files, ReadNodeFiles(store, prefix, v2_consolidated));
  if (files.empty()) return std::optional<Node>();
  LSIO_ASSIGN_OR_RETURN(Node node, NodeFromFiles(std::move(files)));
  return std::optional<Node>(std::move(node));
}

std::string NodeJsonText(const nlohmann::json& j) {
  return RestoreNonFinite(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

Result<std::optional<Node>> ReadNode(const std::string& dir, const std::string& prefix, bool v2_consolidated) {
  LocalStore store(dir);
  return ReadNode(store, prefix, v2_consolidated);
}

}  // namespace lsio
