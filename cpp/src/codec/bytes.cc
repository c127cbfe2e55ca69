// `bytes` codec (array -> bytes): configuration parsing. Decoding is done by CodecChain,
// which knows whether a byte swap is needed for the host.
#include "codec/registry.h"

namespace lsio {

Result<std::unique_ptr<Codec>> ParseBytesCodec(const nlohmann::json& config) {
  bool big = false;
  auto it = config.find("endian");
  if (it != config.end() && !it->is_null()) {
    if (!it->is_string()) return Status::InvalidFormat("bytes codec: \"endian\" must be a string");
    const std::string e = it->get<std::string>();
    if (e == "big") {
      big = true;
    } else if (e != "little") {
      return Status::InvalidFormat("bytes codec: \"endian\" must be \"little\" or \"big\", got '" + e + "'");
    }
  }
  // A missing endian on a multi-byte type is invalid per spec; like zarr-python before 3.3
  // and most readers, lsio assumes little endian rather than refusing the array.
  return std::unique_ptr<Codec>(new BytesCodec(big));
}

}  // namespace lsio
