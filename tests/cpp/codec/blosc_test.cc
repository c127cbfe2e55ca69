// The `blosc` codec beyond the conformance suite: frames made by c-blosc's own compressor
// for every cname x shuffle x typesize (and forced block sizes, raw MEMCPYED frames) decode
// bit for bit, straight into the destination and under other codecs; corrupt headers,
// truncated frames (also with the header patched to the truncated length, which passes
// c-blosc's validation) and frames claiming another size fail with kDataLoss naming blosc,
// never writing past the chunk; decoding starts no threads; the configuration-free decoder
// (for Zarr v2's numcodecs blosc) decodes the same frames.
#include <dirent.h>

#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "codec/blosc.h"
#include "codec/codec_test_util.h"
#include "codec/registry.h"
#include "util/byte_shuffle.h"

namespace lsio {
namespace {

using lsio_test::BloscCompress;
using lsio_test::BloscOptions;
using lsio_test::Bytes;
using lsio_test::ParseChain;
using lsio_test::Spec;

constexpr size_t kGuard = 64;

std::string BloscJson(const char* cname, const char* shuffle, size_t typesize, size_t blocksize = 0) {
  return std::string(R"(["bytes", {"name": "blosc", "configuration": {"cname": ")") + cname +
         R"(", "clevel": 5, "shuffle": ")" + shuffle + R"(", "typesize": )" + std::to_string(typesize) +
         R"(, "blocksize": )" + std::to_string(blocksize) + "}}]";
}

// Decodes with a chain into a buffer followed by kGuard guard bytes and checks the guard.
Result<Bytes> DecodeGuarded(const CodecChain& chain, const Bytes& in) {
  Bytes out(chain.decoded_size() + kGuard, 0x5A);
  Status st = chain.Decode(std::span<const uint8_t>(in.data(), in.size()), out.data(), ThreadDecodeScratch());
  for (size_t i = chain.decoded_size(); i < out.size(); ++i) {
    if (out[i] != 0x5A) return Status::Internal("decode wrote past the chunk at byte " + std::to_string(i));
  }
  if (!st.ok()) return st;
  out.resize(chain.decoded_size());
  return out;
}

void ExpectBloscDataLoss(const Result<Bytes>& r, const std::string& what) {
  ASSERT_FALSE(r.ok()) << what << ": decoded without error";
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss) << what << ": " << r.status().ToString();
  EXPECT_EQ(r.status().message().rfind("blosc: ", 0), 0u) << what << ": " << r.status().message();
}

// Typed test data: elements of `typesize` bytes that shuffle well (small high bytes).
Bytes TypedData(size_t n_bytes, size_t typesize, uint64_t seed) {
  Bytes b = lsio_test::PatternBytes(n_bytes, seed);
  for (size_t i = 0; i < n_bytes; ++i) {
    if (i % typesize != 0) b[i] = static_cast<uint8_t>((i / typesize / 97) & 3);
  }
  return b;
}

TEST(BloscCodecTest, EveryCnameShuffleAndTypesizeRoundTrips) {
  std::vector<const char*> cnames = {"blosclz", "lz4", "lz4hc", "zlib", "zstd"};
  // Valid in Zarr, but c-blosc may be built without it (Debian's has it).
  if (blosc_compname_to_compcode("snappy") >= 0) cnames.push_back("snappy");
  const std::pair<int, const char*> shuffles[] = {
      {BLOSC_NOSHUFFLE, "noshuffle"}, {BLOSC_SHUFFLE, "shuffle"}, {BLOSC_BITSHUFFLE, "bitshuffle"}};
  for (const char* cname : cnames) {
    for (const auto& [shuffle, shuffle_name] : shuffles) {
      for (size_t typesize : {1u, 2u, 4u, 8u, 16u}) {
        for (size_t blocksize : {0u, 1024u}) {
          // 6000 elements: several blocks when forced to 1 KiB, and a partial last block.
          const int64_t n = 6000;
          const Bytes data = TypedData(static_cast<size_t>(n) * typesize, typesize, typesize * 31 + blocksize);
          const std::string what = std::string(cname) + "/" + shuffle_name + "/typesize " +
                                   std::to_string(typesize) + "/blocksize " + std::to_string(blocksize);
          const Bytes frame = BloscCompress(data, {.cname = cname, .clevel = 5, .shuffle = shuffle,
                                                   .typesize = typesize, .blocksize = blocksize});
          ASSERT_FALSE(frame.empty()) << what;
          auto chain = ParseChain(BloscJson(cname, shuffle_name, typesize, blocksize), Spec({n}, typesize, 1));
          ASSERT_TRUE(chain.ok()) << what << ": " << chain.status().ToString();
          auto out = DecodeGuarded(**chain, frame);
          ASSERT_TRUE(out.ok()) << what << ": " << out.status().ToString();
          EXPECT_EQ(out.value(), data) << what;
        }
      }
    }
  }
}

