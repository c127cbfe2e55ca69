// Codec registry: Zarr codec name -> parser of its JSON configuration, and the JSON entry
// point that parses a whole codec list into a prepared CodecChain.
//
// Usage:
//   LSIO_ASSIGN_OR_RETURN(std::unique_ptr<CodecChain> chain, ParseCodecChain(codecs_json, spec));
//   LSIO_ASSIGN_OR_RETURN(std::unique_ptr<Codec> c, ParseCodec(json_element));
// `json_element` is a codec object {"name", "configuration"?, "must_understand"?} or the
// short-hand string "name". Each codec file registers itself in registry.cc with one line.
// Unknown or unsupported names fail with kUnimplemented naming the codec; bad
// configurations fail with kInvalidFormat.
//
// This is the only codec header that knows JSON. The zarr layer includes it to parse
// metadata; the read layer must not (it runs prepared chains through chain.h).
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "codec/chain.h"
#include "codec/codec.h"

namespace lsio {

/// Parses one codec element. Fails with kInvalidFormat or kUnimplemented.
Result<std::unique_ptr<Codec>> ParseCodec(const nlohmann::json& element);

/// Parses `codecs` (a JSON list) and prepares it for chunks described by `decoded`
/// (CodecChain::Build). Fails with kInvalidFormat (malformed list) or kUnimplemented
/// (unsupported codec).
Result<std::unique_ptr<CodecChain>> ParseCodecChain(const nlohmann::json& codecs,
                                                    const ChunkSpec& decoded);

/// Splits a codec element into its name and configuration (an empty object when absent).
Status CodecNameAndConfig(const nlohmann::json& element, std::string* name,
                          nlohmann::json* config);

// Per-codec parsers (defined in <name>.cc).
Result<std::unique_ptr<Codec>> ParseBytesCodec(const nlohmann::json& config);
Result<std::unique_ptr<Codec>> ParseTransposeCodec(const nlohmann::json& config);
Result<std::unique_ptr<Codec>> ParseZstdCodec(const nlohmann::json& config);
Result<std::unique_ptr<Codec>> ParseGzipCodec(const nlohmann::json& config);
Result<std::unique_ptr<Codec>> ParseCrc32cCodec(const nlohmann::json& config);
Result<std::unique_ptr<Codec>> ParseBloscCodec(const nlohmann::json& config);
// numcodecs.cc: numcodecs' lz4 and shuffle (v2, and v3's numcodecs.zarr3 names), v2's delta.
Result<std::unique_ptr<Codec>> ParseNumcodecsLz4Codec(const nlohmann::json& config);
Result<std::unique_ptr<Codec>> ParseNumcodecsShuffleCodec(const nlohmann::json& config);
// HDF5's shuffle filter: numcodecs' shuffle, except that bytes after the last whole element
// stay in place (numcodecs.cc).
Result<std::unique_ptr<Codec>> ParseHdf5ShuffleCodec(const nlohmann::json& config);
Result<std::unique_ptr<Codec>> ParseV2DeltaCodec(const nlohmann::json& config);
// numcodecs' checksums (checksum32.cc) and the bz2 / lzma compressors (bz2.cc, lzma.cc): Zarr
// v2 filters or compressors, v3's numcodecs.* names.
Result<std::unique_ptr<Codec>> ParseNumcodecsCrc32Codec(const nlohmann::json& config);
Result<std::unique_ptr<Codec>> ParseNumcodecsAdler32Codec(const nlohmann::json& config);
Result<std::unique_ptr<Codec>> ParseNumcodecsFletcher32Codec(const nlohmann::json& config);
Result<std::unique_ptr<Codec>> ParseHdf5Fletcher32Codec(const nlohmann::json& config);  // also HDF5 <= 1.6.2's form
Result<std::unique_ptr<Codec>> ParseNumcodecsBz2Codec(const nlohmann::json& config);
Result<std::unique_ptr<Codec>> ParseNumcodecsLzmaCodec(const nlohmann::json& config);
// HDF5's LZ4 filter (32004), decode side (hdf5_lz4.cc).
Result<std::unique_ptr<Codec>> ParseHdf5Lz4Codec(const nlohmann::json& config);
// HDF5's bitshuffle filter (32008), alone or with LZ4 / zstd blocks, decode side (hdf5_bitshuffle.cc).
Result<std::unique_ptr<Codec>> ParseHdf5BitshuffleCodec(const nlohmann::json& config);
// numcodecs' element-converting v2 filters, decode side (numcodecs_cast.cc).
Result<std::unique_ptr<Codec>> ParseV2FixedScaleOffsetCodec(const nlohmann::json& config);
Result<std::unique_ptr<Codec>> ParseV2QuantizeCodec(const nlohmann::json& config);
Result<std::unique_ptr<Codec>> ParseV2BitRoundCodec(const nlohmann::json& config);

/// The blosc frame decoder without a configuration (frames describe themselves): shared by
/// the v3 `blosc` codec and Zarr v2's numcodecs `blosc` compressor.
std::unique_ptr<BytesToBytesCodec> NewBloscDecoder();

}  // namespace lsio
