// The facade: lsio::Array ties metadata (zarr), I/O backend (io), caches and the executor
// (read) together. Everything per-process lives in ProcessLocal slots.
#include "lsio/array.h"

#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <limits>
#include <cerrno>
#include <new>
#include <stdexcept>

#include "io/fd_cache.h"
#include "io/page_cache.h"
#include "io/select_backend.h"
#include "lsio/node.h"
#include "read/chunk_cache.h"
#include "read/coalescing_tuner.h"
#include "read/executor.h"
#include "source/resident_store.h"
#include "store/local_store.h"
#include "util/process_local.h"
#include "util/thread_pool.h"
#include "zarr/chunk_key.h"
#include "zarr/metadata.h"

namespace lsio {
namespace {

// The probe the bindings install (SetInterruptProbe); read once per call.
std::atomic<bool (*)()> g_interrupt_probe{nullptr};

}  // namespace

struct Array::Impl {
  ArrayInfo info;
  OpenOptions options;
  ArrayMetadata meta;
  ArrayLayout layout;
  std::shared_ptr<Store> store;
  bool remote = false;  // the store's traits().remote, read once at open
  ProcessLocal<IndexCache> index_cache;
  // Adaptive coalescing (remote stores): learned per array, from its own calls.
  ProcessLocal<CoalescingTuner> tuner;
  // Chunk-cache keys start with this: what decoding depends on (metadata fingerprint).
  std::string cache_namespace;
  DirectDecision direct;

  Impl(const OpenOptions& o, std::shared_ptr<Store> s)
      : options(o), store(std::move(s)), remote(store->traits().remote), index_cache([this] { return new IndexCache(options.index_cache_bytes); }),
        tuner([] { return new CoalescingTuner(); }) {}

  // The tuner when this array coalesces adaptively, else null.
  CoalescingTuner* Tuner() { return options.adaptive_coalescing && remote ? &tuner.Get() : nullptr; }

  Result<ReadContext> PrepareRead(const std::function<bool()>& interrupted, const ElementTransform* transform);

  // Runs a read; with adaptive coalescing, tells the tuner what the call achieved with the
  // coalescing it was given (bytes_used is the store's, shared with other arrays and calls:
  // concurrent calls blur it, which the tuner's averaging over epochs tolerates).
  template <typename F>
  Status Timed(const ReadContext& ctx, F&& run) {
    if (ctx.tuner == nullptr) return run();
    const uint64_t used0 = store->stats().bytes_used.load(std::memory_order_relaxed);
    const auto t0 = std::chrono::steady_clock::now();
    Status st = run();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const uint64_t used = store->stats().bytes_used.load(std::memory_order_relaxed) - used0;
    if (st.ok()) ctx.tuner->ReportCall(used, seconds, ctx.plan.max_gap);
    return st;
  }

