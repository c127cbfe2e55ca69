// Codec registry: Zarr codec name -> parser of its JSON configuration.
//
// Usage:
//   LSIO_ASSIGN_OR_RETURN(std::unique_ptr<Codec> c, ParseCodec(json_element));
// `json_element` is a codec object {"name", "configuration"?, "must_understand"?} or the
// short-hand string "name". Each codec file registers itself in registry.cc with one line.
// Unknown or unsupported names fail with kUnimplemented naming the codec; bad
// configurations fail with kInvalidFormat.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "codec/codec.h"

namespace lsio {

Result<std::unique_ptr<Codec>> ParseCodec(const nlohmann::json& element);

/// Splits a codec element into its name and configuration (an empty object when absent).
Status CodecNameAndConfig(const nlohmann::json& element, std::string* name,
                          nlohmann::json* config);

// Per-codec parsers (defined in <name>.cc).
Result<std::unique_ptr<Codec>> ParseBytesCodec(const nlohmann::json& config);
Result<std::unique_ptr<Codec>> ParseTransposeCodec(const nlohmann::json& config);
Result<std::unique_ptr<Codec>> ParseZstdCodec(const nlohmann::json& config);
Result<std::unique_ptr<Codec>> ParseGzipCodec(const nlohmann::json& config);
Result<std::unique_ptr<Codec>> ParseCrc32cCodec(const nlohmann::json& config);

}  // namespace lsio
