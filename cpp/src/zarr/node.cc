// Node metadata in the v3 form (zarr/node.h): zarr.json, Zarr v2 .zarray / .zgroup / .zattrs,
// and consolidated metadata (inline v3, v2 .zmetadata).
#include "zarr/node.h"

#include <string>

#include "zarr/metadata.h"

namespace lsio {
namespace {

Result<nlohmann::json> ParseObject(std::string_view text, const char* what) {
  auto parsed = ParseJsonLenient(text);
  if (!parsed.ok()) return Status::InvalidFormat(std::string(what) + " is not valid JSON");
  nlohmann::json j = std::move(parsed).value();
  if (!j.is_object()) return Status::InvalidFormat(std::string(what) + " does not hold a JSON object");
  return j;
}

nlohmann::json V2Group(const nlohmann::json& zgroup, nlohmann::json attributes) {
  nlohmann::json node = zgroup;
  node["zarr_format"] = 2;
  node["node_type"] = "group";
  node["attributes"] = std::move(attributes);
  return node;
}

Status CheckV2Format(const nlohmann::json& j, const char* what) {
  auto zf = j.find("zarr_format");
  if (zf == j.end() || !zf->is_number_integer() || zf->get<int64_t>() != 2) {
    return Status::InvalidFormat(std::string(what) + ": zarr_format must be 2, got " +
                                 (zf == j.end() ? std::string("nothing") : zf->dump()));
  }
  return Status::Ok();
}

}  // namespace

Result<nlohmann::json> ParseNodeV3(std::string_view zarr_json) {
  LSIO_ASSIGN_OR_RETURN(nlohmann::json j, ParseObject(zarr_json, "zarr.json"));
  auto zf = j.find("zarr_format");
  if (zf != j.end() && zf->is_number_integer() && zf->get<int64_t>() == 2) {
    return Status::InvalidFormat("zarr.json says zarr_format 2; a Zarr v2 node keeps its metadata in .zarray or .zgroup");
  }
  if (zf == j.end() || !zf->is_number_integer() || zf->get<int64_t>() != 3) {
    return Status::Unimplemented("zarr_format is " + (zf == j.end() ? std::string("missing") : zf->dump()) +
                                 "; lsio reads Zarr v3 and v2");
  }
  auto nt = j.find("node_type");
  if (nt == j.end() || !nt->is_string() || (*nt != "array" && *nt != "group")) {
    return Status::InvalidFormat("node_type must be 'array' or 'group', got " +
                                 (nt == j.end() ? std::string("nothing") : nt->dump()));
  }
  return j;
}

nlohmann::json ConsolidatedMembersV3(const nlohmann::json& group) {
  auto cm = group.find("consolidated_metadata");
  if (cm == group.end() || !cm->is_object()) return nullptr;
  auto meta = cm->find("metadata");
  if (meta == cm->end() || !meta->is_object()) return nullptr;
  nlohmann::json members = nlohmann::json::object();
  for (const auto& [key, value] : meta->items()) {
    if (!value.is_object()) continue;
    std::string rel = key;  // keys are relative paths; some writers add slashes around them
    while (!rel.empty() && rel.front() == '/') rel.erase(0, 1);
    while (!rel.empty() && rel.back() == '/') rel.pop_back();
    members[rel] = value;
  }
  return members;
}

Result<nlohmann::json> ParseNodeV2(bool array, std::string_view meta, std::optional<std::string_view> zattrs) {
  const char* what = array ? ".zarray" : ".zgroup";
  LSIO_ASSIGN_OR_RETURN(nlohmann::json j, ParseObject(meta, what));
  LSIO_RETURN_IF_ERROR(CheckV2Format(j, what));
  nlohmann::json attributes = nlohmann::json::object();
  if (zattrs.has_value()) {
    LSIO_ASSIGN_OR_RETURN(attributes, ParseObject(*zattrs, ".zattrs"));
  }
  return array ? V2ArrayAsV3(j, attributes) : V2Group(j, std::move(attributes));
}

Result<nlohmann::json> ParseZmetadata(std::string_view text) {
  LSIO_ASSIGN_OR_RETURN(nlohmann::json j, ParseObject(text, ".zmetadata"));
  auto meta = j.find("metadata");
  if (meta == j.end() || !meta->is_object()) {
    return Status::InvalidFormat(".zmetadata lacks a \"metadata\" object");
  }
  nlohmann::json members = nlohmann::json::object();
  for (const auto& [key, value] : meta->items()) {
    for (const bool array : {true, false}) {
      const std::string suffix = array ? "/.zarray" : "/.zgroup";
      if (key.size() <= suffix.size() || key.compare(key.size() - suffix.size(), suffix.size(), suffix) != 0 ||
          !value.is_object()) {
        continue;
      }
      std::string rel = key.substr(0, key.size() - suffix.size());
      while (!rel.empty() && rel.front() == '/') rel.erase(0, 1);
      LSIO_RETURN_IF_ERROR(CheckV2Format(value, (".zmetadata: " + key).c_str()));
      auto at = meta->find(rel + "/.zattrs");
      nlohmann::json attributes = at != meta->end() && at->is_object() ? *at : nlohmann::json::object();
      members[rel] = array ? V2ArrayAsV3(value, attributes) : V2Group(value, std::move(attributes));
    }
  }
  return members;
}

}  // namespace lsio
