// `blosc` codec (bytes -> bytes): Zarr v3 configuration parsing, and a decoder of c-blosc
// 1.x frames through the library's context API.
//
// Usage: the registry maps the v3 name "blosc" to ParseBloscCodec, which validates the
// configuration and returns the decoder. Decoding needs none of the configuration (the
// frame header records codec, shuffle, typesize and sizes), so the decoder itself is
// configuration-free: NewBloscDecoder() is what Zarr v2's numcodecs `blosc` compressor
// (same frame format) will reuse.
//
// Why the context API with one thread: blosc_decompress_ctx keeps no global state and takes
// no global lock (blosc_decompress does both and reads BLOSC_NTHREADS), and lsio's workers
// already decode chunks in parallel, so one internal thread means no threads of c-blosc's
// own (fork-safe, no oversubscription).
//
// Why validate first: c-blosc trusts the header's sizes, so lsio checks them against the
// stored bytes before decompression: the frame (the header's cbytes) must fit in what is
// stored and the decoded size must be the chunk's, so a truncated frame is refused before
// anything is written. Bytes after the frame are allowed and ignored, as c-blosc and
// numcodecs do: z5py stored 16 bytes past every frame (tests/data/z5py_blosc.zr). c-blosc
// then reads only the frame, and blosc_decompress_ctx never writes past destsize, which is
// exactly the chunk.
//
// Why MaxEncodedSize is not nbytes + 16: that is only what c-blosc writes when the
// destination has no more room (numcodecs' case). Given a larger destination, blocks that
// do not compress are stored raw, each split stream behind its own 4-byte size, after a
// 4-byte start per block, and the frame can exceed nbytes + 16 (MaxFrameSize derives the
// bound); writers also pad after the frame. The read layer refuses stored chunks above the
// bound before allocating, so it must hold every frame c-blosc can write.
//
// Why lsio unshuffles byte-shuffled frames itself: c-blosc decodes each block into a
// temporary buffer and then unshuffles it into the destination, and Debian's build has only
// SSE2 unshuffle kernels (its unshuffle and temporaries were about half of a 64 KiB
// blosc-lz4 chunk's decode). Where util/byte_shuffle.h has an AVX2 kernel for the item size,
// the frame's shuffle flag is cleared (in the caller's buffer when the chain says it may be
// changed, BytesOut::in_writable, and restored afterwards; else in a copy), so c-blosc runs
// only the compressor's decode (blocks, splits and all) and writes the byte planes of each
// block, and lsio unshuffles them block by block with the encoder's layout. c-blosc decides
// splitting from the split flag, the item size and the block size, never from the shuffle
// flag, so the planes come out exactly as they were before compression. Bit-shuffled,
// memcpyed and other frames take c-blosc's own path.
#include <blosc.h>

#include <algorithm>
#include <cstring>
#include <set>

#include "codec/blosc.h"
#include "codec/registry.h"
#include "util/byte_shuffle.h"

namespace lsio {
namespace {

// The largest frame c-blosc 1.x can write for `n` decoded bytes, whatever destination size,
// compressor, typesize, block size and split mode the writer chose. From c-blosc 1.21
// (blosc/blosc.c, v1.21.6; 1.x has not changed it):
// - below MIN_BUFFERSIZE (128) bytes the frame is MEMCPYED: the 16-byte header and the data
//   (write_compression_header); any frame falls back to that when it would not fit;
// - otherwise: the header, a 4-byte start per block (bstarts), then per block its streams,
//   each a 4-byte size and at most its neblock bytes, stored raw when the compressor does not
//   shrink them (blosc_c) - except snappy, whose output may reach
//   snappy_max_compressed_length(neblock) = 32 + neblock + neblock / 6 and is kept;
// - a block is one stream, or typesize (<= MAX_SPLITS = 16) streams of >= MIN_BUFFERSIZE
//   bytes each when split (split_block; blosc_d reads a split frame only then, so a frame
//   split otherwise (BLOSC_ALWAYS_SPLIT) is not one c-blosc can decode): at most
//   nblocks + n / 128 streams in all;
// - block sizes (compute_blocksize): 1 when n < typesize (<= 255), else at least
//   MIN_BUFFERSIZE rounded down to a multiple of a smaller typesize, so at least 65 bytes.
uint64_t MaxFrameSize(uint64_t n) {
  constexpr uint64_t kHeader = BLOSC_MAX_OVERHEAD, kMinBuffer = 128;
  if (n < kMinBuffer) return kHeader + n;
  if (n > (UINT64_MAX >> 3) / 8) return UINT64_MAX;  // far beyond any frame; no overflow below
  const uint64_t min_block = n < BLOSC_MAX_TYPESIZE ? 1 : 64;
  const uint64_t blocks = (n + min_block - 1) / min_block;
  const uint64_t streams = blocks + n / kMinBuffer;
  const uint64_t snappy_growth = 32 * streams + n / 6;
  return kHeader + 4 * blocks + 4 * streams + n + snappy_growth;
}

// Bytes a writer may store after the frame: z5 (z5py) sized its output cbytes + 16, and its
// predecessor zarr++ cbytes / itemsize + 16 items (16 items of at most 16 bytes).
constexpr uint64_t kWriterPadding = 16 * 16;

class BloscCodec final : public BytesToBytesCodec {
 public:
  std::string name() const override { return "blosc"; }
  uint64_t MaxEncodedSize(uint64_t decoded) const override {
    const uint64_t frame = MaxFrameSize(decoded);
    return frame > UINT64_MAX - kWriterPadding ? UINT64_MAX : frame + kWriterPadding;
  }
  // lsio's unshuffle holds the byte planes and, unless the input may be changed, a copy of
  // the frame (BloscScratch).
  uint64_t DecodeScratchBytes(uint64_t decoded, uint64_t stored) const override {
    return decoded <= kMaxOwnUnshuffle ? decoded + stored : 0;
  }

