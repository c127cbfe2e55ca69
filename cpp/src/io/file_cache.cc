// FileCache implementation. See file_cache.h for the contract.
#include "io/file_cache.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>


namespace lsio {

OpenFile::~OpenFile() {
  if (fd >= 0) close(fd);
}

FileCache::FileCache(size_t capacity, bool direct) : capacity_(std::max<size_t>(capacity, 4)), direct_(direct) {}

void FileCache::EvictLocked(size_t keep) {
  while (lru_.size() > keep) {
    map_.erase(lru_.back().first);
    lru_.pop_back();
  }
}

Result<FileRef> FileCache::Open(const std::string& path) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(path);
    if (it != map_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      return it->second->second;
    }
  }
  int fd = -1;
  for (int attempt = 0; attempt < 2; ++attempt) {
    fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd >= 0) break;
    if (errno == ENOENT) return FileRef();
    if ((errno == EMFILE || errno == ENFILE) && attempt == 0) {
      // Out of descriptors: give back half of ours and try once more.
      std::lock_guard<std::mutex> lock(mu_);
      EvictLocked(lru_.size() / 2);
      continue;
    }
    if (errno == EINTR) continue;
    return Status::IoError("cannot open file", errno).WithPath(path);
  }
  if (fd < 0) return Status::IoError("cannot open file", errno).WithPath(path);

  auto file = std::make_shared<OpenFile>();
  file->fd = fd;
  struct stat st;
  if (fstat(fd, &st) != 0) return Status::IoError("cannot stat file", errno).WithPath(path);
  if (S_ISDIR(st.st_mode)) return Status::IoError("expected a file, found a directory", EISDIR).WithPath(path);
  if (!S_ISREG(st.st_mode)) return Status::IoError("not a regular file", EINVAL).WithPath(path);
  const int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
    return Status::IoError("fcntl failed", errno).WithPath(path);
  }
  // F_SETFL may set O_DIRECT; EINVAL means the file system cannot, so read buffered.
  if (direct_ && fcntl(fd, F_SETFL, (flags & ~O_NONBLOCK) | O_DIRECT) == 0) file->direct = true;
  file->size = static_cast<uint64_t>(st.st_size);

  std::lock_guard<std::mutex> lock(mu_);
  auto it = map_.find(path);
  if (it != map_.end()) return it->second->second;  // another thread won; ours closes
  lru_.emplace_front(path, file);
  map_[path] = lru_.begin();
  EvictLocked(capacity_);
  return FileRef(file);
}

void FileCache::Clear() {
  std::lock_guard<std::mutex> lock(mu_);
  EvictLocked(0);
}

size_t FileCache::size() {
  std::lock_guard<std::mutex> lock(mu_);
  return lru_.size();
}

void FileCache::OnForkAbandon() {
  // The lock may be held by a parent thread that does not exist here; read without it.
  for (auto& entry : lru_) {
    if (entry.second && entry.second->fd >= 0) close(entry.second->fd);
  }
}

size_t DefaultFileCacheCapacity() {
  rlimit rl{};
  size_t cap = 128;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
    cap = static_cast<size_t>(rl.rlim_cur) / 8;
  }
  return std::clamp<size_t>(cap, 16, 1024);
}

}  // namespace lsio
