// gzip member facts the read layer needs without inflating, and the raw deflate decoder of a
// staged plan's CPU executor (codec/gzip.cc holds the codec).
#pragma once

#include <cstdint>
#include <span>

#include "lsio/status.h"

namespace lsio {

// When `in` looks like exactly one gzip member (RFC 1952) of `decoded` bytes: *body = its raw
// deflate stream (between the header and the 8-byte trailer) and *crc = the trailer's CRC-32
// of the decoded bytes; true. A GPU deflate decoder sees only the raw stream, so the header
// is parsed and the trailer kept here, and the executor checks the CRC after decoding: gzip
// data must not reach the caller unverified. False (the CPU decodes the chunk, reporting
// corruption precisely) for anything else: a zlib wrapper (its adler32 has no GPU
// implementation), reserved flags, a header that runs out or fails its own CRC-16, an
// ISIZE other than `decoded` mod 2^32, `decoded` >= 2^32, an empty body.
//
// Not caught: several members whose last one alone has ISIZE == decoded (the others empty).
// The body then holds a whole member and more; the GPU decoder stops at the first final
// block, so the size or the CRC check fails and the executor redoes the batch on the CPU.
bool GzipGpuFrame(std::span<const uint8_t> in, uint64_t decoded, std::span<const uint8_t>* body, uint32_t* crc);

// Inflates the raw deflate stream `in` into exactly out.size() bytes (a CPU executor of a
// staged plan: read/stage.h), then, when check >= 0, compares zlib's CRC-32 of `out` with
// it. kDataLoss on corrupt data, another size, bytes after the final block, or a mismatch.
Status InflateRawFrame(std::span<const uint8_t> in, std::span<uint8_t> out, int64_t check);

}  // namespace lsio
