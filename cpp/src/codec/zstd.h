// zstd frame facts the read layer needs without decoding (codec/zstd.cc holds the codec).
#pragma once

#include <cstdint>
#include <span>

#include "lsio/status.h"

namespace lsio {

// True when `in` is exactly one zstd frame whose header declares `decoded` bytes of
// content and no content checksum. A GPU decoder (read/stage.h) is handed only such
// frames: nvCOMP trusts sizes it cannot check cheaply and does not promise to verify
// checksums, so anything else (several frames, skippable frames, no declared size, a
// wrong size, a checksum to verify, garbage) is decoded by the CPU, which reports
// corruption precisely.
bool ZstdGpuDecodable(std::span<const uint8_t> in, uint64_t decoded);

// Decodes one frame into exactly out.size() bytes (a CPU executor of a staged plan:
// read/stage.h). Fails with kDataLoss on corrupt data or another size.
Status ZstdDecodeFrame(std::span<const uint8_t> in, std::span<uint8_t> out);

}  // namespace lsio
