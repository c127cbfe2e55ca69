// lsio/records.h: the engine side of zrecord stores (lsio.records, python/lsio/records.py):
// offset-table entries loaded and stored whole, record payloads compressed and decoded in
// parallel. The store's files, publication and writers are Python's; reading the records'
// bytes is lsio::ReadRanges (lsio/ranges.h).
//
// Usage:
//   1. Gather: entries = LoadRecordEntries(table, count, ids)  -> (chunk, offset, length) per id
//      uncompressed: ReadRanges(chunk files, those ranges) straight into the result;
//      compressed: GatherRecords(kZstd, chunk files, those ranges, ...) reads the payloads
//      (decoding those that arrive from the disk while others are still being read) and their
//      sizes (each payload's 4-byte prefix, RecordDecodedSize); the caller allocates the
//      result by those sizes, then PlaceRecords lays every record out in it.
//      (Or ReadRanges, RecordDecodedSize and DecodeRecords one after another.)
//   2. Append: CompressRecords(kZstd, 3, values, offsets, threads, &payload, &payload_offsets)
//      then the writer pwrites the payloads and StoreRecordEntries' the new entries.
//
// Entry layout (one per record id, 16 bytes at 16 x id, little-endian):
//   [chunk u32][offset u64][physical_length u32]
// physical_length 0 means "no record" (a hole: corrupt or never written), except with chunk
// kEmptyRecordChunk, which marks an empty record (0 items; nothing stored).
// A compressed payload is [decoded_length u32 LE][frame]: the frame is one zstd frame with
// its content size and checksum, or one zlib stream (RFC 1950, with its Adler-32) for
// kDeflate, so a decode checks every record it returns.
//
// Why entries go through here: a modify or delete repoints an entry of a published record
// while readers in other processes read the table through their own mapping. Loads and
// stores are whole 16-byte accesses (x86-64: aligned SSE moves, atomic on every CPU with
// AVX per Intel's and AMD's manuals), so a reader sees the old entry or the new one, never
// a chunk id of one with the offset of the other.
//
// Thread-safety: every function may be called from many threads. Fork-safe like ReadRanges
// (the worker pool is per process; per-thread compression contexts hold no locks).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "lsio/ranges.h"
#include "lsio/status.h"