TEST(BloscCodecTest, IncompressibleDataIsStoredRawAndDecodes) {
  const Bytes data = lsio_test::PatternBytes(4096, 7);  // random: c-blosc falls back to MEMCPYED
  const Bytes frame = BloscCompress(data, {.cname = "lz4", .shuffle = BLOSC_NOSHUFFLE});
  ASSERT_EQ(frame.size(), data.size() + BLOSC_MAX_OVERHEAD);
  ASSERT_TRUE(frame[2] & BLOSC_MEMCPYED) << "expected a raw (MEMCPYED) frame";
  auto chain = ParseChain(BloscJson("lz4", "noshuffle", 1), Spec({4096}));
  ASSERT_TRUE(chain.ok());
  EXPECT_GE((*chain)->max_stored_size(), frame.size());
  auto out = DecodeGuarded(**chain, frame);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out.value(), data);
}

TEST(BloscCodecTest, DecodesStraightIntoTheDestination) {
  // The last stage writes into the caller's memory: nothing is staged in the scratch buffers.
  const Bytes data = TypedData(8000, 4, 3);
  const Bytes frame = BloscCompress(data, {.typesize = 4});
  auto chain = ParseChain(BloscJson("lz4", "shuffle", 4), Spec({2000}, 4, 4));
  ASSERT_TRUE(chain.ok());
  DecodeScratch scratch;
  Bytes out(8000);
  ASSERT_TRUE((*chain)->Decode(std::span<const uint8_t>(frame.data(), frame.size()), out.data(), scratch).ok());
  EXPECT_EQ(out, data);
  EXPECT_EQ(scratch.buf[0].data(), nullptr);
  EXPECT_EQ(scratch.buf[1].data(), nullptr);
}

TEST(BloscCodecTest, ByteShuffledFramesDecodeThroughLsiosUnshuffle) {
  // Where util/byte_shuffle.h has a vector kernel (AVX2; 2-, 4- and 8-byte items) lsio asks
  // c-blosc for the byte planes and unshuffles each block itself: forced block sizes that
  // leave a short last block, block sizes that are no multiple of the 32-item vector step,
  // split (lz4) and unsplit (zstd) blocks, and totals with a trailing partial item (the
  // chain's items are bytes, blosc's typesize is the header's) must all decode bit for bit.
  for (const char* cname : {"lz4", "zstd", "blosclz"}) {
    for (size_t typesize : {2u, 4u, 8u}) {
      for (size_t blocksize : {0u, 1000u, 4096u, 65536u}) {
        for (size_t nbytes : {size_t{6000} * typesize, size_t{6000} * typesize + typesize - 1, size_t{100003}}) {
          const std::string what = std::string(cname) + "/typesize " + std::to_string(typesize) + "/blocksize " +
                                   std::to_string(blocksize) + "/" + std::to_string(nbytes) + " bytes";
          const Bytes data = TypedData(nbytes, typesize, nbytes + blocksize);
          const Bytes frame = BloscCompress(data, {.cname = cname, .clevel = 5, .shuffle = BLOSC_SHUFFLE,
                                                   .typesize = typesize, .blocksize = blocksize});
          ASSERT_FALSE(frame.empty()) << what;
          ASSERT_EQ(frame[2] & (BLOSC_DOSHUFFLE | BLOSC_MEMCPYED), BLOSC_DOSHUFFLE) << what << ": not a shuffled frame";
          auto chain = ParseChain(BloscJson(cname, "shuffle", typesize, blocksize),
                                  Spec({static_cast<int64_t>(nbytes)}, 1, 1));
          ASSERT_TRUE(chain.ok()) << what << ": " << chain.status().ToString();
          DecodeScratch scratch;
          Bytes out(nbytes + kGuard, 0x5A);
          Status st = (*chain)->Decode(std::span<const uint8_t>(frame.data(), frame.size()), out.data(), scratch);
          ASSERT_TRUE(st.ok()) << what << ": " << st.ToString();
          for (size_t i = nbytes; i < out.size(); ++i) ASSERT_EQ(out[i], 0x5A) << what << ": wrote past the chunk";
          out.resize(nbytes);
          ASSERT_EQ(out, data) << what;
          // Which path ran: the planes buffer is only used by lsio's unshuffle.
          EXPECT_EQ(scratch.Get<BloscScratch>()->planes.data() != nullptr, UnshuffleIsVectorized(typesize)) << what;
        }
      }
    }
  }
}

