// The executor: runs one read call from selections to filled output.
//
// Usage (from the facade, GIL released):
//   ReadContext ctx{layout, store, index_cache, options};
//   Status st = ExecuteRead(ctx, box_batch);       // or an OuterSelection
//
// Steps:
//   0. With ctx.memory_limit set, the planner's upper bound of the plan's bytes (computed
//      without allocating) must fit, else kResourceExhausted before anything is allocated.
//   1. BuildTasks (planner): selections -> deduplicated chunk tasks.
//   2. Resolve: shard objects are opened through the store (store/store.h); indexes come
//      from the IndexCache, and all misses are read in ONE batched store call on the
//      calling thread (a suffix read where the size is not known yet: remote stores learn
//      size and version from it, no HEAD), decoded and validated, then cached. Chunk
//      objects of unsharded arrays are opened too; a store that cannot tell their size
//      without a request (remote) reads them whole in one batch here. Absent shards and
//      chunks and missing index entries become fills.
//   3. Coalesce (planner): tasks -> I/O units.
//   4. Run: the calling thread and up to threads-1 pool threads pull batches of units from
//      one atomic counter. Each worker reads its batch with the backend (several reads in
//      flight with io_uring) and decodes each chunk as soon as its read completes, on the
//      same core, straight into the output when the layout allows, else through a
//      per-thread scratch buffer and a strided copy. Fills write the fill pattern in place.
//      Remote stores (StoreTraits::remote) get wide batches (many requests in flight per
//      worker) and chunk reads pinned to the version their index was read from.
// Steps 2-4 run in waves when a call touches more objects than the store's open budget
// (local: half the descriptor cache's capacity), so one call never holds more descriptors
// than that (tasks of one shard are mostly adjacent, so a shard is rarely opened twice). Before each wave the executor fits
// its workers and read batches into ctx.memory_limit, or fails before reading.
// With a chunk cache (ctx.chunk_cache), each wave looks its resolved chunks up by object
// version and byte range after step 2: hits become no-read units that copy the cached
// decoded chunk into the output (straight, or through the same scatter as scratch), and
// every decoded miss is inserted by the worker that decoded it.
// With a transform (ctx.convert), every chunk goes through scratch and is converted while
// scattered; fills are converted once.
// Workers run with the pool threads that exist: a thread that cannot be created (EAGAIN
// under a tight RLIMIT_AS) means fewer workers, never an error. An exception on a worker
// ends at its entry point and becomes the call's Status (std::bad_alloc: kResourceExhausted,
// anything else: kInternal); std::bad_alloc on the calling thread outside the workers
// (planning) propagates to the facade, which returns kResourceExhausted.
// The first error stops further work and is returned with the file, chunk and byte range;
// ctx.interrupted (Ctrl-C) is polled on the calling thread between chunks.
// Writes go only to the selected regions of the caller's output.
#pragma once

#include <functional>
#include <vector>

#include "lsio/box.h"
#include "lsio/profile.h"
#include "read/chunk_cache.h"
#include "read/coalescing_tuner.h"
#include "read/convert.h"
#include "source/index_cache.h"
#include "read/planner.h"
#include "read/stage.h"
#include "store/store.h"
#include "util/thread_pool.h"

