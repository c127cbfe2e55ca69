// The codec registry: one line per supported codec, plus names we know but do not support
// yet, so their error says "not supported yet" rather than "unknown".
#include "codec/registry.h"

#include <map>
#include <string>
#include <vector>

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
      {"lsio.hdf5.shuffle", &ParseHdf5ShuffleCodec},
      {"lsio.hdf5.fletcher32", &ParseHdf5Fletcher32Codec},  // HDF5 files' fletcher32 (either byte order)  // HDF5 files' shuffle filter (leftover bytes kept)
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

namespace {

bool IsElementFilter(const std::string& name) {
  return name == "numcodecs.delta" || name == "numcodecs.fixedscaleoffset" || name == "numcodecs.quantize" ||
         name == "numcodecs.bitround";
}

// zarr-python's numcodecs element filters in v3 chains (numcodecs.delta, .fixedscaleoffset,
// .quantize, .bitround) are array -> array codecs there, but numcodecs' decode views the
// array it gets as its configured `astype` (or `dtype`), so the stored bytes are read in the
// configuration's byte order whatever the `bytes` codec says: exactly what Zarr v2's filters
// do on the stored bytes. A run of them right before `bytes` therefore becomes the v2 form:
// [bytes(byte order of the first one's "dtype", what the chain then holds), lsio.v2.<id>...].
Result<nlohmann::json> ElementFiltersAsV2(const nlohmann::json& codecs, const ChunkSpec& decoded) {
  std::vector<size_t> filters;
  size_t serializer = codecs.size();
  std::vector<std::string> names(codecs.size());
  for (size_t i = 0; i < codecs.size(); ++i) {
    nlohmann::json config;
    LSIO_RETURN_IF_ERROR(CodecNameAndConfig(codecs[i], &names[i], &config));
    if (IsElementFilter(names[i])) filters.push_back(i);
    else if ((names[i] == "bytes" || names[i] == "endian") && serializer == codecs.size()) serializer = i;
  }
  if (filters.empty()) return codecs;
  if (serializer == codecs.size()) {
    return Status::Unimplemented("numcodecs element filters without a \"bytes\" serializer after them are not "
                                 "supported by lsio yet");
  }
  const size_t first = filters.front();
  for (size_t i : filters) {
    if (i > serializer) {
      return Status::InvalidFormat("codec '" + names[i] + "' is an array -> array codec: it must come before \"bytes\"");
    }
  }
  for (size_t i = first; i < serializer; ++i) {
    if (!IsElementFilter(names[i])) {
      return Status::Unimplemented("codec '" + names[i] + "' between numcodecs element filters and \"bytes\" is not "
                                   "supported by lsio yet");
    }
  }
  nlohmann::json out = nlohmann::json::array();
  for (size_t i = 0; i < first; ++i) out.push_back(codecs[i]);
  // What the chain holds after the run: the elements of the first filter that converts
  // (its "dtype", in that byte order); bitround converts nothing (the serializer's order).
  std::string name;
  nlohmann::json config;
  nlohmann::json bytes = codecs[serializer];
  for (size_t i = first; i < serializer; ++i) {
    LSIO_RETURN_IF_ERROR(CodecNameAndConfig(codecs[i], &name, &config));
    auto dt = config.find("dtype");
    if (name == "numcodecs.bitround" && dt == config.end()) continue;
    if (dt == config.end() || !dt->is_string() || dt->get<std::string>().size() < 3) {
      return Status::InvalidFormat("codec '" + name + "': \"dtype\" must be a numpy dtype string");
    }
    const std::string dtype = dt->get<std::string>();
    size_t itemsize = 0;
    try {
      itemsize = std::stoul(dtype.substr(2));
    } catch (...) {
    }
    if (itemsize != decoded.itemsize) {
      return Status::InvalidFormat("codec '" + name + "': \"dtype\" " + dtype + " is not the array's data type (" +
                                   std::to_string(decoded.itemsize) + "-byte items)");
    }
    bytes = {{"name", "bytes"}};
    if (dtype[0] != '|' && itemsize > 1) bytes["configuration"] = {{"endian", dtype[0] == '>' ? "big" : "little"}};
    break;
  }
  out.push_back(bytes);
  for (size_t i = first; i < serializer; ++i) {
    LSIO_RETURN_IF_ERROR(CodecNameAndConfig(codecs[i], &name, &config));
    out.push_back({{"name", "lsio.v2." + name.substr(std::string("numcodecs.").size())}, {"configuration", config}});
  }
  for (size_t i = serializer + 1; i < codecs.size(); ++i) out.push_back(codecs[i]);
  return out;
}

}  // namespace

Result<std::unique_ptr<CodecChain>> ParseCodecChain(const nlohmann::json& given, const ChunkSpec& decoded) {
  if (!given.is_array()) return Status::InvalidFormat("\"codecs\" must be a list");
  if (given.empty()) return Status::InvalidFormat("\"codecs\" must not be empty");
  LSIO_ASSIGN_OR_RETURN(const nlohmann::json codecs, ElementFiltersAsV2(given, decoded));
  std::vector<std::unique_ptr<Codec>> parsed;
  parsed.reserve(codecs.size());
  for (const auto& element : codecs) {
    LSIO_ASSIGN_OR_RETURN(std::unique_ptr<Codec> c, ParseCodec(element));
    parsed.push_back(std::move(c));
  }
  return CodecChain::Build(std::move(parsed), decoded);
}

}  // namespace lsio