TEST(BloscCodecTest, BlocksThatAreNoWholeNumberOfItemsMatchCBloscsOwnUnshuffle) {
  // c-blosc's compressor keeps blocks a multiple of the item size, but a frame may say
  // otherwise: an unsplit frame of 10,000 bytes in blocks of 1,001 with the header patched
  // to 4-byte items and byte shuffle. lsio's unshuffle must give what c-blosc's own does
  // (its trailing bytes of each block stay in place), block by block.
  const Bytes data = TypedData(10000, 4, 21);
  Bytes frame = BloscCompress(data, {.cname = "zstd", .shuffle = BLOSC_NOSHUFFLE, .typesize = 1, .blocksize = 1001});
  ASSERT_FALSE(frame.empty());
  uint32_t blocksize = 0;
  std::memcpy(&blocksize, frame.data() + 8, 4);
  ASSERT_EQ(blocksize, 1001u);
  ASSERT_EQ(frame[2] & BLOSC_MEMCPYED, 0) << "expected a compressed frame";
  frame[2] |= BLOSC_DOSHUFFLE | 0x10;  // shuffled, blocks not split (as they were compressed)
  frame[3] = 4;
  Bytes want(data.size());
  ASSERT_EQ(blosc_decompress_ctx(frame.data(), want.data(), want.size(), 1), static_cast<int>(want.size()));
  ASSERT_NE(want, data) << "c-blosc did not unshuffle";
  auto chain = ParseChain(BloscJson("zstd", "shuffle", 4, 1001), Spec({10000}, 1, 1));
  ASSERT_TRUE(chain.ok());
  for (bool writable : {false, true}) {
    DecodeScratch scratch;
    Bytes in = frame;
    Bytes out(data.size() + kGuard, 0x5A);
    Status st = (*chain)->Decode(std::span<const uint8_t>(in.data(), in.size()), out.data(), scratch, writable);
    ASSERT_TRUE(st.ok()) << st.ToString();
    for (size_t i = data.size(); i < out.size(); ++i) ASSERT_EQ(out[i], 0x5A) << "wrote past the chunk";
    out.resize(data.size());
    EXPECT_EQ(out, want) << (writable ? "in place" : "on a copy");
    EXPECT_EQ(in, frame);
    EXPECT_EQ(scratch.Get<BloscScratch>()->planes.data() != nullptr, UnshuffleIsVectorized(4));
  }
}

TEST(BloscCodecTest, DecodeScratchIsCountedAndTrimmed) {
  // memory_limit counts blosc's planes and frame copy (DecodeScratchBytes) on top of the
  // chain's three chunk-sized buffers; TrimCodecBuffers gives large ones back.
  auto blosc = ParseChain(BloscJson("lz4", "shuffle", 4), Spec({1000}, 4, 4));
  auto zstd = ParseChain(R"(["bytes", {"name": "zstd", "configuration": {"level": 1}}])", Spec({1000}, 4, 4));
  auto raw = ParseChain(R"(["bytes"])", Spec({1000}, 4, 4));
  ASSERT_TRUE(blosc.ok() && zstd.ok() && raw.ok());
  EXPECT_EQ((*blosc)->decode_scratch_bytes(), 3 * 4000u + 4000u + (*blosc)->max_stored_size());
  EXPECT_EQ((*zstd)->decode_scratch_bytes(), 3 * 4000u);
  EXPECT_EQ((*raw)->decode_scratch_bytes(), 0u);
  DecodeScratch scratch;
  BloscScratch& own = *scratch.Get<BloscScratch>();
  ASSERT_TRUE(own.planes.Reserve(8 << 20) && own.frame.Reserve(4096));
  scratch.TrimCodecBuffers(4 << 20);
  EXPECT_EQ(own.planes.data(), nullptr);
  EXPECT_NE(own.frame.data(), nullptr);
}

