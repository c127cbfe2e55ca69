// Helpers for the codec tests: parse a chain from JSON text, decode into a fresh buffer, and
// encode test data with the reference libraries (libzstd, zlib, c-blosc) themselves.
#pragma once

#include <blosc.h>
#include <zlib.h>
#include <zstd.h>

#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "codec/chain.h"
#include "codec/registry.h"
#include "codec/codec.h"
#include "test_util.h"

namespace lsio_test {

inline lsio::ChunkSpec Spec(std::vector<int64_t> shape, size_t itemsize = 1, size_t swap_unit = 0) {
  lsio::ChunkSpec s;
  s.shape = std::move(shape);
  s.itemsize = itemsize;
  s.swap_unit = swap_unit == 0 ? itemsize : swap_unit;
  return s;
}

inline lsio::Result<std::unique_ptr<lsio::CodecChain>> ParseChain(const std::string& json_text,
                                                                  const lsio::ChunkSpec& spec) {
  return lsio::ParseCodecChain(nlohmann::json::parse(json_text), spec);
}

/// Decodes `in` with `chain` into a buffer of decoded_size() bytes.
inline lsio::Result<Bytes> Decode(const lsio::CodecChain& chain, const Bytes& in,
                                  lsio::DecodeScratch* scratch = nullptr) {
  Bytes out(chain.decoded_size() + 1, 0xA5);  // one guard byte
  lsio::DecodeScratch& s = scratch ? *scratch : lsio::ThreadDecodeScratch();
  lsio::Status st = chain.Decode(std::span<const uint8_t>(in.data(), in.size()), out.data(), s);
  if (!st.ok()) return st;
  if (out.back() != 0xA5) return lsio::Status::Internal("decode wrote past decoded_size()");
  out.pop_back();
  return out;
}

struct ZstdOptions {
  int level = 3;
  bool content_size = true;
  bool checksum = false;
};

inline Bytes ZstdCompress(const Bytes& data, ZstdOptions o = {}) {
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, o.level);
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, o.content_size ? 1 : 0);
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, o.checksum ? 1 : 0);
  Bytes out(ZSTD_compressBound(data.size()));
  const size_t n = ZSTD_compress2(cctx, out.data(), out.size(), data.data(), data.size());
  ZSTD_freeCCtx(cctx);
  EXPECT_FALSE(ZSTD_isError(n)) << ZSTD_getErrorName(n);
  out.resize(ZSTD_isError(n) ? 0 : n);
  return out;
}

/// Frame content size as libzstd reads it (ZSTD_CONTENTSIZE_UNKNOWN when absent).
inline unsigned long long ZstdContentSize(const Bytes& frame) {
  return ZSTD_getFrameContentSize(frame.data(), frame.size());
}

/// DEFLATE with a gzip header (window_bits 15 + 16) or a zlib header (15).
inline Bytes Deflate(const Bytes& data, bool gzip = true, int level = 6) {
  return DeflateBits(data, gzip ? 15 + 16 : 15, nullptr, level);
}

struct BloscOptions {
  const char* cname = "lz4";
  int clevel = 5;
  int shuffle = BLOSC_SHUFFLE;  ///< BLOSC_NOSHUFFLE, BLOSC_SHUFFLE or BLOSC_BITSHUFFLE
  size_t typesize = 1;
  size_t blocksize = 0;         ///< 0: c-blosc chooses
};

/// A c-blosc 1.x frame of `data`, made by c-blosc's own compressor (as numcodecs does).
inline Bytes BloscCompress(const Bytes& data, BloscOptions o = {}) {
  Bytes out(data.size() + BLOSC_MAX_OVERHEAD);
  const int n = blosc_compress_ctx(o.clevel, o.shuffle, o.typesize, data.size(), data.data(), out.data(),
                                   out.size(), o.cname, o.blocksize, 1);
  EXPECT_GT(n, 0) << "blosc_compress_ctx failed for cname " << o.cname;
  out.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return out;
}

/// Compressible test data of `n` bytes (runs and a pattern).
/// Appends v as n big-endian bytes (the HDF5 filters' framing).
inline void PutBe(Bytes* out, uint64_t v, int n) {
  for (int i = n - 1; i >= 0; --i) out->push_back(static_cast<uint8_t>(v >> (8 * i)));
}

inline Bytes TestData(size_t n, uint64_t seed = 1) {
  Bytes b = PatternBytes(n, seed);
  for (size_t i = 0; i < n; ++i) {
    if ((i / 64) % 2 == 0) b[i] = static_cast<uint8_t>(i / 64);
  }
  return b;
}

}  // namespace lsio_test
