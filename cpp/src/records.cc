// The engine side of zrecord stores (lsio/records.h): whole-entry loads and stores of the
// offset table, and record payloads compressed and decoded on the worker pool.
#include "lsio/records.h"

#include <libdeflate.h>
#include <zstd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>

#include "read/executor.h"  // ProcessWorkerPool
#include "util/thread_pool.h"

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

namespace lsio {
namespace {

Status CheckTable(const uint8_t* table, uint64_t count, std::span<const int64_t> ids) {
  if (reinterpret_cast<uintptr_t>(table) % kRecordEntryBytes != 0) {
    return Status::InvalidArgument("the offset table is not 16-byte aligned");
  }
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || static_cast<uint64_t>(ids[i]) >= count) {
      return Status::InvalidArgument("record id " + std::to_string(ids[i]) + " is outside the offset table's " +
                                     std::to_string(count) + " entries");
    }
  }
  return Status::Ok();
}

#if defined(__x86_64__)
// One aligned 16-byte move each way (see lsio/records.h for why this is atomic).
inline void Load16(const uint8_t* p, uint8_t* out) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm_load_si128(reinterpret_cast<const __m128i*>(p)));
}
inline void Store16(uint8_t* p, const uint8_t* in) {
  _mm_store_si128(reinterpret_cast<__m128i*>(p), _mm_loadu_si128(reinterpret_cast<const __m128i*>(in)));
}
#else
// Elsewhere the compiler's 16-byte atomics (aarch64: LSE2's single-copy-atomic LDP/STP,
// else an exclusive pair loop).
inline void Load16(const uint8_t* p, uint8_t* out) {
  const unsigned __int128 v = __atomic_load_n(reinterpret_cast<const unsigned __int128*>(p), __ATOMIC_ACQUIRE);
  std::memcpy(out, &v, 16);
}
inline void Store16(uint8_t* p, const uint8_t* in) {
  unsigned __int128 v;
  std::memcpy(&v, in, 16);
  __atomic_store_n(reinterpret_cast<unsigned __int128*>(p), v, __ATOMIC_RELEASE);
}
#endif

// Little-endian fields (lsio is built for little-endian hosts only: the Zarr layer says so).
RecordEntry Unpack(const uint8_t* b) {
  RecordEntry e;
  std::memcpy(&e.chunk, b, 4);
  std::memcpy(&e.offset, b + 4, 8);
  std::memcpy(&e.length, b + 12, 4);
  return e;
}
void Pack(const RecordEntry& e, uint8_t* b) {
  std::memcpy(b, &e.chunk, 4);
  std::memcpy(b + 4, &e.offset, 8);
  std::memcpy(b + 12, &e.length, 4);
}

uint32_t ReadU32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// Per-thread library contexts: created on a thread's first use, kept for its life. They
// hold no locks, so a forked child may keep using the forking thread's.
struct ZstdContexts {
  ZSTD_CCtx* c = nullptr;
  ZSTD_DCtx* d = nullptr;
  ~ZstdContexts() {
    ZSTD_freeCCtx(c);
    ZSTD_freeDCtx(d);
  }
};
struct DeflateContexts {
  libdeflate_compressor* c = nullptr;
  int c_level = -1;
  libdeflate_decompressor* d = nullptr;
  ~DeflateContexts() {
    if (c != nullptr) libdeflate_free_compressor(c);
    if (d != nullptr) libdeflate_free_decompressor(d);
  }
};
thread_local ZstdContexts t_zstd;
thread_local DeflateContexts t_deflate;