TEST(BloscCodecTest, CorruptByteShuffledFrameWritesNothingIntoTheDestination) {
  // lsio's unshuffle path decodes into scratch first: a frame c-blosc refuses leaves the
  // destination as it was (c-blosc's own path may have written blocks before failing).
  const Bytes data = TypedData(64 * 1024, 4, 11);
  // zstd: c-blosc keeps a forced block size only for codecs it does not split.
  Bytes frame = BloscCompress(data, {.cname = "zstd", .typesize = 4, .blocksize = 8192});
  if (!UnshuffleIsVectorized(4)) GTEST_SKIP() << "no AVX2: c-blosc unshuffles itself";
  // The last block start points past the frame: c-blosc decodes the blocks before it and
  // then fails.
  uint32_t blocksize = 0;
  std::memcpy(&blocksize, frame.data() + 8, 4);
  const size_t nblocks = (data.size() + blocksize - 1) / blocksize;
  ASSERT_GT(nblocks, 1u) << "block size " << blocksize;
  const uint32_t past_the_end = 0x7FFFFFF0;
  std::memcpy(frame.data() + 16 + 4 * (nblocks - 1), &past_the_end, 4);
  auto chain = ParseChain(BloscJson("zstd", "shuffle", 4, 8192), Spec({16 * 1024}, 4, 4));
  ASSERT_TRUE(chain.ok());
  Bytes out(data.size(), 0x5A);
  Status st = (*chain)->Decode(std::span<const uint8_t>(frame.data(), frame.size()), out.data(), ThreadDecodeScratch());
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kDataLoss) << st.ToString();
  EXPECT_EQ(out, Bytes(data.size(), 0x5A));
}

TEST(BloscCodecTest, AWritableInputIsUsedInPlaceAndLeftAsItWas) {
  // in_writable (a chunk file read for this chunk alone): the shuffle flag is cleared in the
  // caller's buffer instead of a copy of the frame, and set again before Decode returns, on
  // success and on failure; under crc32c the stripped frame is still the caller's buffer.
  if (!UnshuffleIsVectorized(4)) GTEST_SKIP() << "no AVX2: c-blosc unshuffles itself, the input is only read";
  const Bytes data = TypedData(64 * 1024, 4, 12);
  const Bytes frame = BloscCompress(data, {.cname = "zstd", .typesize = 4, .blocksize = 8192});
  for (bool crc : {false, true}) {
    const std::string what = crc ? "under crc32c" : "alone";
    Bytes stored = crc ? lsio_test::WithCrc(frame) : frame;
    const Bytes before = stored;
    auto chain = ParseChain(crc ? R"(["bytes", {"name": "blosc", "configuration": {"cname": "zstd", "clevel": 5, "shuffle": "shuffle", "typesize": 4}}, "crc32c"])"
                                : BloscJson("zstd", "shuffle", 4, 8192),
                            Spec({16 * 1024}, 4, 4));
    ASSERT_TRUE(chain.ok()) << what << ": " << chain.status().ToString();
    DecodeScratch scratch;
    Bytes out(data.size());
    Status st = (*chain)->Decode(std::span<const uint8_t>(stored.data(), stored.size()), out.data(), scratch,
                                 /*in_writable=*/true);
    ASSERT_TRUE(st.ok()) << what << ": " << st.ToString();
    EXPECT_EQ(out, data) << what;
    EXPECT_EQ(stored, before) << what << ": the input was not restored";
    EXPECT_EQ(scratch.Get<BloscScratch>()->frame.data(), nullptr) << what << ": the frame was copied";
    // Not writable: the same decode copies the frame.
    ASSERT_TRUE((*chain)->Decode(std::span<const uint8_t>(stored.data(), stored.size()), out.data(), scratch).ok());
    EXPECT_NE(scratch.Get<BloscScratch>()->frame.data(), nullptr) << what;
  }
  // A frame c-blosc refuses (the last block start points past the frame) is restored too.
  Bytes bad = frame;
  uint32_t blocksize = 0;
  std::memcpy(&blocksize, bad.data() + 8, 4);
  const size_t nblocks = (data.size() + blocksize - 1) / blocksize;
  ASSERT_GT(nblocks, 1u);
  const uint32_t past_the_end = 0x7FFFFFF0;
  std::memcpy(bad.data() + 16 + 4 * (nblocks - 1), &past_the_end, 4);
  const Bytes bad_before = bad;
  auto chain = ParseChain(BloscJson("zstd", "shuffle", 4, 8192), Spec({16 * 1024}, 4, 4));
  ASSERT_TRUE(chain.ok());
  Bytes out(data.size());
  Status st = (*chain)->Decode(std::span<const uint8_t>(bad.data(), bad.size()), out.data(), ThreadDecodeScratch(),
                               /*in_writable=*/true);
  EXPECT_EQ(st.code(), StatusCode::kDataLoss) << st.ToString();
  EXPECT_EQ(bad, bad_before);
}

