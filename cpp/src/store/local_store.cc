// LocalStore (see local_store.h) and the key check shared by all stores (store.h).
#include "store/local_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include "io/fd_cache.h"
#include "io/io_backend.h"

namespace lsio {

Status ValidateKey(std::string_view key) {
  if (key.empty()) return Status::InvalidArgument("store key is empty");
  if (key.front() == '/') return Status::InvalidArgument("store key must be relative: '" + std::string(key) + "'");
  size_t begin = 0;
  while (begin <= key.size()) {
    size_t end = key.find('/', begin);
    if (end == std::string_view::npos) end = key.size();
    const std::string_view seg = key.substr(begin, end - begin);
    if (seg.empty() || seg == "." || seg == "..") {
      return Status::InvalidArgument("store key has an empty, '.' or '..' segment: '" + std::string(key) + "'");
    }
    begin = end + 1;
  }
  return Status::Ok();
}

namespace {

// Closes the descriptor on every path out, including a bad_alloc from the buffer (the
// facade turns that into kResourceExhausted; the descriptor must not leak with it).
class FdGuard {
 public:
  explicit FdGuard(int fd) : fd_(fd) {}
  ~FdGuard() {
    if (fd_ >= 0) close(fd_);
  }
  FdGuard(const FdGuard&) = delete;
  FdGuard& operator=(const FdGuard&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// Same refusal as FdCache::Open's callers saw from the old metadata reader: a directory is
// EISDIR, anything else that is not a regular file EINVAL.
Status NotRegular(const struct stat& st, const std::string& path) {
  return Status::IoError("not a regular file", S_ISDIR(st.st_mode) ? EISDIR : EINVAL).WithPath(path);
}

// A local file opened for range reads: the cached descriptor stays open while the call holds
// the object, even if the cache evicts it meanwhile.
class LocalObject final : public StoreObject {
 public:
  explicit LocalObject(FileRef f) : file(std::move(f)) {
    size_known = true;
    size = file->size;
    version = FileVersion(file->id);
    direct = file->direct;
  }
  FileRef file;
};

// A file opened by its one read (OpenForOneRead), on the reading thread.
class OnceObject final : public StoreObject {
 public:
  explicit OnceObject(std::string p) : path(std::move(p)) { open_on_read = true; }
  ~OnceObject() override { Release(); }
  void Release() {
    if (fd >= 0) close(fd);
    fd = -1;
  }
  const std::string path;
  int fd = -1;
};

}  // namespace

std::string FileVersion(const FileIdentity& id) {
  std::string v;
  v.reserve(64);
  v += std::to_string(id.dev);
  v += ':';
  v += std::to_string(id.ino);
  v += ':';
  v += std::to_string(id.size);
  v += ':';
  v += std::to_string(id.mtime_ns);
  v += ':';
  v += std::to_string(id.ctime_ns);
  return v;
}


LocalStore::LocalStore(std::string root, LocalStoreOptions options)
    : root_(std::move(root)),
      options_(options),
      backend_([this] {
        // Owned until returned: MakeBackend may throw std::bad_alloc.
        auto slot = std::make_unique<BackendSlot>();
        auto b = MakeBackend(options_.mode, options_.queue_depth, options_.direct == DirectMode::kOn);
        if (b.ok()) slot->backend = std::move(b).value();
        else slot->status = b.status();
        return slot.release();
      }) {
  if (root_.empty() || root_.back() != '/') root_ += '/';
}

LocalStore::~LocalStore() = default;

Result<IoBackend*> LocalStore::Backend() {
  if (options_.backend != nullptr) return options_.backend;
  BackendSlot& s = backend_.Get();
  if (!s.status.ok()) return s.status;
  return s.backend.get();
}

Result<std::string> LocalStore::TransportName() {
  LSIO_ASSIGN_OR_RETURN(IoBackend * b, Backend());
  return std::string(b->name());
}

StoreTraits LocalStore::traits() {
  StoreTraits t;
  t.remote = false;
  auto b = Backend();
  t.one_at_a_time = b.ok() && std::string_view(b.value()->name()) == "pread";
  t.open_budget = std::max<size_t>(4, files().capacity() / 2);
  t.max_in_flight = options_.queue_depth;
  t.opens_on_read = options_.direct == DirectMode::kOff;
  return t;
}

MappedRange LocalStore::Mapped(StoreObject& obj, uint64_t offset, uint64_t length) {
  if (options_.mode != IoMode::kAuto || options_.backend != nullptr || obj.open_on_read || obj.direct) return {};
  const FileMap* map = static_cast<const LocalObject&>(obj).file->Map();
  if (map == nullptr || !map->Resident(offset, length)) return {};
  return {map->data() + offset, map};
}

void LocalStore::Close() { files().DropPrefix(root_); }

Result<ObjectRef> LocalStore::Open(std::string_view key) {
  const std::string path = Location(key);
  LSIO_ASSIGN_OR_RETURN(FileRef f, files().Open(path, options_.direct));
  if (f == nullptr) return ObjectRef();
  return ObjectRef(std::make_shared<LocalObject>(std::move(f)));
}

void LocalStore::Read(std::span<RangeRead> reads, const std::function<void(size_t)>& on_done,
                      const std::function<bool()>& /*cancelled: local reads do not wait on others*/) {
  auto backend = Backend();
  if (!backend.ok()) {
    for (size_t i = 0; i < reads.size(); ++i) {
      reads[i].status = backend.status();
      on_done(i);
    }
    return;
  }
  // Reused per thread: worker batches are often a single read, and an allocation per batch
  // shows in the tiny-chunk workload. req_read: the read each backend request serves;
  // settled: reads finished before any I/O (objects that failed to open, or are missing).
  thread_local std::vector<ReadRequest> reqs;
  thread_local std::vector<size_t> req_read;
  thread_local std::vector<size_t> settled;
  reqs.clear();
  req_read.clear();
  settled.clear();
  reqs.reserve(reads.size());
  for (size_t i = 0; i < reads.size(); ++i) {
    RangeRead& r = reads[i];
    int fd = -1;
    int cache_fd = -1;
    bool direct = false;
    uint64_t size = 0;
    if (r.object->open_on_read) {
      auto& obj = static_cast<OnceObject&>(*r.object);
      // Left O_NONBLOCK: the backend clears it only for a read that could block
      // (ReadRequest::fd_nonblocking), not for page-cache hits (an fcntl per file, W8 2-5%).
      auto f = OpenOnce(obj.path, /*keep_nonblock=*/true);
      if (!f.ok() || f.value().fd < 0) {
        if (f.ok()) r.missing = true;
        else r.status = f.status();
        settled.push_back(i);
        continue;
      }
      obj.fd = fd = f.value().fd;
      obj.size = size = f.value().size;
      obj.size_known = true;
      if (r.kind == ReadKind::kRange && (size < r.min_size || size - std::min(size, r.offset) > r.length)) {
        obj.Release();  // sized, not read: the caller refuses it
        settled.push_back(i);
        continue;
      }
    } else {
      const auto& obj = static_cast<const LocalObject&>(*r.object);
      fd = obj.file->fd;
      cache_fd = obj.file->cache_fd;
      direct = obj.file->direct;
      size = obj.size;
    }
    ReadRequest& q = reqs.emplace_back();
    req_read.push_back(i);
    q.fd = fd;
    q.cache_fd = cache_fd;
    q.direct = direct;
    q.file_size = size;
    q.fd_nonblocking = r.object->open_on_read;
    q.min_length = r.min_length;
    switch (r.kind) {
      case ReadKind::kRange:
        q.offset = r.offset;
        q.length = r.length;
        // An object opened here was sized by nobody before: read what it has, up to length.
        if (r.object->open_on_read) q.length = std::min(r.length, size > r.offset ? size - r.offset : 0);
        q.dst = r.dst;
        break;
      case ReadKind::kSuffix:
        q.length = std::min(r.length, size);
        q.offset = size - q.length;
        q.dst = r.dst;
        break;
      case ReadKind::kWhole:
        r.body.assign(static_cast<size_t>(size), '\0');
        q.offset = 0;
        q.length = size;
        q.dst = reinterpret_cast<uint8_t*>(r.body.data());
        break;
    }
  }
  // The vectors are thread_local, and the backend's on_done may run code that reads through
  // lsio on this thread only between batches (executor.h), never inside a Read: no reentry.
  // A descriptor opened here is closed right after its read's on_done (or, if an exception
  // leaves early, when the caller lets go of the object).
  std::vector<ReadRequest>& q = reqs;
  const std::vector<size_t>& which = req_read;
  // O_DIRECT files count their reads (once per batch: an atomic per read would show in the
  // tiny-chunk workload, which reads buffered and counts nothing).
  uint64_t direct_reads = 0, cache_reads = 0;
  if (!q.empty()) {
    backend.value()->Read(q, [&](size_t k) {
      RangeRead& r = reads[which[k]];
      r.status = q[k].status;
      r.transferred = q[k].transferred;
      r.inline_hit = q[k].inline_hit;
      r.waited = q[k].waited;
      if (r.object->direct) ++(q[k].inline_hit ? cache_reads : direct_reads);
      on_done(which[k]);
      if (r.object->open_on_read) static_cast<OnceObject&>(*r.object).Release();
    });
  }
  if (direct_reads != 0) stats().direct_reads.fetch_add(direct_reads, std::memory_order_relaxed);
  if (cache_reads != 0) stats().page_cache_reads.fetch_add(cache_reads, std::memory_order_relaxed);
  // Copied: on_done may start another Read on this thread once this one's I/O is over.
  const std::vector<size_t> done_early = settled;
  for (size_t i : done_early) on_done(i);
}

Result<ObjectRef> LocalStore::OpenForOneRead(std::string_view key) {
  if (options_.direct != DirectMode::kOff) return Open(key);  // O_DIRECT descriptors keep their cached path
  return ObjectRef(std::make_shared<OnceObject>(Location(key)));
}

std::string LocalStore::Location(std::string_view key) const {
  std::string p = root_;
  p.append(key);
  return p;
}

Result<ObjectInfo> LocalStore::Stat(std::string_view key) {
  LSIO_RETURN_IF_ERROR(ValidateKey(key));
  const std::string path = Location(key);
  struct stat st;
  ObjectInfo info;
  if (stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return info;
    return Status::IoError("cannot stat file", errno).WithPath(path);
  }
  if (!S_ISREG(st.st_mode)) return NotRegular(st, path);
  info.found = true;
  info.size = static_cast<uint64_t>(st.st_size);
  info.version = FileVersion(IdentityOf(st));
  return info;
}

Result<std::optional<std::string>> LocalStore::ReadAll(std::string_view key, uint64_t max_bytes) {
  LSIO_RETURN_IF_ERROR(ValidateKey(key));
  const std::string path = Location(key);
  // O_NONBLOCK: opening a FIFO without a writer would otherwise block forever; it has no
  // effect on reads of regular files, the only kind read below.
  int fd = -1;
  bool gave_back = false;
  for (;;) {
    fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd >= 0) break;
    if (errno == EINTR) continue;
    if ((errno == EMFILE || errno == ENFILE) && !gave_back) {
      // Out of descriptors (the limit may have been lowered since the cache filled up):
      // give the cached ones back rather than fail.
      ProcessFdCache().Clear();
      gave_back = true;
      continue;
    }
    break;
  }
  if (fd < 0) {
    if (errno == ENOENT) return std::optional<std::string>();
    return Status::IoError("cannot open file", errno).WithPath(path);
  }
  FdGuard guard(fd);
  struct stat st;
  if (fstat(fd, &st) != 0) return Status::IoError("cannot stat file", errno).WithPath(path);
  if (!S_ISREG(st.st_mode)) return NotRegular(st, path);
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size > max_bytes) {
    return Status::InvalidFormat("object is larger than the limit of " + std::to_string(max_bytes) + " bytes")
        .WithPath(path);
  }
  std::string text(static_cast<size_t>(size), '\0');
  Status s = PreadFully(fd, 0, size, reinterpret_cast<uint8_t*>(text.data()));
  if (!s.ok()) return s.WithPath(path);
  return std::optional<std::string>(std::move(text));
}

}  // namespace lsio