// Runs body(i) for i in [0, n) on the caller and up to threads - 1 pool threads, stopping
// at the first failure, which is returned with its index.
Status ParallelFor(size_t n, int threads, const std::function<Status(size_t)>& body, size_t* failed_index) {
  int workers = threads > 0 ? threads : AvailableCpus();
  workers = static_cast<int>(std::min<size_t>(static_cast<size_t>(std::max(1, workers)), std::max<size_t>(n, 1)));
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex mu;
  Status first = Status::Ok();
  size_t first_index = 0;
  // Small items are taken in runs so the counter is not the bottleneck.
  const size_t step = std::max<size_t>(1, std::min<size_t>(64, n / (static_cast<size_t>(workers) * 8 + 1)));
  auto work = [&] {
    try {
      for (;;) {
        if (failed.load(std::memory_order_relaxed)) return;
        const size_t begin = next.fetch_add(step);
        if (begin >= n) return;
        const size_t end = std::min(n, begin + step);
        for (size_t i = begin; i < end; ++i) {
          Status st = body(i);
          if (!st.ok()) {
            std::lock_guard<std::mutex> lock(mu);
            if (!failed.exchange(true) || i < first_index) {
              first = std::move(st);
              first_index = i;
            }
            return;
          }
        }
      }
    } catch (const std::bad_alloc&) {
      std::lock_guard<std::mutex> lock(mu);
      if (!failed.exchange(true)) first = Status::ResourceExhausted("cannot allocate memory for a record codec");
    }
  };
  ThreadPool* pool = nullptr;
  if (workers > 1) {
    pool = &ProcessWorkerPool();
    workers = 1 + std::min(workers - 1, pool->EnsureThreads(workers - 1));
  }
  RunOnWorkers(pool, workers - 1, work);
  if (failed.load()) {
    if (failed_index != nullptr) *failed_index = first_index;
    return first;
  }
  return Status::Ok();
}

// Deflate's densest encoding (a 258-byte match in about 2 bits) bounds inflation at 1032:1
// (zlib's technical notes); a claim above it is a corrupt prefix, not a record.
constexpr uint64_t kDeflateMaxRatio = 1032;

}  // namespace

Status LoadRecordEntries(const uint8_t* table, uint64_t count, std::span<const int64_t> ids, RecordEntry* out) {
  LSIO_RETURN_IF_ERROR(CheckTable(table, count, ids));
  alignas(16) uint8_t b[16];
  for (size_t i = 0; i < ids.size(); ++i) {
    Load16(table + static_cast<uint64_t>(ids[i]) * kRecordEntryBytes, b);
    out[i] = Unpack(b);
  }
  return Status::Ok();
}

Status StoreRecordEntries(uint8_t* table, uint64_t count, std::span<const int64_t> ids,
                          std::span<const RecordEntry> entries) {
  if (entries.size() != ids.size()) return Status::InvalidArgument("ids and entries differ in length");
  LSIO_RETURN_IF_ERROR(CheckTable(table, count, ids));
  alignas(16) uint8_t b[16];
  for (size_t i = 0; i < ids.size(); ++i) {
    Pack(entries[i], b);
    Store16(table + static_cast<uint64_t>(ids[i]) * kRecordEntryBytes, b);
  }
  return Status::Ok();
}

