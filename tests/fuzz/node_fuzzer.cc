// libFuzzer target: node metadata in the v3 form (zarr/node.h), the path groups, listings and
// variable-length string arrays take: zarr.json (lsio::ParseNodeV3 and the inline consolidated
// members), a v2 .zarray or .zgroup with its .zattrs (lsio::ParseNodeV2), and a v2 group's
// .zmetadata (lsio::ParseZmetadata).
//
// Input: one byte choosing the parser (low 2 bits), then the text; for ParseNodeV2 the text is
// split at its first NUL byte into the .zarray/.zgroup text and the .zattrs text (no NUL: no
// .zattrs). Any input must parse or fail with a Status; a parsed node must be a JSON object
// with a node_type of "array" or "group", and every consolidated member an object. Seeds are
// in corpus/node_fuzzer (tests/fuzz/make_corpus.py); crashes replay under ctest.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "zarr/node.h"

namespace {

void CheckNode(const nlohmann::json& n) {
  if (!n.is_object()) __builtin_trap();
  auto t = n.find("node_type");
  if (t == n.end() || !t->is_string()) __builtin_trap();
  if (*t != "array" && *t != "group") __builtin_trap();
  (void)n.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void CheckMembers(const nlohmann::json& members) {
  if (members.is_null()) return;
  if (!members.is_object()) __builtin_trap();
  for (const auto& [name, node] : members.items()) {
    (void)name;
    if (!node.is_object()) __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const int mode = data[0] & 3;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  switch (mode) {
    case 0: {
      auto n = lsio::ParseNodeV3(text);
      if (!n.ok()) return 0;
      CheckNode(n.value());
      CheckMembers(lsio::ConsolidatedMembersV3(n.value()));
      return 0;
    }
    case 1:
    case 2: {
      const size_t nul = text.find('\0');
      std::optional<std::string_view> zattrs;
      std::string_view meta = text;
      if (nul != std::string_view::npos) {
        meta = text.substr(0, nul);
        zattrs = text.substr(nul + 1);
      }
      auto n = lsio::ParseNodeV2(/*array=*/mode == 1, meta, zattrs);
      if (n.ok()) CheckNode(n.value());
      return 0;
    }
    default: {
      auto m = lsio::ParseZmetadata(text);
      if (m.ok()) CheckMembers(m.value());
      return 0;
    }
  }
}