  Status DecodeBytes(std::span<const uint8_t> in, BytesOut& out,
                     DecodeScratch& scratch) const override {
    if (in.size() < BLOSC_MIN_HEADER_LENGTH) {
      return Status::DataLoss("blosc: frame of " + std::to_string(in.size()) +
                              " bytes is shorter than its 16-byte header");
    }
    if (in[0] != BLOSC_VERSION_FORMAT) {
      return Status::DataLoss("blosc: not a c-blosc 1.x frame (format version " + std::to_string(in[0]) +
                              ", expected " + std::to_string(BLOSC_VERSION_FORMAT) + ")");
    }
    size_t nbytes = 0, cbytes = 0, blocksize = 0;
    blosc_cbuffer_sizes(in.data(), &nbytes, &cbytes, &blocksize);
    if (cbytes < BLOSC_MIN_HEADER_LENGTH || cbytes > in.size()) {
      return Status::DataLoss("blosc: corrupt or truncated frame (header says " + std::to_string(cbytes) +
                              " compressed bytes for " + std::to_string(nbytes) + ", " + std::to_string(in.size()) +
                              " stored)");
    }
    if (nbytes > BLOSC_MAX_BUFFERSIZE) {
      return Status::DataLoss("blosc: corrupt frame (header says " + std::to_string(nbytes) +
                              " decoded bytes, more than c-blosc's limit of " + std::to_string(BLOSC_MAX_BUFFERSIZE) +
                              ")");
    }
    in = in.first(cbytes);  // bytes after the frame are a writer's padding (file comment)
    if (out.fixed != nullptr) {
      if (nbytes != out.size) return WrongSize(nbytes, out.size);
      LSIO_RETURN_IF_ERROR(DecodeFrame(in, out.in_writable, out.fixed, out.size, scratch));
      out.result = {out.fixed, out.size};
      return Status::Ok();
    }
    // Under another bytes->bytes codec: the header says the size (validated to be at most
    // BLOSC_MAX_BUFFERSIZE, about 2 GiB), and the codecs below bound it further.
    if (nbytes > out.limit) {
      return Status::DataLoss("blosc: frame decodes to " + std::to_string(nbytes) + " bytes, more than the " +
                              std::to_string(out.limit) + " the codecs below it can store for the chunk");
    }
    if (!out.grow->Reserve(nbytes)) return Status::ResourceExhausted("blosc: out of memory");
    LSIO_RETURN_IF_ERROR(DecodeFrame(in, out.in_writable, out.grow->data(), nbytes, scratch));
    out.result = {out.grow->data(), nbytes};
    return Status::Ok();
  }

 private:
  // Frames up to this many decoded bytes may take lsio's unshuffle: its two scratch buffers
  // (planes and frame copy) are as large as the chunk while a call runs, so larger chunks
  // keep c-blosc's own path, which allocates one block at a time.
  static constexpr size_t kMaxOwnUnshuffle = size_t{16} << 20;