namespace lsio {

enum class RecordCompression : uint8_t { kNone = 0, kZstd = 1, kDeflate = 2 };

struct RecordEntry {
  uint32_t chunk = 0;
  uint64_t offset = 0;
  uint32_t length = 0;  ///< physical (stored) bytes
};

inline constexpr size_t kRecordEntryBytes = 16;
/// `chunk` of an empty record's entry (its length is 0, nothing is stored).
inline constexpr uint32_t kEmptyRecordChunk = 0xFFFFFFFFu;
/// Bytes of the decoded-length prefix of a compressed payload.
inline constexpr size_t kRecordPrefixBytes = 4;

/// Loads entries ids[i] of the table (count entries at `table`, which must be 16-byte
/// aligned) into out[i]. Fails with kInvalidArgument for a misaligned table or an id
/// outside [0, count); nothing is written to `out` then.
Status LoadRecordEntries(const uint8_t* table, uint64_t count, std::span<const int64_t> ids, RecordEntry* out);

/// Stores entries[i] at ids[i], each as one 16-byte store. Same failures as Load.
Status StoreRecordEntries(uint8_t* table, uint64_t count, std::span<const int64_t> ids,
                          std::span<const RecordEntry> entries);

/// Compresses records values[offsets[i], offsets[i+1]) (offsets: n + 1 non-decreasing
/// entries, the last at most values_size) into payloads laid end to end in `out`, record i
/// at [(*out_offsets)[i], (*out_offsets)[i+1]). level: zstd 1..22 (0: zstd's default),
/// deflate 0..12 (libdeflate's levels). threads: workers including the caller (0: CPUs).
/// Fails with kInvalidArgument (kNone, a bad level, bad offsets, a record of 4 GiB or more),
/// kResourceExhausted.
Status CompressRecords(RecordCompression compression, int level, const uint8_t* values, size_t values_size,
                       std::span<const uint64_t> offsets, int threads, std::vector<uint8_t>* out,
                       std::vector<uint64_t>* out_offsets);

/// The decoded length a payload's prefix declares, checked against what its frame can
/// produce (zstd: the frame header's content size must equal it; deflate: at most 1032 times
/// the stream plus a little, deflate's densest encoding). kDataLoss for a payload shorter
/// than its prefix, a frame without a declared size, or a claim the frame cannot meet: a
/// corrupt prefix must not make the caller allocate gigabytes.
Result<uint64_t> RecordDecodedSize(RecordCompression compression, std::span<const uint8_t> payload);

/// One payload to decode: `src` (prefix included) into exactly dst_size bytes at dst.
struct RecordDecode {
  const uint8_t* src = nullptr;
  uint64_t src_size = 0;
  uint8_t* dst = nullptr;
  uint64_t dst_size = 0;
};

/// Decodes every payload in parallel (threads as CompressRecords). The first failure stops
/// the rest and is returned: kDataLoss naming the position in `work` of a corrupt payload
/// (bad frame, checksum mismatch, another decoded size), which the caller maps to its id.
Status DecodeRecords(RecordCompression compression, std::span<const RecordDecode> work, int threads,
                     size_t* failed_index = nullptr);

/// Payloads read by GatherRecords, with their decoded sizes; those read while the call waited
/// on I/O are decoded already, each in a buffer of its own.
struct GatheredRecords {
  RecordCompression compression = RecordCompression::kZstd;
  std::vector<std::span<const uint8_t>> payloads;  ///< each payload, in the caller's buffers
  std::vector<std::unique_ptr<uint8_t[]>> decoded;  ///< record i decoded, or null: not yet
  std::vector<uint64_t> sizes;                      ///< record i's decoded bytes
};

/// Reads payloads[i] (ranges of `sources`, each into its dst, as ReadRanges; the buffers
/// must outlive `out`) and learns every record's decoded size. A payload of a local file that
/// the device delivers (after a page-cache miss: ReadRanges' `waited`) is decoded at once, on
/// the thread that read it, so decoding overlaps the reads still in flight (W14 cold zstd: the disk's wait and the
/// decode had added up); since sizes are only known from the payloads, such records wait in
/// buffers of their own (a cold gather holds up to its decoded size twice until placed).
/// Payloads the page cache served at once, those whose read cannot tell (io="pread",
/// io="uring"), and remote ones (read by one streaming thread) are left for PlaceRecords,
/// which decodes them straight into place on every worker (no copy: W14 hot). Requests of
/// all-local gathers are capped at 256 KiB unless options.max_request says otherwise, so
/// merged neighbours do not pile their decodes on one worker. After a failure, `out` is
/// unspecified. Fails as ReadRanges, or with kDataLoss for a corrupt payload (as RecordDecodedSize
/// and DecodeRecords), setting *failed_index to its position in `payloads` (the first met,
/// not necessarily the first by position); other failures leave *failed_index alone.
/// kInvalidArgument for kNone.
Status GatherRecords(RecordCompression compression, const std::vector<RangeSource>& sources,
                     std::span<const ByteRange> payloads, const RangeOptions& options,
                     const std::function<bool()>& interrupted, GatheredRecords* out, size_t* failed_index = nullptr,
                     RangeStats* stats = nullptr);

/// Lays record i of `records` out at dst + offsets[i] (dst sized by records.sizes), in
/// parallel (threads as CompressRecords): copied if decoded already, else decoded there.
/// kDataLoss for a corrupt payload, with *failed_index as GatherRecords; dst is then partly
/// written, only inside the records' places. kInvalidArgument unless offsets has one entry per
/// record.
Status PlaceRecords(const GatheredRecords& records, uint8_t* dst, std::span<const uint64_t> offsets, int threads,
                    size_t* failed_index = nullptr);

}  // namespace lsio