Status CompressRecords(RecordCompression compression, int level, const uint8_t* values, size_t values_size,
                       std::span<const uint64_t> offsets, int threads, std::vector<uint8_t>* out,
                       std::vector<uint64_t>* out_offsets) {
  if (compression == RecordCompression::kNone) return Status::InvalidArgument("CompressRecords: no compression named");
  if (compression == RecordCompression::kZstd && (level < -131072 || level > ZSTD_maxCLevel())) {
    return Status::InvalidArgument("zstd level " + std::to_string(level) + " is outside -131072.." +
                                   std::to_string(ZSTD_maxCLevel()));
  }
  if (compression == RecordCompression::kDeflate && (level < 0 || level > 12)) {
    return Status::InvalidArgument("deflate level " + std::to_string(level) + " is outside 0..12");
  }
  if (offsets.empty()) return Status::InvalidArgument("offsets must have n + 1 entries");
  const size_t n = offsets.size() - 1;
  for (size_t i = 0; i < n; ++i) {
    if (offsets[i] > offsets[i + 1] || offsets[i + 1] > values_size) {
      return Status::InvalidArgument("record offsets must be non-decreasing and within the values");
    }
    if (offsets[i + 1] - offsets[i] >= (uint64_t{1} << 32)) {
      return Status::InvalidArgument("record " + std::to_string(i) + " has " + std::to_string(offsets[i + 1] - offsets[i]) +
                                     " bytes; a record holds less than 4 GiB");
    }
  }
  try {
    // Each record gets its worst-case room in one staging buffer, then is packed down.
    std::vector<uint64_t> room(n + 1, 0);
    for (size_t i = 0; i < n; ++i) {
      const size_t len = offsets[i + 1] - offsets[i];
      const size_t bound = compression == RecordCompression::kZstd ? ZSTD_compressBound(len)
                                                                  : libdeflate_zlib_compress_bound(nullptr, len);
      room[i + 1] = room[i] + kRecordPrefixBytes + bound;
    }
    std::vector<uint8_t> staging(room[n]);
    std::vector<uint64_t> used(n, 0);
    Status st = ParallelFor(n, threads, [&](size_t i) -> Status {
      const uint8_t* src = values + offsets[i];
      const size_t len = offsets[i + 1] - offsets[i];
      uint8_t* dst = staging.data() + room[i];
      const uint32_t len32 = static_cast<uint32_t>(len);
      std::memcpy(dst, &len32, 4);
      const size_t cap = room[i + 1] - room[i] - kRecordPrefixBytes;
      size_t wrote = 0;
      if (compression == RecordCompression::kZstd) {
        if (t_zstd.c == nullptr && (t_zstd.c = ZSTD_createCCtx()) == nullptr) throw std::bad_alloc();
        ZSTD_CCtx_reset(t_zstd.c, ZSTD_reset_session_and_parameters);
        ZSTD_CCtx_setParameter(t_zstd.c, ZSTD_c_compressionLevel, level);
        ZSTD_CCtx_setParameter(t_zstd.c, ZSTD_c_contentSizeFlag, 1);
        // A flipped bit in a frame's literals can decode without error into other bytes:
        // the frame's XXH64 checksum (4 bytes) makes the decode notice.
        ZSTD_CCtx_setParameter(t_zstd.c, ZSTD_c_checksumFlag, 1);
        wrote = ZSTD_compress2(t_zstd.c, dst + kRecordPrefixBytes, cap, src, len);
        if (ZSTD_isError(wrote)) {
          return Status::Internal(std::string("zstd compression failed: ") + ZSTD_getErrorName(wrote));
        }
      } else {
        if (t_deflate.c == nullptr || t_deflate.c_level != level) {
          if (t_deflate.c != nullptr) libdeflate_free_compressor(t_deflate.c);
          t_deflate.c = libdeflate_alloc_compressor(level);
          t_deflate.c_level = level;
          if (t_deflate.c == nullptr) throw std::bad_alloc();
        }
        wrote = libdeflate_zlib_compress(t_deflate.c, src, len, dst + kRecordPrefixBytes, cap);
        if (wrote == 0) return Status::Internal("deflate compression did not fit its bound");
      }
      used[i] = kRecordPrefixBytes + wrote;
      return Status::Ok();
    }, nullptr);
    LSIO_RETURN_IF_ERROR(st);
    out_offsets->assign(n + 1, 0);
    for (size_t i = 0; i < n; ++i) (*out_offsets)[i + 1] = (*out_offsets)[i] + used[i];
    out->resize((*out_offsets)[n]);
    for (size_t i = 0; i < n; ++i) {
      std::memcpy(out->data() + (*out_offsets)[i], staging.data() + room[i], used[i]);
    }
    return Status::Ok();
  } catch (const std::bad_alloc&) {
    return Status::ResourceExhausted("cannot allocate memory to compress " + std::to_string(n) + " records");
  }
}

Result<uint64_t> RecordDecodedSize(RecordCompression compression, std::span<const uint8_t> payload) {
  if (compression == RecordCompression::kNone) return static_cast<uint64_t>(payload.size());
  if (payload.size() < kRecordPrefixBytes) {
    return Status::DataLoss("compressed record of " + std::to_string(payload.size()) +
                            " bytes is shorter than its 4-byte length prefix");
  }
  const uint64_t claim = ReadU32(payload.data());
  const std::span<const uint8_t> frame = payload.subspan(kRecordPrefixBytes);
  if (compression == RecordCompression::kZstd) {
    // A real frame (a skippable frame would "decode" to nothing without complaint)...
    if (frame.size() < 4 || ReadU32(frame.data()) != ZSTD_MAGICNUMBER) {
      return Status::DataLoss("compressed record: not a zstd frame");
    }
    const unsigned long long size = ZSTD_getFrameContentSize(frame.data(), frame.size());
    if (size == ZSTD_CONTENTSIZE_ERROR || size == ZSTD_CONTENTSIZE_UNKNOWN) {
      return Status::DataLoss("compressed record: not a zstd frame with a declared size");
    }
    if (size != claim) {
      return Status::DataLoss("compressed record: its prefix says " + std::to_string(claim) + " bytes, its zstd frame " +
                              std::to_string(size));
    }
    // ...whose claim its blocks can meet: a block (3-byte header, at least 1 byte) holds at
    // most 128 KiB, so a forged size cannot make the caller allocate gigabytes.
    const uint64_t most = (frame.size() / 4 + 1) * uint64_t{ZSTD_BLOCKSIZE_MAX};
    if (claim > most) {
      return Status::DataLoss("compressed record: its prefix says " + std::to_string(claim) + " bytes, more than a " +
                              std::to_string(frame.size()) + "-byte zstd frame can hold");
    }
    return claim;
  }
  if (claim > kDeflateMaxRatio * frame.size() + 64) {
    return Status::DataLoss("compressed record: its prefix says " + std::to_string(claim) + " bytes, more than a " +
                            std::to_string(frame.size()) + "-byte deflate stream can hold");
  }
  return claim;
}