namespace lsio {

struct ReadContext {
  const ArrayLayout* layout = nullptr;
  Store* store = nullptr;       ///< where the array's objects are read from
  IndexCache* index_cache = nullptr;
  PlanOptions plan;
  int threads = 1;             ///< total workers including the calling thread
  unsigned queue_depth = 64;   ///< reads in flight per worker
  /// Bytes buffered per worker batch (io_uring batches; pread reads one unit at a time).
  /// With max_request this bounds a worker's read buffer, hence the call's memory.
  uint64_t batch_bytes = 8ull << 20;
  /// Polled on the calling thread only, about every 10 ms, between waves and between
  /// batches of work (never while the thread's read arena, decode scratch or ring hold
  /// anything, so the poll may run code that reads through lsio itself); when it returns
  /// true the call stops with kCancelled (the output is then partly written).
  std::function<bool()> interrupted;
  /// Polled on the calling thread while a remote store waits on the network (where
  /// `interrupted` may not run: this thread's buffers are live): true stops the call with
  /// kCancelled. Must run no user code (see SetInterruptProbe in lsio/array.h).
  bool (*interrupt_probe)() = nullptr;
  /// Bytes one call may allocate (plan + per-worker read and decode buffers); 0 = no limit.
  /// The executor first uses fewer workers and smaller read batches to fit, then fails
  /// with kResourceExhausted before reading anything.
  uint64_t memory_limit = 0;
  /// Optional element transform (out = in * scale + offset as float32/float64): chunks are
  /// then always decoded to scratch and converted while scattered; fills are converted too.
  ConvertFn convert = nullptr;
  double scale = 1.0;
  double offset = 0.0;
  size_t out_itemsize = 0;  ///< element size of the output when convert is set
  /// Optional decoded-chunk cache (read/chunk_cache.h): chunks found there are copied into
  /// the output without a read or a decode; decoded misses are added. Keys start with
  /// cache_namespace (a fingerprint of the array's metadata). Chunk files are then opened
  /// (and versioned) while resolving, not by their read (Store::OpenForOneRead).
  ChunkCache* chunk_cache = nullptr;
  std::string cache_namespace;
  /// Set by ExecuteStage only: chunks go to this staging sink instead of the output.
  StageSink* stage = nullptr;
  /// Whether shard indexes may come from what earlier processes kept (the disk cache's
  /// tails, RangeRead::confirmed_later); false when a call runs again after a failure that
  /// followed such reads (Store::RememberedServed).
  bool use_remembered = true;
  /// Optional (adaptive coalescing, remote): every finished chunk request's timings are
  /// fed to it; the facade asks it for the next call's coalescing.
  CoalescingTuner* tuner = nullptr;
};

/// Reads a validated batch of boxes (see Array::ReadBoxes) / an outer selection.
/// Fails with kResourceExhausted (memory_limit), kCancelled, kDataLoss, kIoError, ...
Status ExecuteRead(const ReadContext& ctx, const BoxBatch& batch);
Status ExecuteRead(const ReadContext& ctx, const OuterSelection& sel);
/// The per-box form (copied into a BoxBatch first).
Status ExecuteRead(const ReadContext& ctx, const std::vector<Selection>& sels,
                   const std::vector<DstView>& dsts);

/// Stages a validated batch of boxes for a device decoder (read/stage.h): every chunk the
/// boxes touch is read as ExecuteRead reads it and left in `staging` (as a GPU-decodable
/// frame, or decoded by the CPU), and `out` gets the frames and the scatter ops into an
/// output laid out as the batch's dst_box_stride / dst_strides say (the batch's addresses
/// are ignored). With the chunk cache and transforms off. When `staging` is too small,
/// returns Ok with out->needed set. `gpu_codecs` = false stages every chunk decoded (the
/// plan a CPU-only executor wants).
Status ExecuteStage(const ReadContext& ctx, const BoxBatch& batch, std::span<uint8_t> staging, bool gpu_codecs,
                    StagedBatch* out);

/// The process's worker pool, shared by every read call (rebuilt in a forked child, never
/// joined at exit). Byte-range reads (read/ranges.h) use it too.
ThreadPool& ProcessWorkerPool();

/// Where the last read call made on the calling thread spent its time (benchmarks: the
/// serial fraction of a call). total_ns: the whole ExecuteRead; workers_ns: inside
/// RunOnWorkers, where the calling thread and the pool threads read and decode in parallel.
/// total_ns - workers_ns is the calling thread's serial share (planning, resolving shard
/// indexes, coalescing). Overwritten by each call of the thread.
CallProfile LastCallProfile();

/// Stored size of every read chunk, in C order of the read-chunk grid (-1: not stored, reads
/// as fill). Reads shard indexes (through the cache) but no chunk data.
Status SurveyChunks(const ReadContext& ctx, std::vector<int64_t>* nbytes);

}  // namespace lsio