  // Everything one call needs, from this process's slots.
  Result<ReadContext> Context() {
    // A backend that cannot work (io="uring" where the kernel refuses it) fails the call
    // before planning, with the backend's own reason.
    LSIO_RETURN_IF_ERROR(store->TransportName().status());
    ReadContext ctx;
    ctx.layout = &layout;
    ctx.store = store.get();
    ctx.index_cache = &index_cache.Get();
    ctx.plan.max_gap = options.max_gap;
    ctx.plan.max_request = options.max_request;
    ctx.tuner = Tuner();
    if (ctx.tuner != nullptr) ctx.tuner->Hint(options.max_gap, options.max_request, &ctx.plan.max_gap, &ctx.plan.max_request);
    ctx.threads = options.threads > 0 ? options.threads : AvailableCpus();
    ctx.interrupt_probe = g_interrupt_probe.load(std::memory_order_relaxed);
    // Remote workers keep many coalesced requests (up to max_request each) in flight; the
    // local default would cap a batch at a few of them. memory_limit still bounds it.
    if (remote) ctx.batch_bytes = std::max<uint64_t>(ctx.batch_bytes, 64ull << 20);
    ctx.queue_depth = options.queue_depth;
    ctx.memory_limit = options.memory_limit;
    // The decoded-chunk cache serves local stores only: a local file's version is checked
    // (stat) by every call, a remote object's only by a request, which a cached chunk skips.
    if (options.cache_bytes > 0 && !remote) {
      ProcessChunkCache().Reserve(options.cache_bytes);  // again in a forked child's fresh cache
      ctx.chunk_cache = &ProcessChunkCache();
      ctx.cache_namespace = cache_namespace;
    }
    return ctx;
  }
};

Array::Array(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Array::~Array() = default;

namespace {

// The stored bytes of a local array, for direct=auto: the number of storage objects (shards,
// or chunks) times the mean size of up to 16 of them spread evenly over the grid (a missing
// one counts 0 bytes). ~16 stat calls at open; exact for arrays of <= 16 objects.
uint64_t EstimateStoredBytes(const ArrayLayout& l, Store& store) {
  const int nd = l.ndim();
  std::vector<int64_t> grid(l.grid);
  if (l.sharded) {
    for (int d = 0; d < nd; ++d) {
      const int64_t per = std::max<int64_t>(1, l.shard.chunks_per_shard[static_cast<size_t>(d)]);
      grid[static_cast<size_t>(d)] = (grid[static_cast<size_t>(d)] + per - 1) / per;
    }
  }
  unsigned __int128 objects = 1;
  for (int64_t g : grid) {
    objects *= static_cast<unsigned __int128>(std::max<int64_t>(g, 0));
    if (objects > (unsigned __int128)1 << 64) objects = (unsigned __int128)1 << 64;  // saturate
  }
  if (objects == 0) return 0;
  const uint64_t samples = static_cast<uint64_t>(std::min<unsigned __int128>(objects, 16));
  unsigned __int128 bytes = 0;
  std::vector<int64_t> coords(static_cast<size_t>(nd));
  for (uint64_t i = 0; i < samples; ++i) {
    // The middle of the i-th of `samples` equal stretches of the grid in C order.
    unsigned __int128 lin = objects * (2 * i + 1) / (2 * samples);
    for (int d = nd - 1; d >= 0; --d) {
      const auto g = static_cast<unsigned __int128>(grid[static_cast<size_t>(d)]);
      coords[static_cast<size_t>(d)] = static_cast<int64_t>(lin % g);
      lin /= g;
    }
    auto info = store.Stat(ChunkKey(l.keys, coords.data(), nd));
    if (info.ok() && info.value().found) bytes += info.value().size;
  }
  const unsigned __int128 total = bytes * objects / samples;
  return total > std::numeric_limits<uint64_t>::max() ? std::numeric_limits<uint64_t>::max() : static_cast<uint64_t>(total);
}

Status CheckOptions(const OpenOptions& options) {
  if (options.threads < 0) return Status::InvalidArgument("threads must be >= 0");
  if (options.queue_depth == 0 || options.queue_depth > 4096) {
    return Status::InvalidArgument("queue_depth must be in 1..4096");
  }
  if (options.max_request == 0) return Status::InvalidArgument("max_request must be > 0");
  return Status::Ok();
}

// Parsing builds std containers: bad_alloc becomes kResourceExhausted here too.
template <typename F>
Result<std::unique_ptr<Array>> CatchOpen(const std::string& location, F&& open) {
  try {
    return open();
  } catch (const std::bad_alloc&) {
    return Status::ResourceExhausted("cannot allocate memory to open the array (std::bad_alloc)").WithPath(location);
  } catch (const std::length_error& e) {
    return Status::ResourceExhausted(std::string("cannot allocate memory to open the array: ") + e.what()).WithPath(location);
  }
}

}  // namespace

Result<std::unique_ptr<Array>> Array::Open(const std::string& path, const OpenOptions& options,
                                           const std::vector<NodeFile>* files) {
  return CatchOpen(path, [&]() -> Result<std::unique_ptr<Array>> {
    LSIO_RETURN_IF_ERROR(CheckOptions(options));
    LSIO_ASSIGN_OR_RETURN(IoMode mode, ParseIoMode(options.io));
    std::string root = path;
    while (root.size() > 1 && root.back() == '/') root.pop_back();
    struct stat st;
    if (stat(root.c_str(), &st) != 0) return Status::IoError("cannot open array", errno).WithPath(root);
    if (!S_ISDIR(st.st_mode)) {
      return Status::InvalidFormat("not a Zarr array directory (expected a directory holding zarr.json)").WithPath(root);
    }
    LocalStoreOptions so;
    so.mode = mode;
    so.queue_depth = options.queue_depth;
    so.direct = options.direct == DirectIo::kOn ? DirectMode::kOn : DirectMode::kOff;
    auto store = std::make_shared<LocalStore>(root, so);
    LSIO_ASSIGN_OR_RETURN(std::unique_ptr<Array> array, Open(store, root, options, files));
    DirectDecision& d = array->impl_->direct;
    if (options.direct == DirectIo::kAuto) {
      // Decided before the array is handed out, so before its first read (set_direct's rule).
      d = ChooseDirect(EstimateStoredBytes(array->impl_->layout, *store), CurrentPageCacheRoom());
      if (d.direct_misses) store->set_direct(DirectMode::kMisses);
    } else {
      d.mode = options.direct == DirectIo::kOn ? "on" : "off";
      d.direct_all = options.direct == DirectIo::kOn;
      d.reason = d.direct_all ? "direct=True: every read with O_DIRECT" : "direct=False: every read buffered";
    }
    return array;
  });
}

Result<std::unique_ptr<Array>> Array::Open(std::shared_ptr<Store> store, const std::string& location,
                                           const OpenOptions& options, const std::vector<NodeFile>* files) {
  return CatchOpen(location, [&]() -> Result<std::unique_ptr<Array>> {
    LSIO_RETURN_IF_ERROR(CheckOptions(options));
    std::string root = location;
    while (root.size() > 1 && root.back() == '/') root.pop_back();
    // Metadata comes through the store (lsio/node.h reads it), never open/pread here; or
    // from the caller, who read it already to see what the node is.
    std::vector<NodeFile> read;
    if (files == nullptr) {
      LSIO_ASSIGN_OR_RETURN(read, ReadNodeFiles(*store, "", /*v2_consolidated=*/false));
      files = &read;
    }
    const auto named = [&](const char* key) -> const NodeFile* {
      for (const NodeFile& f : *files) {
        if (f.key == key) return &f;
      }
      return nullptr;
    };
    Result<ArrayMetadata> parsed = Status::Internal("unparsed");
    std::string metadata_text;  // fingerprinted for the chunk cache
    if (const NodeFile* zarr_json = named("zarr.json")) {
      metadata_text = zarr_json->text;
      parsed = ParseArrayMetadata(zarr_json->text);
      if (!parsed.ok()) return Status(parsed.status()).WithPath(zarr_json->location);
    } else if (const NodeFile* zarray = named(".zarray")) {
      // No zarr.json: a Zarr v2 array has .zarray (and .zattrs when it has attributes).
      const NodeFile* zattrs = named(".zattrs");
      metadata_text = zarray->text;
      parsed = ParseArrayMetadataV2(zarray->text, zattrs != nullptr ? zattrs->text : std::string());
      if (!parsed.ok()) return Status(parsed.status()).WithPath(zarray->location);
    } else {
      // Nothing there (a typo in a path or key, locally or remote): not found, as zarr-python
      // and xarray say it (lsio.NotFoundError, a FileNotFoundError).
      return Status::IoError("no zarr.json or .zarray: not a Zarr array", ENOENT).WithPath(store->Location("zarr.json"));
    }

    if (const ArrayMetadata& pm = parsed.value(); !pm.shard_codecs.empty()) {
      // Shards compressed whole: read through an adapter that decodes each shard object.
      // The largest valid shard: its index and every inner chunk (or inner shard) at its most.
      auto most = [](const ShardLayout& s, uint64_t each) {
        const unsigned __int128 n = static_cast<unsigned __int128>(s.num_entries) * each + s.index_size;
        return n > UINT64_MAX ? UINT64_MAX : static_cast<uint64_t>(n);
      };
      uint64_t max_decoded = most(*pm.sharding, pm.chain->max_stored_size());
      if (pm.outer_sharding.has_value()) max_decoded = most(*pm.outer_sharding, max_decoded);
      store = std::make_shared<DecodingStore>(std::move(store), pm.shard_codecs, max_decoded);
    }
    if (const ArrayMetadata& pm = parsed.value(); pm.outer_sharding.has_value()) {
      // Nested sharding: the array reads as sharded by its inner shards, cut out of the outer ones.
      const unsigned __int128 inner_most =
          static_cast<unsigned __int128>(pm.sharding->num_entries) * pm.chain->max_stored_size() + pm.sharding->index_size;
      store = std::make_shared<NestedShardStore>(std::move(store), *pm.outer_sharding, pm.key_encoding,
                                                 static_cast<int>(pm.shape.size()),
                                                 inner_most > UINT64_MAX ? UINT64_MAX : static_cast<uint64_t>(inner_most));
    }
    auto impl = std::make_unique<Impl>(options, std::move(store));
    impl->direct.mode = "off";  // Open(path) decides for local directories
    impl->direct.reason = "not a local Zarr directory: read through its store";
    impl->meta = std::move(parsed).value();
    const ArrayMetadata& m = impl->meta;

    LSIO_ASSIGN_OR_RETURN(impl->layout, BuildArrayLayout(m, root));
    const ArrayLayout& l = impl->layout;

    ArrayInfo& info = impl->info;
    info.path = root;
    info.shape = m.shape;
    info.data_type = m.dtype.name;
    info.typestr = m.dtype.typestr;
    info.descr = m.dtype.descr;
    info.itemsize = m.dtype.itemsize;
    info.chunks = m.read_chunk_shape;
    if (l.sharded) info.shards = m.chunk_shape;
    info.fill_value = m.fill_value;
    info.attributes_json = m.attributes_json;
    info.dimension_names = m.dimension_names;
    info.codecs = m.codecs_description;
    info.zarr_format = m.zarr_format;
    char fp[17];
    std::snprintf(fp, sizeof fp, "%016zx", std::hash<std::string>{}(metadata_text));
    impl->cache_namespace = m.dtype.typestr + m.dtype.descr + "|" + m.codecs_description + "|" + fp;
    return std::unique_ptr<Array>(new Array(std::move(impl)));
  });
}

const ArrayInfo& Array::info() const { return impl_->info; }
const OpenOptions& Array::options() const { return impl_->options; }
const DirectDecision& Array::direct_decision() const { return impl_->direct; }

StoreCounters Array::Stats() const {
  StoreCounters c = impl_->store->Counters();
  c.max_gap = impl_->options.max_gap;
  c.max_request = impl_->options.max_request;
  if (CoalescingTuner* t = impl_->Tuner()) t->Hint(impl_->options.max_gap, impl_->options.max_request, &c.max_gap, &c.max_request);
  return c;
}

Result<std::string> Array::BackendName() { return impl_->store->TransportName(); }

// The facade is the boundary of "no exceptions below bindings": planning and resolving run on
// the calling thread and build std containers, so std::bad_alloc (or length_error for an
// impossible size) can come up here; it becomes kResourceExhausted. Workers convert their
// own exceptions (read/executor.cc), and the backends drain their reads before unwinding.
template <typename F>
static Status CatchAtBoundary(F&& body) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return Status::ResourceExhausted("cannot allocate memory for the read (std::bad_alloc)");
  } catch (const std::length_error& e) {
    return Status::ResourceExhausted(std::string("cannot allocate memory for the read: ") + e.what());
  }
}