namespace {

// Decodes one payload (prefix included) into exactly w.dst_size bytes, checking it whole.
Status DecodeOne(RecordCompression compression, const RecordDecode& w) {
  if (w.src_size < kRecordPrefixBytes || ReadU32(w.src) != w.dst_size) {
    return Status::DataLoss("compressed record: length prefix does not match " + std::to_string(w.dst_size) + " bytes");
  }
  const uint8_t* frame = w.src + kRecordPrefixBytes;
  const size_t frame_size = w.src_size - kRecordPrefixBytes;
  if (compression == RecordCompression::kZstd) {
    if (t_zstd.d == nullptr && (t_zstd.d = ZSTD_createDCtx()) == nullptr) throw std::bad_alloc();
    const size_t r = ZSTD_decompressDCtx(t_zstd.d, w.dst, w.dst_size, frame, frame_size);
    if (ZSTD_isError(r)) return Status::DataLoss(std::string("zstd: corrupt record: ") + ZSTD_getErrorName(r));
    if (r != w.dst_size) {
      return Status::DataLoss("zstd: record decodes to " + std::to_string(r) + " bytes, expected " +
                              std::to_string(w.dst_size));
    }
    return Status::Ok();
  }
  if (t_deflate.d == nullptr && (t_deflate.d = libdeflate_alloc_decompressor()) == nullptr) throw std::bad_alloc();
  size_t in_used = 0, out_got = 0;
  const libdeflate_result r =
      libdeflate_zlib_decompress_ex(t_deflate.d, frame, frame_size, w.dst, w.dst_size, &in_used, &out_got);
  if (r != LIBDEFLATE_SUCCESS) {
    return Status::DataLoss(r == LIBDEFLATE_INSUFFICIENT_SPACE ? "deflate: record decodes to more than its declared " +
                                                                     std::to_string(w.dst_size) + " bytes"
                                                               : std::string("deflate: corrupt record (bad stream or "
                                                                             "Adler-32 mismatch)"));
  }
  if (out_got != w.dst_size || in_used != frame_size) {
    return Status::DataLoss("deflate: record decodes to " + std::to_string(out_got) + " bytes from " +
                            std::to_string(in_used) + " of " + std::to_string(frame_size) + " stored, expected " +
                            std::to_string(w.dst_size) + " from all");
  }
  return Status::Ok();
}

}  // namespace

Status DecodeRecords(RecordCompression compression, std::span<const RecordDecode> work, int threads,
                     size_t* failed_index) {
  if (compression == RecordCompression::kNone) return Status::InvalidArgument("DecodeRecords: no compression named");
  return ParallelFor(work.size(), threads, [&](size_t i) { return DecodeOne(compression, work[i]); }, failed_index);
}

