// numcodecs lz4 chunk facts the read layer needs without decoding, and the raw LZ4 block
// decoder of a staged plan's CPU executor (codec/numcodecs.cc holds the codecs).
#pragma once

#include <cstdint>
#include <span>

#include "lsio/status.h"

namespace lsio {

// When `in` is a numcodecs lz4 chunk whose 4-byte size header says `decoded` and a block
// follows: *block = the raw LZ4 block (in[4:]); true. A GPU LZ4 decoder is handed the block
// alone with the chunk's size as its output size; a header that disagrees with the chunk's
// size (corrupt, or another array's chunk) is left to the CPU, which reports it precisely.
// The block has no checksum to verify: a corrupt block decodes to garbage or fails, on either side.
bool Lz4GpuFrame(std::span<const uint8_t> in, uint64_t decoded, std::span<const uint8_t>* block);

// Decodes one raw LZ4 block into exactly out.size() bytes (a CPU executor of a staged plan:
// read/stage.h). kDataLoss on a corrupt block or another size.
Status Lz4DecodeBlock(std::span<const uint8_t> in, std::span<uint8_t> out);

}  // namespace lsio
