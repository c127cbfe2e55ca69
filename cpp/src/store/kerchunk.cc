// ParseKerchunkJson (see kerchunk.h).
#include "store/kerchunk.h"

#include <nlohmann/json.hpp>

#include <string>
#include <utility>

#include "util/base64.h"

namespace lsio {
namespace {

using Json = nlohmann::json;

Status Bad(const std::string& key, const std::string& why) {
  return Status::InvalidFormat("kerchunk reference \"" + key + "\": " + why);
}

// "{{name}}" (spaces allowed inside the braces) replaced by templates[name].
Result<std::string> Expand(const std::string& key, const std::string& url, const Json& templates) {
  if (url.find("{{") == std::string::npos) return url;
  std::string out;
  size_t at = 0;
  while (at < url.size()) {
    const size_t open = url.find("{{", at);
    if (open == std::string::npos) {
      out.append(url, at, std::string::npos);
      break;
    }
    const size_t close = url.find("}}", open + 2);
    if (close == std::string::npos) return Bad(key, "unclosed \"{{\" in its URL");
    out.append(url, at, open - at);
    std::string name = url.substr(open + 2, close - open - 2);
    while (!name.empty() && name.front() == ' ') name.erase(name.begin());
    while (!name.empty() && name.back() == ' ') name.pop_back();
    auto it = templates.is_object() ? templates.find(name) : templates.end();
    if (it == templates.end() || !it->is_string()) return Bad(key, "its URL uses template \"" + name + "\", which is not defined");
    out += it->get<std::string>();
    at = close + 2;
  }
  return out;
}

Status Add(Manifest::Builder& b, const std::string& key, const Json& v, const Json& templates) {
  LSIO_RETURN_IF_ERROR(ValidateKey(key).ok() ? Status::Ok() : Bad(key, "not a relative key inside the store"));
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    if (s.rfind("base64:", 0) == 0) {
      std::string bytes;
      if (!DecodeBase64(std::string_view(s).substr(7), &bytes)) return Bad(key, "invalid base64 data");
      b.AddInline(key, std::move(bytes));
    } else {
      b.AddInline(key, s);
    }
    return Status::Ok();
  }
  if (v.is_object()) {  // a metadata document written as JSON rather than as a string
    b.AddInline(key, v.dump());
    return Status::Ok();
  }
  if (!v.is_array() || (v.size() != 1 && v.size() != 3) || !v[0].is_string()) {
    return Bad(key, "expected a string, [url] or [url, offset, length], got " + v.dump().substr(0, 80));
  }
  LSIO_ASSIGN_OR_RETURN(std::string url, Expand(key, v[0].get<std::string>(), templates));
  if (url.empty()) return Bad(key, "empty URL");
  if (v.size() == 1) {
    b.AddWhole(key, b.Url(url));
    return Status::Ok();
  }
  if (!v[1].is_number_unsigned() || !v[2].is_number_unsigned()) {
    return Bad(key, "offset and length must be non-negative integers, got " + v.dump().substr(0, 80));
  }
  const uint64_t offset = v[1].get<uint64_t>(), length = v[2].get<uint64_t>();
  if (offset + length < offset) return Bad(key, "offset + length overflows");
  b.AddRange(key, b.Url(url), offset, length);
  return Status::Ok();
}

}  // namespace

Result<std::shared_ptr<const Manifest>> ParseKerchunkJson(std::string_view text) {
  Json top = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (top.is_discarded()) return Status::InvalidFormat("kerchunk references: not valid JSON");
  if (!top.is_object()) return Status::InvalidFormat("kerchunk references: expected a JSON object");
  const Json* refs = &top;
  Json templates = Json::object();
  if (auto ver = top.find("version"); ver != top.end()) {
    if (!ver->is_number_integer() || ver->get<int64_t>() != 1) {
      return Status::Unimplemented("kerchunk references of version " + ver->dump() + " (lsio reads versions 0 and 1)");
    }
    auto r = top.find("refs");
    if (r == top.end() || !r->is_object()) return Status::InvalidFormat("kerchunk references: \"refs\" must be an object");
    refs = &*r;
    if (auto t = top.find("templates"); t != top.end() && !t->is_null()) {
      if (!t->is_object()) return Status::InvalidFormat("kerchunk references: \"templates\" must be an object");
      templates = *t;
    }
    if (auto g = top.find("gen"); g != top.end() && !g->is_null() && !(g->is_array() && g->empty())) {
      return Status::Unimplemented("kerchunk references with \"gen\" (generated keys) are not supported yet");
    }
  }
  Manifest::Builder b;
  for (auto it = refs->begin(); it != refs->end(); ++it) {
    if (it.value().is_null()) continue;  // no data: the chunk reads as the fill value
    LSIO_RETURN_IF_ERROR(Add(b, it.key(), it.value(), templates));
  }
  return std::move(b).Finish();
}

}  // namespace lsio