TEST(BloscCodecTest, BigEndianTransposedChunkUnderCrc32c) {
  // [transpose, bytes(big), blosc, crc32c] on a 2x3 uint32 chunk.
  const uint32_t decoded[2][3] = {{1, 2, 3}, {0x01020304, 0xA0B0C0D0, 6}};
  Bytes stored;  // transposed (3x2), big endian
  for (int j = 0; j < 3; ++j) {
    for (int i = 0; i < 2; ++i) lsio_test::PutBE<uint32_t>(stored, decoded[i][j]);
  }
  const Bytes frame = lsio_test::WithCrc(BloscCompress(stored, {.cname = "zstd", .typesize = 4}));
  auto chain = ParseChain(R"([{"name": "transpose", "configuration": {"order": [1, 0]}},
                              {"name": "bytes", "configuration": {"endian": "big"}},
                              {"name": "blosc", "configuration": {"cname": "zstd", "clevel": 5, "shuffle": "shuffle", "typesize": 4}},
                              "crc32c"])",
                          Spec({2, 3}, 4, 4));
  ASSERT_TRUE(chain.ok()) << chain.status().ToString();
  EXPECT_EQ((*chain)->description(), "transpose, bytes(big), blosc, crc32c");
  auto out = DecodeGuarded(**chain, frame);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  Bytes want(24);
  std::memcpy(want.data(), decoded, 24);
  EXPECT_EQ(out.value(), want);
}

TEST(BloscCodecTest, TruncationAtEveryLengthIsDataLoss) {
  const Bytes data = TypedData(3000, 2, 5);
  const Bytes frame = BloscCompress(data, {.cname = "zstd", .typesize = 2, .blocksize = 512});
  auto chain = ParseChain(BloscJson("zstd", "shuffle", 2, 512), Spec({1500}, 2, 1));
  ASSERT_TRUE(chain.ok());
  for (size_t cut = 0; cut < frame.size(); ++cut) {
    ExpectBloscDataLoss(DecodeGuarded(**chain, Bytes(frame.begin(), frame.begin() + static_cast<long>(cut))),
                        "truncated to " + std::to_string(cut));
  }
}

TEST(BloscCodecTest, TruncationWithThePatchedHeaderIsDataLossWithoutOverrun) {
  // The header's cbytes is patched to the truncated length, so c-blosc's validation passes
  // and the decompressor itself must notice the missing blocks.
  const Bytes data = TypedData(20000, 4, 6);
  for (const char* cname : {"blosclz", "lz4", "lz4hc", "zlib", "zstd"}) {
    const Bytes frame = BloscCompress(data, {.cname = cname, .typesize = 4, .blocksize = 2048});
    auto chain = ParseChain(BloscJson(cname, "shuffle", 4, 2048), Spec({5000}, 4, 1));
    ASSERT_TRUE(chain.ok());
    for (size_t cut = BLOSC_MIN_HEADER_LENGTH; cut < frame.size(); cut += 7) {
      Bytes t(frame.begin(), frame.begin() + static_cast<long>(cut));
      const uint32_t cbytes = static_cast<uint32_t>(cut);
      std::memcpy(t.data() + 12, &cbytes, 4);
      auto out = DecodeGuarded(**chain, t);
      ASSERT_FALSE(out.ok() && out.value() == data) << cname << " cut " << cut;
      if (!out.ok()) {
        ASSERT_NE(out.status().code(), StatusCode::kInternal) << cname << " cut " << cut << ": " << out.status().ToString();
        ExpectBloscDataLoss(out, std::string(cname) + " cut " + std::to_string(cut));
      }
    }
  }
}

