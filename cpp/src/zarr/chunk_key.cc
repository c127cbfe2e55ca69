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

}  // namespace lsio
