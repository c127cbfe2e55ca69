// The codec registry: one line per supported codec, plus names we know but do not support
// yet, so their error says "not supported yet" rather than "unknown".
#include "codec/registry.h"

#include <map>

namespace lsio {
namespace {

using Parser = Result<std::unique_ptr<Codec>> (*)(const nlohmann::json&);

const std::map<std::string, Parser>& Registry() {
  // Immutable after construction and holds no locks: safe across fork. Never destroyed, so
  // a daemon thread still opening an array while the process exits finds it intact.
  static const auto& kRegistry = *new std::map<std::string, Parser>{
      {"bytes", &ParseBytesCodec},
      {"endian", &ParseBytesCodec},  // ZEP1 draft name, still registered by zarr-python
      {"transpose", &ParseTransposeCodec},
      {"zstd", &ParseZstdCodec},
      {"gzip", &ParseGzipCodec},
      {"crc32c", &ParseCrc32cCodec},
      {"blosc", &ParseBloscCodec},
      {"numcodecs.lz4", &ParseNumcodecsLz4Codec},
      {"numcodecs.shuffle", &ParseNumcodecsShuffleCodec},
      {"lsio.v2.delta", &ParseV2DeltaCodec},  // Zarr v2's delta filter (metadata_v2.cc)
      {"lsio.v2.fixedscaleoffset", &ParseV2FixedScaleOffsetCodec},
      {"lsio.v2.quantize", &ParseV2QuantizeCodec},
      {"lsio.v2.bitround", &ParseV2BitRoundCodec},
      {"numcodecs.crc32", &ParseNumcodecsCrc32Codec},
      {"numcodecs.adler32", &ParseNumcodecsAdler32Codec},
      {"numcodecs.fletcher32", &ParseNumcodecsFletcher32Codec},
      {"numcodecs.bz2", &ParseNumcodecsBz2Codec},
      {"numcodecs.lzma", &ParseNumcodecsLzmaCodec},
      {"lsio.hdf5.shuffle", &ParseHdf5ShuffleCodec},  // HDF5 files' shuffle filter (leftover bytes kept)
      {"lsio.hdf5.lz4", &ParseHdf5Lz4Codec},  // HDF5 files' LZ4 filter (python/lsio/_hdf5.py)
      {"lsio.hdf5.bitshuffle", &ParseHdf5BitshuffleCodec},  // HDF5 files' bitshuffle filter
      // numcodecs' own spellings of codecs lsio reads under their Zarr names: zlib and
      // gzip streams are both inflated by the gzip codec; numcodecs' zstd writes standard
      // frames.
      {"numcodecs.zlib", &ParseGzipCodec},
      {"numcodecs.gzip", &ParseGzipCodec},
      {"numcodecs.zstd", &ParseZstdCodec},
  };
  return kRegistry;
}

bool KnownButUnsupported(const std::string& name) {
  static const char* const kNames[] = {"sharding_indexed", "vlen-utf8", "vlen-bytes",
                                       "packbits", "bitround", "cast_value", "scale_offset"};
  for (const char* n : kNames) if (name == n) return true;
  return name.rfind("numcodecs.", 0) == 0;
}

}  // namespace

Status CodecNameAndConfig(const nlohmann::json& element, std::string* name,
                          nlohmann::json* config) {
  if (element.is_string()) {
    *name = element.get<std::string>();
    *config = nlohmann::json::object();
    return Status::Ok();
  }
  if (!element.is_object()) return Status::InvalidFormat("codec must be an object or a string");
  auto it = element.find("name");
  if (it == element.end() || !it->is_string()) {
    return Status::InvalidFormat("codec object without a string \"name\"");
  }
  *name = it->get<std::string>();
  auto cfg = element.find("configuration");
  if (cfg == element.end() || cfg->is_null()) {
    *config = nlohmann::json::object();
  } else if (!cfg->is_object()) {
    return Status::InvalidFormat("codec '" + *name + "': configuration must be an object");
  } else {
    *config = *cfg;
  }
  return Status::Ok();
}

Result<std::unique_ptr<Codec>> ParseCodec(const nlohmann::json& element) {
  std::string name;
  nlohmann::json config;
  LSIO_RETURN_IF_ERROR(CodecNameAndConfig(element, &name, &config));
  auto it = Registry().find(name);
  if (it != Registry().end()) return it->second(config);
  if (KnownButUnsupported(name)) {
    return Status::Unimplemented("codec '" + name + "' is not supported by lsio yet");
  }
  if (name.rfind("hdf5.filter.", 0) == 0) {
    // An HDF5 file's filter lsio has no decoder for (python/lsio/_hdf5.py names it so):
    // say which, by the name the file gives it.
    const std::string label = config.is_object() && config.contains("filter") && config["filter"].is_string()
                                  ? config["filter"].get<std::string>()
                                  : std::string();
    return Status::Unimplemented("HDF5 filter " + name.substr(12) + (label.empty() ? "" : " (" + label + ")") +
                                 " is not supported by lsio");
  }
  return Status::Unimplemented("unknown codec '" + name + "'");
}

Result<std::unique_ptr<CodecChain>> ParseCodecChain(const nlohmann::json& codecs,
                                                    const ChunkSpec& decoded) {
  if (!codecs.is_array()) return Status::InvalidFormat("\"codecs\" must be a list");
  if (codecs.empty()) return Status::InvalidFormat("\"codecs\" must not be empty");
  std::vector<std::unique_ptr<Codec>> parsed;
  parsed.reserve(codecs.size());
  for (const auto& element : codecs) {
    LSIO_ASSIGN_OR_RETURN(std::unique_ptr<Codec> c, ParseCodec(element));
    parsed.push_back(std::move(c));
  }
  return CodecChain::Build(std::move(parsed), decoded);
}

}  // namespace lsio