  // Decodes a validated frame whose header says `size` decoded bytes into dst[0, size),
  // unshuffling byte-shuffled frames in lsio where that is faster (file comment).
  static Status DecodeFrame(std::span<const uint8_t> in, bool in_writable, uint8_t* dst, size_t size,
                            DecodeScratch& scratch) {
    const uint8_t flags = in[2];
    const size_t typesize = in[3];
    size_t header_nbytes = 0, header_cbytes = 0, blocksize = 0;
    blosc_cbuffer_sizes(in.data(), &header_nbytes, &header_cbytes, &blocksize);
    const bool own_unshuffle = in[0] == BLOSC_VERSION_FORMAT && (flags & BLOSC_DOSHUFFLE) != 0 &&
                               (flags & (BLOSC_MEMCPYED | BLOSC_DOBITSHUFFLE)) == 0 &&
                               UnshuffleIsVectorized(typesize) && size <= kMaxOwnUnshuffle && blocksize > 0 &&
                               blocksize <= size;
    if (!own_unshuffle) return Decompress(in, dst, size);
    BloscScratch* own = scratch.Get<BloscScratch>();
    if (own == nullptr || !own->planes.Reserve(size) || (!in_writable && !own->frame.Reserve(in.size()))) {
      return Status::ResourceExhausted("blosc: out of memory");
    }
    // The flag is cleared in the caller's buffer where it may be (restored right after),
    // else in a copy of the frame.
    uint8_t* frame = in_writable ? const_cast<uint8_t*>(in.data()) : own->frame.data();
    if (!in_writable) std::memcpy(frame, in.data(), in.size());
    frame[2] = static_cast<uint8_t>(flags & ~BLOSC_DOSHUFFLE);
    uint8_t* planes = own->planes.data();
    const int r = blosc_decompress_ctx(frame, planes, size, /*numinternalthreads=*/1);
    frame[2] = flags;  // before anything that could throw
    LSIO_RETURN_IF_ERROR(CheckDecompressed(r, size));
    // c-blosc shuffles each block on its own, the last (leftover) block with its own size.
    for (size_t off = 0; off < size; off += blocksize) {
      UnshuffleBytes(dst + off, planes + off, std::min(blocksize, size - off), typesize);
    }
    return Status::Ok();
  }

  // Decompresses a validated frame whose header says `size` decoded bytes into dst[0, size).
  static Status Decompress(std::span<const uint8_t> in, uint8_t* dst, size_t size) {
    if (size == 0) return Status::Ok();  // c-blosc returns 0 for empty frames, as for errors
    return CheckDecompressed(blosc_decompress_ctx(in.data(), dst, size, /*numinternalthreads=*/1), size);
  }

  // What blosc_decompress_ctx returned for a frame of `size` decoded bytes.
  static Status CheckDecompressed(int r, size_t size) {
    if (r < 0 || static_cast<size_t>(r) != size) {
      return Status::DataLoss("blosc: corrupt data (c-blosc returned " + std::to_string(r) + " for a frame of " +
                              std::to_string(size) + " bytes)");
    }
    return Status::Ok();
  }

  static Status WrongSize(uint64_t got, uint64_t want) {
    return Status::DataLoss("blosc: chunk decodes to " + std::to_string(got) + " bytes, expected " +
                            std::to_string(want));
  }
};

// Integer option in [lo, hi]; absent is fine (zarr-python fills defaults for missing keys).
Status CheckInt(const nlohmann::json& config, const char* key, int64_t lo, int64_t hi) {
  auto it = config.find(key);
  if (it == config.end()) return Status::Ok();
  if (!it->is_number_integer() || it->get<int64_t>() < lo || it->get<int64_t>() > hi) {
    return Status::InvalidFormat(std::string("blosc codec: \"") + key + "\" must be an integer in " +
                                 std::to_string(lo) + ".." + std::to_string(hi) + ", got " + it->dump());
  }
  return Status::Ok();
}

Status CheckString(const nlohmann::json& config, const char* key, const std::set<std::string>& allowed) {
  auto it = config.find(key);
  if (it == config.end()) return Status::Ok();
  if (!it->is_string() || allowed.count(it->get<std::string>()) == 0) {
    std::string list;
    for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
    return Status::InvalidFormat(std::string("blosc codec: \"") + key + "\" must be one of " + list + ", got " +
                                 it->dump());
  }
  return Status::Ok();
}

}  // namespace

std::unique_ptr<BytesToBytesCodec> NewBloscDecoder() { return std::make_unique<BloscCodec>(); }

Result<std::unique_ptr<Codec>> ParseBloscCodec(const nlohmann::json& config) {
  // The configuration only steers compression; each frame's header says how to decode it.
  // It is still validated so that malformed metadata is reported as such.
  LSIO_RETURN_IF_ERROR(CheckString(config, "cname", {"lz4", "lz4hc", "blosclz", "zstd", "snappy", "zlib"}));
  LSIO_RETURN_IF_ERROR(CheckString(config, "shuffle", {"noshuffle", "shuffle", "bitshuffle"}));
  LSIO_RETURN_IF_ERROR(CheckInt(config, "clevel", 0, 9));
  LSIO_RETURN_IF_ERROR(CheckInt(config, "typesize", 1, INT64_MAX));
  LSIO_RETURN_IF_ERROR(CheckInt(config, "blocksize", 0, INT64_MAX));
  return std::unique_ptr<Codec>(NewBloscDecoder());
}

}  // namespace lsio
