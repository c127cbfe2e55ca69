// kerchunk references (fsspec's ReferenceFileSystem format, JSON versions 0 and 1) read into
// a Manifest (store/manifest.h).
//
// Version 0 is a flat object {key: value}; version 1 is {"version": 1, "templates": {...},
// "gen": [...], "refs": {key: value}}. A value is an inline string (a metadata document or
// a small chunk's bytes as UTF-8), "base64:<data>" (inline bytes), [url] (a whole object) or
// [url, offset, length] (a byte range); "{{name}}" in a URL is replaced by templates[name].
// URLs are kept as written (the caller maps each to a store key: Manifest::urls()).
//
// Errors: kInvalidFormat naming the key for malformed JSON, values and base64, keys that
// leave the store's root ("..", a leading '/'), unknown templates; kUnimplemented for
// version > 1 and non-empty "gen" (generated references; kerchunk writes them only on request).
#pragma once

#include <memory>
#include <string_view>

#include "lsio/status.h"
#include "store/manifest.h"

namespace lsio {

Result<std::shared_ptr<const Manifest>> ParseKerchunkJson(std::string_view text);

}  // namespace lsio
