// The facade of byte-range reads (lsio/ranges.h): sources -> stores, then read/ranges.
#include "lsio/ranges.h"

#include <filesystem>
#include <map>
#include <mutex>
#include <tuple>

#include "io/select_backend.h"
#include "lsio/array.h"  // the interrupt probe
#include "lsio/remote.h"
#include "read/ranges.h"
#include "store/local_store.h"
#include "util/process_local.h"
#include "util/thread_pool.h"

namespace lsio {

bool (*CurrentInterruptProbe())();  // array.cc

namespace {

// Local files are keys of one store rooted at "/", per (io mode, queue depth), kept for the
// process: its I/O backend (rings per thread) is built once, not per call.
struct LocalStores {
  std::mutex mu;
  std::map<std::tuple<IoMode, unsigned>, std::unique_ptr<LocalStore>> stores;
};
ProcessLocal<LocalStores>* const g_local = new ProcessLocal<LocalStores>([] { return new LocalStores(); });

Result<Store*> LocalRoot(IoMode mode, unsigned queue_depth) {
  LocalStores& s = g_local->Get();
  std::lock_guard<std::mutex> lock(s.mu);
  auto& slot = s.stores[{mode, queue_depth}];
  if (slot == nullptr) {
    LocalStoreOptions o;
    o.mode = mode;
    o.queue_depth = queue_depth;
    slot = std::make_unique<LocalStore>("/", o);
  }
  return slot.get();
}

// "/abs/path" -> "abs/path" (the key below "/"), relative paths made absolute first.
Result<std::string> LocalKey(const std::string& path) {
  if (path.empty()) return Status::InvalidArgument("source path is empty");
  if (path.find('\0') != std::string::npos) return Status::InvalidArgument("source path contains a NUL byte");
  std::error_code ec;
  std::filesystem::path p = std::filesystem::absolute(path, ec);
  if (ec) return Status::IoError("cannot make the path absolute: " + ec.message(), ec.value()).WithPath(path);
  // "link/.." is the parent of the link's target to the OS, not the directory holding the
  // link, so a path with ".." has its directory resolved (lexical normalising would drop
  // "link/.." as text and name another file); the file name stays as given.
  bool dotdot = false;
  for (const auto& part : p) dotdot = dotdot || part == "..";
  if (dotdot) {
    std::filesystem::path dir = std::filesystem::weakly_canonical(p.parent_path(), ec);
    if (ec) return Status::IoError("cannot resolve the path: " + ec.message(), ec.value()).WithPath(path);
    p = dir / p.filename();
  }
  std::string key = p.lexically_normal().string();
  while (!key.empty() && key.front() == '/') key.erase(key.begin());
  if (key.empty() || key.back() == '/') {
    return Status::IoError("not a regular file", EISDIR).WithPath(path);
  }
  return key;
}

}  // namespace

Status ReadRanges(const std::vector<RangeSource>& sources, std::span<const ByteRange> ranges,
                  const RangeOptions& options, const std::function<bool()>& interrupted, RangeStats* stats,
                  const std::function<Status(size_t, bool)>& on_range) {
  try {
    if (options.threads < 0) return Status::InvalidArgument("threads must be >= 0");
    if (options.queue_depth == 0 || options.queue_depth > 4096) {
      return Status::InvalidArgument("queue_depth must be in 1..4096");
    }
    if (sources.size() > UINT32_MAX) return Status::InvalidArgument("more than 2^32 - 1 sources");
    LSIO_ASSIGN_OR_RETURN(IoMode mode, ParseIoMode(options.io));
    std::vector<RangeObject> objects(sources.size());
    std::vector<bool> used(sources.size(), false);
    for (const ByteRange& r : ranges) {
      if (r.source < sources.size()) used[r.source] = true;
    }
    for (size_t i = 0; i < sources.size(); ++i) {
      if (!used[i]) continue;  // not opened, not checked
      const RangeSource& s = sources[i];
      if (s.remote != nullptr) {
        LSIO_RETURN_IF_ERROR(ValidateKey(s.key));
        objects[i].store = s.remote->store().get();
        objects[i].key = s.key;
      } else {
        LSIO_ASSIGN_OR_RETURN(objects[i].store, LocalRoot(mode, options.queue_depth));
        LSIO_ASSIGN_OR_RETURN(objects[i].key, LocalKey(s.path));
      }
    }
    std::vector<RangeTarget> targets(ranges.size());
    for (size_t i = 0; i < ranges.size(); ++i) {
      targets[i] = RangeTarget{ranges[i].source, ranges[i].offset, ranges[i].length,
                               static_cast<uint8_t*>(ranges[i].dst)};
    }
    RangesContext ctx;
    ctx.threads = options.threads > 0 ? options.threads : AvailableCpus();
    ctx.queue_depth = options.queue_depth;
    ctx.max_gap = options.max_gap;
    ctx.max_request = options.max_request;
    ctx.interrupted = interrupted;
    ctx.interrupt_probe = CurrentInterruptProbe();
    ctx.stats = stats;
    ctx.on_target = on_range;
    return ExecuteRanges(ctx, objects, targets);
  } catch (const std::bad_alloc&) {
    return Status::ResourceExhausted("cannot allocate memory for the range read (std::bad_alloc)");
  }
}

}  // namespace lsio
