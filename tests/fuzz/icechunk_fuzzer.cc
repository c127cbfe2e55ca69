// libFuzzer target: Icechunk's metadata files (store/icechunk.h): the repo info file,
// snapshots and manifests, through the header check, zstd and FlatBuffers' verifier.
//
// Input: a mode byte (mode % 3: 0 repo info file, 1 snapshot, 2 manifest); for a manifest then
// the 8-byte node id of the array to take references of and a byte whose value % 5 is its
// number of dimensions; then the file. Any input must parse or fail with a Status; the
// references taken must build a manifest whose ranges do not overflow and whose URLs exist.
// Seeds (tests/fuzz/make_corpus.py) are Icechunk's own old-format repositories'
// files; crashes replay under ctest.
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "store/icechunk.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const int mode = data[0] % 3;
  std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (mode == 0) {
    (void)lsio::ParseIcechunkRepo(rest);
    return 0;
  }
  if (mode == 1) {
    auto s = lsio::ParseIcechunkSnapshot(rest);
    if (s.ok()) {
      for (const lsio::IcechunkNode& n : s.value().nodes) {
        if (n.node_id.size() != 8 || n.path.empty() || n.path[0] != '/') __builtin_trap();
      }
    }
    return 0;
  }
  if (rest.size() < 9) return 0;
  lsio::IcechunkArrayKeys keys;
  keys.node_id = std::string(rest.substr(0, 8));
  keys.root = "a";
  keys.ndim = static_cast<uint8_t>(rest[8]) % 5;
  const std::vector<std::pair<uint32_t, uint32_t>> extents(keys.ndim, {0, std::numeric_limits<uint32_t>::max()});
  lsio::Manifest::Builder b;
  std::vector<lsio::IcechunkCheck> checks;
  if (!lsio::AddIcechunkManifest(rest.substr(9), keys, extents, &b, &checks).ok()) return 0;
  auto m = std::move(b).Finish();
  if (!m.ok()) return 0;
  const lsio::Manifest& man = *m.value();
  // Every key (a/c/i/j...): ranges inside 64 bits, URLs that exist, never a whole object.
  std::vector<std::string> todo{"a"};
  size_t seen = 0;
  while (!todo.empty() && seen < 100000) {
    const std::string p = std::move(todo.back());
    todo.pop_back();
    ++seen;
    const lsio::Manifest::Entry e = man.Find(p);
    if (e.kind == lsio::Manifest::Kind::kWhole) __builtin_trap();
    if (e.kind == lsio::Manifest::Kind::kRange && (e.url >= man.urls().size() || e.offset + e.length < e.offset)) {
      __builtin_trap();
    }
    for (const std::string& child : man.Children(p)) todo.push_back(p + "/" + child);
  }
  if (checks.size() > man.urls().size()) __builtin_trap();
  return 0;
}
