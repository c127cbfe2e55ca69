// libFuzzer target: zarr.json parsing (lsio::ParseArrayMetadata) and Zarr v2 .zarray parsing
// (lsio::ParseArrayMetadataV2).
//
// The input is the metadata text, given to both parsers. Any input must either parse or fail with a Status; a
// parsed array must be self-consistent (rank of every shape, a chain for the decoded unit,
// an index size that matches the entry count). Run through scripts/fuzz.sh; seeds are in
// corpus/metadata_fuzzer (tests/fuzz/make_corpus.py), crashes replay under ctest.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "zarr/metadata.h"

namespace {

void Check(const lsio::Result<lsio::ArrayMetadata>& m) {
  if (!m.ok()) return;
  const lsio::ArrayMetadata& a = m.value();
  if (a.chunk_shape.size() != a.shape.size() || a.read_chunk_shape.size() != a.shape.size()) __builtin_trap();
  if (a.chain == nullptr) __builtin_trap();
  if (a.fill_value.size() != a.dtype.itemsize) __builtin_trap();
  if (a.sharding) {
    const lsio::ShardLayout& l = *a.sharding;
    // The index chain decodes exactly the entries, from exactly index_size stored bytes.
    if (l.index_chain == nullptr || l.index_chain->decoded_size() != 16 * l.num_entries ||
        l.index_chain->FixedEncodedSize() != l.index_size) {
      __builtin_trap();
    }
  }
  (void)a.chain->description();
  (void)a.chain->FixedEncodedSize();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  Check(lsio::ParseArrayMetadata(text));
  Check(lsio::ParseArrayMetadataV2(text, ""));
  return 0;
}
