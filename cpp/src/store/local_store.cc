// LocalStore (see local_store.h) and the key check shared by all stores (store.h).
#include "store/local_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include "io/file_cache.h"
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

// Same refusal as FileCache::Open's callers saw from the old metadata reader: a directory is
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
        auto b = MakeBackend(options_.mode, options_.queue_depth, options_.direct);
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
  return t;
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
  // shows in the tiny-chunk workload.
  thread_local std::vector<ReadRequest> reqs;
  reqs.clear();
  reqs.resize(reads.size());
  for (size_t i = 0; i < reads.size(); ++i) {
    RangeRead& r = reads[i];
    const auto& obj = static_cast<const LocalObject&>(*r.object);
    ReadRequest& q = reqs[i];
    q.fd = obj.file->fd;
    q.min_length = r.min_length;
    switch (r.kind) {
      case ReadKind::kRange:
        q.offset = r.offset;
        q.length = r.length;
        q.dst = r.dst;
        break;
      case ReadKind::kSuffix:
        q.length = std::min(r.length, obj.size);
        q.offset = obj.size - q.length;
        q.dst = r.dst;
        break;
      case ReadKind::kWhole:
        r.body.assign(static_cast<size_t>(obj.size), '\0');
        q.offset = 0;
        q.length = obj.size;
        q.dst = reinterpret_cast<uint8_t*>(r.body.data());
        break;
    }
  }
  // The vector is thread_local, and the backend's on_done may run code that reads through
  // lsio on this thread only between batches (executor.h), never inside a Read: no reentry.
  std::vector<ReadRequest>& q = reqs;
  backend.value()->Read(q, [&](size_t i) {
    RangeRead& r = reads[i];
    r.status = q[i].status;
    r.transferred = q[i].transferred;
    r.inline_hit = q[i].inline_hit;
    on_done(i);
  });
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
      ProcessFileCache().Clear();
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
