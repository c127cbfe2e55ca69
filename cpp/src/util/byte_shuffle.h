// Byte unshuffle: undoes the byte transposition that blosc's SHUFFLE and numcodecs'
// `shuffle` filter apply before compressing, with AVX2 kernels for 2-, 4- and 8-byte items.
//
// Usage:
//   UnshuffleBytes(dst, src, nbytes, typesize);   // any typesize; dst and src must not overlap
//   if (UnshuffleIsVectorized(4)) ...             // true where an AVX2 kernel serves typesize 4
//
// Layout (the encoders' own, per shuffled buffer; blosc shuffles each block on its own):
// src holds n = nbytes / typesize items as typesize planes of n bytes (plane j = byte j of
// every item), then the nbytes % typesize trailing bytes as they were; dst receives the n
// items in order, then those trailing bytes.
//
// Why lsio has its own: Debian 12's c-blosc 1.21 is built with its SSE2 shuffle kernels
// only, and its unshuffle was ~40% of a 64 KiB blosc-lz4 chunk's decode. codec/blosc.cc
// asks c-blosc for the byte planes and unshuffles them here when UnshuffleIsVectorized
// says this machine has the faster kernel. numcodecs' `shuffle` filter uses it too.
#pragma once

#include <cstddef>
#include <cstdint>

namespace lsio {

/// Writes the nbytes unshuffled bytes of src to dst (layout above). typesize 0 or 1 copies.
void UnshuffleBytes(uint8_t* dst, const uint8_t* src, size_t nbytes, size_t typesize);

/// True when UnshuffleBytes has a vector kernel for `typesize` on this CPU (x86-64 with
/// AVX2, typesize 2, 4 or 8); otherwise it runs a scalar loop.
bool UnshuffleIsVectorized(size_t typesize);

/// The scalar loop alone, whatever the CPU: the reference the vector kernels are tested
/// against.
void UnshuffleBytesScalar(uint8_t* dst, const uint8_t* src, size_t nbytes, size_t typesize);

}  // namespace lsio