Status Array::Read(const Selection& sel, const DstView& dst,
                   const std::function<bool()>& interrupted) {
  return CatchAtBoundary([&] {
    return ReadBatch(std::vector<Selection>{sel}, std::vector<DstView>{dst}, interrupted);
  });
}

// The call's ReadContext: Context() plus the interrupt check and the transform.
Result<ReadContext> Array::Impl::PrepareRead(const std::function<bool()>& interrupted, const ElementTransform* transform) {
  const ArrayLayout& l = layout;
  LSIO_ASSIGN_OR_RETURN(ReadContext ctx, Context());
  ctx.interrupted = interrupted;
  if (transform != nullptr) {
    if (transform->out_type != "float32" && transform->out_type != "float64") {
      return Status::InvalidType("transform output type must be float32 or float64, got '" +
                                 transform->out_type + "'");
    }
    const bool to_double = transform->out_type == "float64";
    LSIO_ASSIGN_OR_RETURN(ctx.convert, GetConverter(l.dtype, to_double));
    ctx.scale = transform->scale;
    ctx.offset = transform->offset;
    ctx.out_itemsize = to_double ? 8 : 4;
  }
  return ctx;
}

namespace {

// "selection [a, b] is outside dimension d of size n", with b clamped for display.
Status OutsideDim(int64_t first, __int128 last, size_t d, int64_t size) {
  const int64_t shown = static_cast<int64_t>(std::max<__int128>(std::min<__int128>(last, INT64_MAX), INT64_MIN));
  return Status::OutOfRange("selection [" + std::to_string(first) + ", " + std::to_string(shown) +
                            "] is outside dimension " + std::to_string(d) + " of size " + std::to_string(size));
}

// Checks that start + k*step for k < count lies in [0, size). Exact: __int128 cannot wrap
// for int64 operands, so huge steps or counts are reported, never wrapped into range.
Status CheckRun(int64_t start, int64_t count, int64_t step, size_t d, int64_t size) {
  if (count < 0) return Status::InvalidArgument("selection count must be >= 0");
  if (count == 0) return Status::Ok();
  const __int128 last = static_cast<__int128>(start) + static_cast<__int128>(count - 1) * step;
  if (start < 0 || start >= size || last < 0 || last >= size) return OutsideDim(start, last, d, size);
  return Status::Ok();
}

}  // namespace