Status GatherRecords(RecordCompression compression, const std::vector<RangeSource>& sources,
                     std::span<const ByteRange> payloads, const RangeOptions& options,
                     const std::function<bool()>& interrupted, GatheredRecords* out, size_t* failed_index,
                     RangeStats* stats) {
  if (compression == RecordCompression::kNone) return Status::InvalidArgument("GatherRecords: no compression named");
  const size_t n = payloads.size();
  try {
    out->compression = compression;
    out->payloads.resize(n);
    for (size_t i = 0; i < n; ++i) {
      out->payloads[i] = {static_cast<const uint8_t*>(payloads[i].dst), static_cast<size_t>(payloads[i].length)};
    }
    out->decoded.clear();
    out->decoded.resize(n);
    out->sizes.assign(n, 0);
  } catch (const std::bad_alloc&) {
    return Status::ResourceExhausted("cannot allocate memory for the gathered records");
  }
  // The corrupt payload of lowest position among those met before the call stopped.
  std::mutex mu;
  bool corrupt = false;
  size_t corrupt_index = 0;
  Status corrupt_status;
  auto note_corrupt = [&](size_t i, const Status& st) {
    std::lock_guard<std::mutex> lock(mu);
    if (!corrupt || i < corrupt_index) {
      corrupt = true;
      corrupt_index = i;
      corrupt_status = st;
    }
  };
  auto decode_payload = [&](size_t i) -> Status {
    Result<uint64_t> size = RecordDecodedSize(compression, out->payloads[i]);
    if (!size.ok()) return size.status();
    std::unique_ptr<uint8_t[]> dst(new (std::nothrow) uint8_t[std::max<uint64_t>(1, size.value())]);
    if (dst == nullptr) return Status::ResourceExhausted("cannot allocate memory for a decoded record");
    LSIO_RETURN_IF_ERROR(DecodeOne(compression, {out->payloads[i].data(), out->payloads[i].size(), dst.get(),
                                                 size.value()}));
    out->decoded[i] = std::move(dst);
    out->sizes[i] = size.value();
    return Status::Ok();
  };
  // Runs inside the reader's completion loop, which must not be unwound (reads in flight
  // write into the payload buffers): failures are returned, never thrown.
  auto on_range = [&](size_t i, bool waited) -> Status {
    // A page-cache hit is decoded in place by PlaceRecords. So is a remote payload: remote
    // reads finish on the one thread that streams them, where decoding would serialise
    // what PlaceRecords spreads over the workers once the (usually slower) transfer is done.
    if (!waited || sources[payloads[i].source].remote != nullptr) return Status::Ok();
    try {
      Status st = decode_payload(i);
      if (st.code() == StatusCode::kDataLoss) note_corrupt(i, st);
      return st;
    } catch (const std::bad_alloc&) {
      return Status::ResourceExhausted("cannot allocate memory for a record codec");
    }
  };
  // Neighbouring payloads (a take of consecutive ids) merge into one read whose records are
  // then decoded one after another on the worker that read it: requests of at most 256 KiB
  // (about 50 records of W14's) keep that work spread over the workers. Local files only:
  // remote payloads are decoded after the transfer, which wants its long requests.
  RangeOptions o = options;
  bool all_local = true;
  for (const RangeSource& s : sources) all_local &= s.remote == nullptr;
  if (o.max_request == 0 && all_local) o.max_request = 256 << 10;
  Status st = ReadRanges(sources, payloads, o, interrupted, stats, on_range);
  // A corrupt payload is reported even when another worker's I/O error stopped the call
  // first: both are true, and the caller can name the record.
  if (corrupt) {
    if (failed_index != nullptr) *failed_index = corrupt_index;
    return corrupt_status;
  }
  LSIO_RETURN_IF_ERROR(st);
  for (size_t i = 0; i < n; ++i) {
    if (out->decoded[i] != nullptr) continue;
    Result<uint64_t> size = RecordDecodedSize(compression, out->payloads[i]);
    if (!size.ok()) {
      if (failed_index != nullptr) *failed_index = i;
      return size.status();
    }
    out->sizes[i] = size.value();
  }
  return Status::Ok();
}

Status PlaceRecords(const GatheredRecords& records, uint8_t* dst, std::span<const uint64_t> offsets, int threads,
                    size_t* failed_index) {
  if (offsets.size() != records.sizes.size()) {
    return Status::InvalidArgument("PlaceRecords: " + std::to_string(offsets.size()) + " places for " +
                                   std::to_string(records.sizes.size()) + " records");
  }
  return ParallelFor(offsets.size(), threads, [&](size_t i) -> Status {
    if (records.decoded[i] != nullptr) {
      std::memcpy(dst + offsets[i], records.decoded[i].get(), records.sizes[i]);
      return Status::Ok();
    }
    return DecodeOne(records.compression,
                     {records.payloads[i].data(), records.payloads[i].size(), dst + offsets[i], records.sizes[i]});
  }, failed_index);
}

}  // namespace lsio