TEST(BloscCodecTest, EveryHeaderByteFlipIsRefusedOrHarmless) {
  const Bytes data = TypedData(4000, 4, 8);
  const Bytes frame = BloscCompress(data, {.cname = "lz4", .typesize = 4, .blocksize = 1024});
  auto chain = ParseChain(BloscJson("lz4", "shuffle", 4, 1024), Spec({1000}, 4, 1));
  ASSERT_TRUE(chain.ok());
  // Header (16 bytes) plus the block-start table (4 blocks x 4 bytes).
  for (size_t pos = 0; pos < 32; ++pos) {
    for (uint8_t mask : {0x01, 0x08, 0x80, 0xFF}) {
      Bytes bad = frame;
      bad[pos] ^= mask;
      auto out = DecodeGuarded(**chain, bad);
      const std::string what = "byte " + std::to_string(pos) + " ^ " + std::to_string(mask);
      if (out.ok()) continue;  // e.g. versionlz or a typesize that only changes the shuffle
      ASSERT_NE(out.status().code(), StatusCode::kInternal) << what << ": " << out.status().ToString();
      ExpectBloscDataLoss(out, what);
    }
  }
}

TEST(BloscCodecTest, FrameOfAnotherSizeIsDataLossBeforeDecoding) {
  auto chain = ParseChain(BloscJson("lz4", "shuffle", 1), Spec({1000}));
  ASSERT_TRUE(chain.ok());
  for (size_t n : {999u, 1001u, 100000u}) {
    auto out = DecodeGuarded(**chain, BloscCompress(TypedData(n, 1, n)));
    ExpectBloscDataLoss(out, std::to_string(n) + " bytes for 1000");
    EXPECT_NE(out.status().message().find("decodes to " + std::to_string(n) + " bytes, expected 1000"),
              std::string::npos)
        << out.status().message();
  }
}

TEST(BloscCodecTest, HeaderErrorsSayWhatIsWrong) {
  auto chain = ParseChain(BloscJson("lz4", "shuffle", 1), Spec({1000}));
  ASSERT_TRUE(chain.ok());
  const Bytes frame = BloscCompress(TypedData(1000, 1, 1));
  auto short_frame = DecodeGuarded(**chain, Bytes(frame.begin(), frame.begin() + 10));
  ExpectBloscDataLoss(short_frame, "10 bytes");
  EXPECT_EQ(short_frame.status().message(), "blosc: frame of 10 bytes is shorter than its 16-byte header");
  Bytes v3 = frame;
  v3[0] = 3;  // a c-blosc2 frame version
  auto future = DecodeGuarded(**chain, v3);
  ExpectBloscDataLoss(future, "version 3");
  EXPECT_EQ(future.status().message(), "blosc: not a c-blosc 1.x frame (format version 3, expected 2)");
  Bytes cut(frame.begin(), frame.end() - 1);
  auto truncated = DecodeGuarded(**chain, cut);
  ExpectBloscDataLoss(truncated, "one byte short");
  EXPECT_EQ(truncated.status().message(),
            "blosc: corrupt or truncated frame (header says " + std::to_string(frame.size()) +
                " compressed bytes for 1000, " + std::to_string(cut.size()) + " stored)");
  Bytes tiny = frame;
  const uint32_t fifteen = 15;  // less than the header itself
  std::memcpy(tiny.data() + 12, &fifteen, 4);
  auto below_header = DecodeGuarded(**chain, tiny);
  ExpectBloscDataLoss(below_header, "cbytes 15");
  EXPECT_NE(below_header.status().message().find("header says 15 compressed bytes"), std::string::npos);
  Bytes beyond = frame;
  const uint32_t too_big = 0x7FFFFFFFu;  // above BLOSC_MAX_BUFFERSIZE
  std::memcpy(beyond.data() + 4, &too_big, 4);
  auto huge = DecodeGuarded(**chain, beyond);
  ExpectBloscDataLoss(huge, "nbytes 2^31 - 1");
  EXPECT_NE(huge.status().message().find("more than c-blosc's limit"), std::string::npos);
}

