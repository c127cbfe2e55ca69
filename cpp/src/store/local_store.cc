// LocalStore (see local_store.h) and the key check shared by all stores (store.h).
#include "store/local_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

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

std::string VersionOf(const struct stat& st) {
  const __int128 ns = static_cast<__int128>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  const auto lo = static_cast<long long>(ns);  // fits: seconds since 1970 * 1e9 < 2^63 until 2262
  return std::to_string(static_cast<unsigned long long>(st.st_dev)) + ":" +
         std::to_string(static_cast<unsigned long long>(st.st_ino)) + ":" + std::to_string(lo);
}

}  // namespace

LocalStore::LocalStore(std::string root) : root_(std::move(root)) {
  if (root_.empty() || root_.back() != '/') root_ += '/';
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
  info.version = VersionOf(st);
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