Status Array::ReadBatch(const std::vector<Selection>& sels, const std::vector<DstView>& dsts,
                        const std::function<bool()>& interrupted, const ElementTransform* transform) {
  return CatchAtBoundary([&]() -> Status {
    const size_t nd = impl_->layout.shape.size();
    if (sels.size() != dsts.size()) return Status::InvalidArgument("one output view per selection is required");
    for (size_t b = 0; b < sels.size(); ++b) {
      const Selection& s = sels[b];
      const DstView& v = dsts[b];
      if (s.size() != nd) {
        return Status::InvalidArgument("selection has " + std::to_string(s.size()) + " dimensions, the array has " +
                                       std::to_string(nd));
      }
      if (v.shape.size() != nd || v.byte_strides.size() != nd) {
        return Status::InvalidArgument("output view rank does not match the array");
      }
      for (size_t d = 0; d < nd; ++d) {
        if (v.shape[d] != s[d].count) return Status::InvalidArgument("output view shape does not match the selection");
      }
    }
    BoxBatchStorage storage(sels, dsts);
    storage.batch.ndim = static_cast<int>(nd);
    return ReadBoxes(storage.batch, interrupted, transform);
  });
}

namespace {
// A box batch is checked whole before anything is planned (ReadBoxes, StageBoxes).
Status CheckBoxes(const ArrayLayout& l, const BoxBatch& batch) {
  const size_t nd = l.shape.size();
  if (static_cast<size_t>(batch.ndim) != nd) {
    return Status::InvalidArgument("selection has " + std::to_string(batch.ndim) + " dimensions, the array has " +
                                   std::to_string(nd));
  }
  if (batch.size > 0 && nd > 0 && (batch.starts == nullptr || batch.counts == nullptr || batch.dst_strides == nullptr)) {
    return Status::InvalidArgument("box batch without starts, counts or strides");
  }
  for (size_t b = 0; b < batch.size; ++b) {
    for (size_t d = 0; d < nd; ++d) {
      const int di = static_cast<int>(d);
      if (batch.Step(b, di) < 1) return Status::InvalidArgument("selection step must be >= 1");
      LSIO_RETURN_IF_ERROR(CheckRun(batch.Start(b, di), batch.Count(b, di), batch.Step(b, di), d, l.shape[d]));
    }
  }
  return Status::Ok();
}
}  // namespace