TEST(BloscCodecTest, BytesAfterTheFrameAreIgnored) {
  // z5py stored every frame followed by 16 bytes (cbytes + BLOSC_MAX_OVERHEAD; see
  // tests/data/z5py_blosc.zr): c-blosc and numcodecs decode the frame the header describes.
  for (size_t n : {100u, 10000u}) {
    for (int clevel : {0, 5}) {  // MEMCPYED (as z5py's chunk 0.0.0) and compressed
      const Bytes data = TypedData(n, 1, n + clevel);
      const Bytes frame = BloscCompress(data, {.cname = "lz4", .clevel = clevel});
      auto chain = ParseChain(BloscJson("lz4", "shuffle", 1), Spec({static_cast<int64_t>(n)}));
      ASSERT_TRUE(chain.ok());
      for (size_t pad : {1u, 16u, 256u}) {
        Bytes padded = frame;
        padded.resize(frame.size() + pad, 0);
        EXPECT_LE(padded.size(), (*chain)->max_stored_size()) << n << " + " << pad;
        auto out = DecodeGuarded(**chain, padded);
        ASSERT_TRUE(out.ok()) << n << " clevel " << clevel << " + " << pad << ": " << out.status().ToString();
        EXPECT_EQ(out.value(), data);
      }
    }
  }
}

// Every compressor this c-blosc has ("snappy" only where it was built with it).
std::vector<std::string> BloscCompressors() {
  std::vector<std::string> names;
  std::string all = blosc_list_compressors();
  for (size_t at = 0; at <= all.size();) {
    const size_t end = std::min(all.find(',', at), all.size());
    names.push_back(all.substr(at, end - at));
    at = end + 1;
  }
  return names;
}

TEST(BloscCodecTest, MaxEncodedSizeHoldsEveryFrameCBloscWrites) {
  // Given room, c-blosc keeps frames whose blocks did not compress: raw blocks behind their
  // starts and stream sizes, beyond nbytes + 16 (and snappy's output beyond its input). The
  // read layer refuses stored chunks above MaxEncodedSize, so it must hold them all.
  size_t above_old_bound = 0;
  for (size_t n : {128u, 200u, 254u, 255u, 1000u, 10000u}) {
    auto chain = ParseChain(BloscJson("lz4", "noshuffle", 1), Spec({static_cast<int64_t>(n)}));
    ASSERT_TRUE(chain.ok());
    const uint64_t bound = (*chain)->max_stored_size();
    const Bytes data = lsio_test::PatternBytes(n, n);  // random: nothing compresses
    for (const std::string& cname : BloscCompressors()) {
      for (size_t typesize : {1u, 2u, 4u, 16u, 65u, 255u}) {
        for (size_t blocksize : {0u, 128u, 256u}) {
          for (int shuffle : {BLOSC_NOSHUFFLE, BLOSC_SHUFFLE}) {
            Bytes frame(4 * n + 4096);  // room to spare: c-blosc keeps what it wrote
            const int got = blosc_compress_ctx(5, shuffle, typesize, n, data.data(), frame.data(), frame.size(),
                                               cname.c_str(), blocksize, 1);
            ASSERT_GT(got, 0) << cname;
            frame.resize(static_cast<size_t>(got));
            const std::string what = cname + " n=" + std::to_string(n) + " typesize=" + std::to_string(typesize) +
                                     " blocksize=" + std::to_string(blocksize) + " shuffle=" + std::to_string(shuffle);
            EXPECT_LE(frame.size(), bound) << what;
            above_old_bound += frame.size() > n + BLOSC_MAX_OVERHEAD;
            auto out = DecodeGuarded(**chain, frame);
            ASSERT_TRUE(out.ok()) << what << ": " << out.status().ToString();
            EXPECT_EQ(out.value(), data) << what;
          }
        }
      }
    }
  }
  EXPECT_GT(above_old_bound, 0u) << "no frame above nbytes + 16: the test lost its point";
}

