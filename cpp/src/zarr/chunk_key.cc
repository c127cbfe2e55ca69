// Chunk key encodings.
#include "zarr/chunk_key.h"

#include "codec/registry.h"

namespace lsio {

Result<ChunkKeyEncoding> ParseChunkKeyEncoding(const nlohmann::json& j) {
  std::string name;
  nlohmann::json config;
  Status st = CodecNameAndConfig(j, &name, &config);
  if (!st.ok()) return Status::InvalidFormat("chunk_key_encoding: " + st.message());
  ChunkKeyEncoding enc;
  if (name == "default") {
    enc.v2 = false;
    enc.separator = '/';
  } else if (name == "v2") {
    enc.v2 = true;
    enc.separator = '.';
  } else {
    return Status::Unimplemented("chunk key encoding '" + name + "' is not supported");
  }
  auto it = config.find("separator");
  if (it != config.end()) {
    if (!it->is_string()) return Status::InvalidFormat("chunk_key_encoding: separator must be a string");
    const std::string sep = it->get<std::string>();
    if (sep != "/" && sep != ".") {
      return Status::InvalidFormat("chunk_key_encoding: separator must be \"/\" or \".\", got '" + sep + "'");
    }
    enc.separator = sep[0];
  }
  return enc;
}

std::string ChunkKey(const ChunkKeyEncoding& enc, const int64_t* coords, int ndim) {
  std::string key;
  if (!enc.v2) {
    key = "c";
    for (int d = 0; d < ndim; ++d) {
      key += enc.separator;
      key += std::to_string(coords[d]);
    }
    return key;
  }
  if (ndim == 0) return "0";
  for (int d = 0; d < ndim; ++d) {
    if (d > 0) key += enc.separator;
    key += std::to_string(coords[d]);
  }
  return key;
}

bool ParseChunkKey(const ChunkKeyEncoding& enc, std::string_view key, int ndim, int64_t* coords) {
  if (!enc.v2) {
    if (key.empty() || key[0] != 'c') return false;
    key.remove_prefix(1);
    if (ndim == 0) return key.empty();
  } else if (ndim == 0) {
    return key == "0";
  }
  for (int d = 0; d < ndim; ++d) {
    if (!enc.v2 || d > 0) {
      if (key.empty() || key[0] != enc.separator) return false;
      key.remove_prefix(1);
    }
    int64_t v = 0;
    size_t n = 0;
    while (n < key.size() && key[n] >= '0' && key[n] <= '9') {
      if (v > (INT64_MAX - 9) / 10) return false;
      v = v * 10 + (key[n] - '0');
      ++n;
    }
    if (n == 0) return false;
    coords[d] = v;
    key.remove_prefix(n);
  }
  return key.empty();
}

}  // namespace lsio