Status Array::ReadBoxes(const BoxBatch& batch, const std::function<bool()>& interrupted,
                        const ElementTransform* transform) {
  return CatchAtBoundary([&]() -> Status {
    LSIO_RETURN_IF_ERROR(CheckBoxes(impl_->layout, batch));
    LSIO_ASSIGN_OR_RETURN(ReadContext ctx, impl_->PrepareRead(interrupted, transform));
    return impl_->Timed(ctx, [&] { return ExecuteRead(ctx, batch); });
  });
}

Status Array::StageBoxes(const BoxBatch& batch, std::span<uint8_t> staging, bool gpu_codecs, StagedBatch* out,
                         const std::function<bool()>& interrupted) {
  return CatchAtBoundary([&]() -> Status {
    LSIO_RETURN_IF_ERROR(CheckBoxes(impl_->layout, batch));
    LSIO_ASSIGN_OR_RETURN(ReadContext ctx, impl_->PrepareRead(interrupted, nullptr));
    return impl_->Timed(ctx, [&] { return ExecuteStage(ctx, batch, staging, gpu_codecs, out); });
  });
}

Status Array::ReadOuter(const OuterSelection& sel, const std::function<bool()>& interrupted,
                        const ElementTransform* transform) {
  return CatchAtBoundary([&]() -> Status {
    const ArrayLayout& l = impl_->layout;
    const size_t nd = l.shape.size();
    if (sel.runs.size() != nd || sel.num_runs.size() != nd || sel.shape.size() != nd || sel.byte_strides.size() != nd) {
      return Status::InvalidArgument("outer selection rank does not match the array");
    }
    for (size_t d = 0; d < nd; ++d) {
      if (sel.num_runs[d] > 0 && sel.runs[d] == nullptr) return Status::InvalidArgument("run list is null");
      for (size_t r = 0; r < sel.num_runs[d]; ++r) {
        const int64_t* row = sel.runs[d] + 4 * r;
        const int64_t start = row[0], count = row[1], step = row[2], at = row[3];
        if (count > 1 && step == 0) return Status::InvalidArgument("run step must not be 0");
        LSIO_RETURN_IF_ERROR(CheckRun(start, count, step, d, l.shape[d]));
        if (at < 0 || static_cast<__int128>(at) + count > sel.shape[d]) {
          return Status::InvalidArgument("run output range is outside the output's dimension " + std::to_string(d));
        }
      }
    }
    LSIO_ASSIGN_OR_RETURN(ReadContext ctx, impl_->PrepareRead(interrupted, transform));
    return impl_->Timed(ctx, [&] { return ExecuteRead(ctx, sel); });
  });
}

