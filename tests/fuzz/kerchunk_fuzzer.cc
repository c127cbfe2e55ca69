// libFuzzer target: kerchunk JSON references (store/kerchunk.h, lsio::ParseKerchunkJson) and
// lookups in the manifest they build (store/manifest.h).
//
// Input: the reference file's text. Any input must parse or fail with a Status; a parsed
// manifest must find every key it lists the children of, with ranges whose end does not
// overflow and inline values of the length it reports. Seeds are in corpus/kerchunk_fuzzer
// (tests/fuzz/make_corpus.py); crashes replay under ctest.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "store/kerchunk.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto m = lsio::ParseKerchunkJson(text);
  if (!m.ok()) return 0;
  const lsio::Manifest& man = *m.value();
  for (const std::string& top : man.Children("")) {
    for (const std::string& child : man.Children(top)) {
      (void)man.Find(top + "/" + child);
    }
  }
  for (const char* key : {".zgroup", ".zarray", "a/.zarray", "a/0", "a/0.0", "0"}) {
    const lsio::Manifest::Entry e = man.Find(key);
    if (e.kind == lsio::Manifest::Kind::kRange && e.offset + e.length < e.offset) __builtin_trap();
    if (e.kind == lsio::Manifest::Kind::kInline && e.bytes.size() != e.length) __builtin_trap();
    if ((e.kind == lsio::Manifest::Kind::kRange || e.kind == lsio::Manifest::Kind::kWhole) &&
        e.url >= man.urls().size()) {
      __builtin_trap();
    }
  }
  return 0;
}