TEST(BloscCodecTest, HugeClaimUnderAnotherCodecIsRefusedWithoutAllocating) {
  // Under zstd the blosc stage decodes into a growable buffer sized from the header: a
  // header claiming more than c-blosc's 2 GiB limit is refused by validation.
  Bytes frame = BloscCompress(TypedData(1000, 1, 2));
  const uint32_t huge = 0xFFFFFFF0u;
  std::memcpy(frame.data() + 4, &huge, 4);
  auto chain = ParseChain(R"(["bytes", {"name": "blosc", "configuration": {"cname": "lz4"}}, {"name": "zstd"}])",
                          Spec({1000}));
  ASSERT_TRUE(chain.ok()) << chain.status().ToString();
  ExpectBloscDataLoss(DecodeGuarded(**chain, lsio_test::ZstdCompress(frame)), "nbytes 0xFFFFFFF0");
}

size_t ThreadCount() {
  size_t n = 0;
  if (DIR* d = opendir("/proc/self/task")) {
    while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
    closedir(d);
  }
  return n;
}

TEST(BloscCodecTest, DecodingStartsNoThreads) {
  // lsio's workers are the parallelism: c-blosc must decode on the calling thread.
  const Bytes data = TypedData(1 << 20, 4, 9);  // many blocks, where c-blosc would split work
  const Bytes frame = BloscCompress(data, {.cname = "lz4", .typesize = 4, .blocksize = 16384});
  auto chain = ParseChain(BloscJson("lz4", "shuffle", 4, 16384), Spec({1 << 18}, 4, 1));
  ASSERT_TRUE(chain.ok());
  const size_t before = ThreadCount();
  ASSERT_GT(before, 0u);
  auto out = DecodeGuarded(**chain, frame);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out.value(), data);
  EXPECT_EQ(ThreadCount(), before);
}

TEST(BloscCodecTest, ConfigurationFreeDecoderReadsTheSameFrames) {
  // What Zarr v2's numcodecs `blosc` compressor will use: no v3 configuration at all.
  std::unique_ptr<BytesToBytesCodec> decoder = NewBloscDecoder();
  EXPECT_EQ(decoder->name(), "blosc");
  EXPECT_EQ(decoder->kind(), CodecKind::kBytesToBytes);
  const Bytes data = TypedData(5000, 8, 4);
  const Bytes frame = BloscCompress(data, {.cname = "zlib", .shuffle = BLOSC_BITSHUFFLE, .typesize = 8});
  Bytes out(5000);
  BytesOut o;
  o.fixed = out.data();
  o.size = out.size();
  ASSERT_TRUE(decoder->DecodeBytes(std::span<const uint8_t>(frame.data(), frame.size()), o, ThreadDecodeScratch()).ok());
  EXPECT_EQ(out, data);
  EXPECT_EQ(o.result.data(), out.data());
}

TEST(BloscCodecTest, ConfigurationKeysAreOptionalAndValidated) {
  EXPECT_TRUE(ParseCodec(nlohmann::json("blosc")).ok());
  EXPECT_TRUE(ParseCodec(nlohmann::json::parse(R"({"name": "blosc", "configuration": {"cname": "snappy", "shuffle": "noshuffle"}})")).ok());
  EXPECT_TRUE(ParseCodec(nlohmann::json::parse(R"({"name": "blosc", "configuration": {"typesize": 1024}})")).ok());
  for (const char* bad : {R"({"cname": 1})", R"({"cname": "LZ4"})", R"({"clevel": -1})", R"({"clevel": "5"})",
                          R"({"shuffle": "byte"})", R"({"typesize": 1.5})", R"({"blocksize": "auto"})"}) {
    auto c = ParseCodec({{"name", "blosc"}, {"configuration", nlohmann::json::parse(bad)}});
    ASSERT_FALSE(c.ok()) << bad;
    EXPECT_EQ(c.status().code(), StatusCode::kInvalidFormat) << bad;
    EXPECT_EQ(c.status().message().rfind("blosc codec: ", 0), 0u) << c.status().message();
  }
}

}  // namespace
}  // namespace lsio
