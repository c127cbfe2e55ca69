// lsio/strings.h: decoding of variable-length string chunks (Zarr v3 `string` with the
// `vlen-utf8` codec, Zarr v2 object arrays with the `vlen-utf8` filter).
//
// Such chunks have no fixed element size, so they do not go through the engine's crop path;
// python/lsio/_strings.py reads them on the calling thread, one whole chunk at a time, and
// hands each stored chunk here.
//
// Usage:
//   auto items = lsio::DecodeVlenUtf8Chunk(R"([{"name": "zstd"}])", stored_bytes, 6);
//   // items: the chunk's 6 strings in its storage order (C, or F for v2 order "F")
//
// Thread-safety: may be called from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "lsio/status.h"

namespace lsio {

/// Decodes `stored` with `codecs` (a JSON list of Zarr v3 bytes -> bytes codecs, e.g.
/// `[{"name": "zstd", ...}]` or `[]`, applied in reverse), then parses the vlen-utf8 layout:
/// a little-endian uint32 item count, then per item a uint32 byte length and that many UTF-8
/// bytes. Fails with kDataLoss when the count is not `items`, a length runs past the end,
/// bytes are left over, the text is not valid UTF-8 or a stage would decode to more than
/// 1 GiB; kUnimplemented / kInvalidFormat for
/// codecs lsio cannot run or that are malformed.
Result<std::vector<std::string>> DecodeVlenUtf8Chunk(const std::string& codecs_json, std::string_view stored,
                                                     uint64_t items);

}  // namespace lsio
