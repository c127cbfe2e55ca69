// libFuzzer target: codec chain decoding (lsio::ParseCodecChain + CodecChain::Decode).
//
// Byte 0 picks one of a few fixed chains (zstd, gzip, blosc, crc32c, bytes big-endian,
// transpose, and combinations); the rest of the input is a stored chunk, decoded into a heap buffer of
// exactly decoded_size() bytes (so ASan sees any write past it). Decode must succeed or fail
// with a Status, never crash, hang or write out of bounds; decoding from a writable copy
// (in_writable) must give the same result and leave the copy as it was.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>
#include <vector>

#include <nlohmann/json.hpp>

#include "codec/chain.h"
#include "codec/registry.h"

namespace {

struct FixedChain {
  const char* codecs;
  std::vector<int64_t> shape;
  size_t itemsize;
  size_t swap_unit;
};

const std::vector<FixedChain>& Chains() {
  static const std::vector<FixedChain> chains = {
      {R"([{"name":"bytes","configuration":{"endian":"little"}},{"name":"zstd","configuration":{"level":0,"checksum":false}}])", {4, 8}, 2, 2},
      {R"([{"name":"bytes","configuration":{"endian":"little"}},{"name":"zstd","configuration":{"level":0,"checksum":true}},{"name":"crc32c"}])", {4, 8}, 4, 4},
      {R"([{"name":"bytes","configuration":{"endian":"little"}},{"name":"gzip","configuration":{"level":1}}])", {16}, 4, 4},
      {R"([{"name":"bytes","configuration":{"endian":"little"}},{"name":"crc32c"}])", {3, 5}, 2, 2},
      {R"([{"name":"bytes","configuration":{"endian":"big"}}])", {2, 3}, 8, 8},
      {R"([{"name":"bytes","configuration":{"endian":"big"}}])", {6}, 8, 4},  // complex64
      {R"([{"name":"transpose","configuration":{"order":[1,0]}},{"name":"bytes","configuration":{"endian":"little"}}])", {3, 4}, 4, 4},
      {R"([{"name":"transpose","configuration":{"order":[2,0,1]}},{"name":"bytes","configuration":{"endian":"big"}},{"name":"zstd","configuration":{"level":0,"checksum":false}},{"name":"crc32c"}])", {2, 3, 4}, 8, 8},
      {R"([{"name":"bytes","configuration":{"endian":"little"}},{"name":"zstd","configuration":{"level":0,"checksum":false}},{"name":"gzip","configuration":{"level":1}}])", {8, 8}, 1, 1},
      {R"([{"name":"bytes","configuration":{"endian":"little"}},{"name":"crc32c"},{"name":"zstd","configuration":{"level":0,"checksum":false}}])", {5, 7}, 2, 2},
      // blosc: decoded straight into the destination, under crc32c, and (under zstd) into a
      // growable buffer sized from the frame header.
      {R"([{"name":"bytes","configuration":{"endian":"little"}},{"name":"blosc","configuration":{"cname":"lz4","clevel":5,"shuffle":"shuffle","typesize":2,"blocksize":0}}])", {16, 16}, 2, 2},
      {R"([{"name":"bytes","configuration":{"endian":"little"}},{"name":"blosc","configuration":{"cname":"zstd","clevel":5,"shuffle":"bitshuffle","typesize":8,"blocksize":0}},{"name":"crc32c"}])", {8, 8}, 8, 8},
      {R"([{"name":"bytes","configuration":{"endian":"little"}},{"name":"blosc","configuration":{"cname":"blosclz","clevel":5,"shuffle":"noshuffle","typesize":4,"blocksize":0}},{"name":"zstd","configuration":{"level":0,"checksum":false}}])", {64}, 4, 4},
      {R"([{"name":"transpose","configuration":{"order":[1,0]}},{"name":"bytes","configuration":{"endian":"big"}},{"name":"blosc","configuration":{"cname":"zlib","clevel":5,"shuffle":"shuffle","typesize":4,"blocksize":0}}])", {4, 6}, 4, 4},
      // numcodecs' shuffle and lz4 (Zarr v2 filters/compressor, v3 numcodecs.zarr3 names).
      {R"([{"name":"bytes","configuration":{"endian":"little"}},{"name":"numcodecs.shuffle","configuration":{"elementsize":4}},{"name":"numcodecs.lz4","configuration":{"acceleration":1}}])", {16, 16}, 4, 4},
      // HDF5 filters (python/lsio/_hdf5.py's codecs): LZ4 (32004) and bitshuffle (32008).
      {R"([{"name":"bytes","configuration":{"endian":"little"}},{"name":"lsio.hdf5.lz4","configuration":{"blocksize":64}}])", {16, 16}, 2, 2},
      {R"([{"name":"bytes","configuration":{"endian":"little"}},{"name":"lsio.hdf5.bitshuffle","configuration":{"elementsize":4,"blocksize":0,"compression":"lz4"}}])", {16, 16}, 4, 4},
      {R"([{"name":"bytes","configuration":{"endian":"little"}},{"name":"lsio.hdf5.bitshuffle","configuration":{"elementsize":2,"blocksize":24,"compression":"zstd"}}])", {100}, 2, 2},
      {R"([{"name":"bytes","configuration":{"endian":"little"}},{"name":"lsio.hdf5.bitshuffle","configuration":{"elementsize":4,"blocksize":8,"compression":"none"}}])", {37}, 4, 4},
  };
  return chains;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const FixedChain& fc = Chains()[data[0] % Chains().size()];
  lsio::ChunkSpec spec;
  spec.shape = fc.shape;
  spec.itemsize = fc.itemsize;
  spec.swap_unit = fc.swap_unit;
  auto chain = lsio::ParseCodecChain(nlohmann::json::parse(fc.codecs), spec);
  if (!chain.ok()) __builtin_trap();  // the fixed chains are all valid
  const size_t n = (*chain)->decoded_size();
  std::unique_ptr<uint8_t, decltype(&std::free)> out(static_cast<uint8_t*>(std::malloc(n)), &std::free);
  // libFuzzer's input is itself an exact-size heap copy, so reads past it are caught too.
  const std::span<const uint8_t> stored(data + 1, size - 1);
  lsio::DecodeScratch scratch;
  const lsio::Status first = (*chain)->Decode(stored, out.get(), scratch);
  // Again with the same scratch: state left by a failed decode must not affect the next one.
  (void)(*chain)->Decode(stored, out.get(), scratch);
  // From a writable copy (a chunk file's own read buffer): the same outcome, the same bytes,
  // and the copy exactly as it was afterwards.
  std::unique_ptr<uint8_t, decltype(&std::free)> copy(static_cast<uint8_t*>(std::malloc(std::max<size_t>(stored.size(), 1))), &std::free);
  std::unique_ptr<uint8_t, decltype(&std::free)> out2(static_cast<uint8_t*>(std::malloc(n)), &std::free);
  std::memcpy(copy.get(), stored.data(), stored.size());
  const lsio::Status second =
      (*chain)->Decode({copy.get(), stored.size()}, out2.get(), scratch, /*in_writable=*/true);
  if (first.ok() != second.ok()) __builtin_trap();
  if (first.ok() && std::memcmp(out.get(), out2.get(), n) != 0) __builtin_trap();
  if (std::memcmp(copy.get(), stored.data(), stored.size()) != 0) __builtin_trap();
  return 0;
}