void Array::Close() {
  // Only this process's state: a forked child's slots are rebuilt on first use anyway.
  if (IndexCache* c = impl_->index_cache.Peek()) c->Clear();
  impl_->store->Close();
}

Result<std::vector<int64_t>> Array::StoredChunkBytes() {
  std::vector<int64_t> nbytes;
  LSIO_RETURN_IF_ERROR(CatchAtBoundary([&]() -> Status {
    LSIO_ASSIGN_OR_RETURN(ReadContext ctx, impl_->Context());
    return SurveyChunks(ctx, &nbytes);
  }));
  return nbytes;
}

void SetInterruptProbe(bool (*probe)()) { g_interrupt_probe.store(probe); }

ChunkCacheStats GetChunkCacheStats() {
  const ChunkCache::Stats s = ProcessChunkCache().stats();
  ChunkCacheStats c;
  c.capacity = s.capacity;
  c.bytes = s.bytes;
  c.entries = s.entries;
  c.hits = s.hits;
  c.misses = s.misses;
  c.inserts = s.inserts;
  c.evictions = s.evictions;
  return c;
}

void ClearChunkCache() { ProcessChunkCache().Clear(); }

void CloseLocalFiles() { ProcessFdCache().Clear(); }

CallProfile GetLastCallProfile() { return LastCallProfile(); }

// For the other facade calls (ranges.cc declares it): the probe installed now.
bool (*CurrentInterruptProbe())() { return g_interrupt_probe.load(std::memory_order_relaxed); }

IoBackendInfo GetIoBackendInfo() {
  IoBackendInfo info;
  const UringSupportInfo u = UringSupport();
  info.uring_available = u.available;
  info.auto_backend = u.available ? "uring" : "pread";
  info.reason = u.reason;
  return info;
}

}  // namespace lsio
