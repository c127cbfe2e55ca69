// FdCache implementation. See fd_cache.h for the contract.
#include "io/fd_cache.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "io/page_cache.h"
#include "util/process_local.h"

namespace lsio {

FileIdentity IdentityOf(const struct stat& st) {
  FileIdentity id;
  id.dev = static_cast<uint64_t>(st.st_dev);
  id.ino = static_cast<uint64_t>(st.st_ino);
  id.size = static_cast<uint64_t>(st.st_size);
  id.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  id.ctime_ns = static_cast<int64_t>(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec;
  return id;
}

namespace {

// statfs(2) f_type values of network and FUSE file systems (linux/magic.h lacks several).
bool OnNetworkFileSystem(int fd) {
  struct statfs sfs;
  if (fstatfs(fd, &sfs) != 0) return false;
  switch (static_cast<uint32_t>(sfs.f_type)) {
    case 0x6969:      // NFS
    case 0x517B:      // SMB
    case 0xFF534D42:  // CIFS
    case 0xFE534D42:  // SMB2
    case 0x65735546:  // FUSE (s3fs, gcsfuse, sshfs, ...)
    case 0x0BD00BD0:  // Lustre
    case 0x00C36400:  // CephFS
    case 0x47504653:  // GPFS
    case 0x01021997:  // 9p
    case 0x5346414F:  // AFS
    case 0x013111A8:  // IBRIX
    case 0x19830326:  // BeeGFS (fhgfs)
      return true;
    default:
      return false;
  }
}

// Entries of one path in different modes are separate; a path never holds NUL.
std::string Key(const std::string& path, DirectMode mode) {
  return (mode == DirectMode::kOn ? 'D' : mode == DirectMode::kMisses ? 'M' : 'B') + path;
}

ProcessLocal<FdCache>* const g_files = new ProcessLocal<FdCache>([] { return new FdCache(); });

}  // namespace

OpenFile::~OpenFile() {
  if (fd >= 0) close(fd);
  if (cache_fd >= 0) close(cache_fd);
}

const FileMap* OpenFile::Map() const {
  std::call_once(map_once_, [this] {
    if (!direct && !network) map_ = FileMap::Create(fd, size, id.mtime_ns, id.ctime_ns);
  });
  return map_.get();
}

FdCache::FdCache(size_t capacity) : fixed_capacity_(capacity) {}

size_t FdCache::capacity() const {
  return fixed_capacity_ != 0 ? std::max<size_t>(fixed_capacity_, 4) : DefaultFdCacheCapacity();
}

void FdCache::EvictLocked(size_t keep) {
  while (lru_.size() > keep) {
    map_.erase(lru_.back().first);
    lru_.pop_back();
  }
}

void FdCache::EraseLocked(const std::string& key, const FileRef& expected) {
  auto it = map_.find(key);
  if (it == map_.end() || it->second->second != expected) return;  // replaced meanwhile
  lru_.erase(it->second);
  map_.erase(it);
}

Result<FileRef> FdCache::Open(const std::string& path, DirectMode mode) {
  const std::string key = Key(path, mode);
  const bool direct = mode != DirectMode::kOff;
  FileRef cached;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(key);
    if (it != map_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      cached = it->second->second;
    }
  }
  if (cached) {
    // Revalidate: the path may now name another file (renamed over), or this file may have
    // been rewritten in place or deleted since it was opened.
    struct stat st;
    if (stat(path.c_str(), &st) == 0 && IdentityOf(st) == cached->id) return cached;
    // Changed, gone or unreadable: drop it; the fresh open below reports what is there now.
    std::lock_guard<std::mutex> lock(mu_);
    EraseLocked(key, cached);
  }

  // Allocated before the descriptor exists, so a bad_alloc cannot leak the descriptor.
  auto file = std::make_shared<OpenFile>();
  int fd = -1;
  for (int attempt = 0; attempt < 3; ++attempt) {
    fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd >= 0) break;
    if (errno == ENOENT) return FileRef();
    if (errno == EINTR) continue;
    if ((errno == EMFILE || errno == ENFILE) && attempt < 2) {
      // Out of descriptors: first give back half of ours, then all of them. Descriptors
      // still held by reads in flight stay open until those reads finish.
      std::lock_guard<std::mutex> lock(mu_);
      EvictLocked(attempt == 0 ? lru_.size() / 2 : 0);
      continue;
    }
    break;
  }
  if (fd < 0) return Status::IoError("cannot open file", errno).WithPath(path);

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
  if (direct && fcntl(fd, F_SETFL, (flags & ~O_NONBLOCK) | O_DIRECT) == 0) file->direct = true;
  // lsio reads exactly the (coalesced) ranges it planned; the kernel's readahead only guesses,
  // and with a large read_ahead_kb (8 MiB on the dev VM's virtio disk) a miss next to a
  // cached range looks sequential and pulls in megabytes nobody asked for. Off: W2's cold
  // crops read 1.10x faster buffered (A/B in one process, 9 rounds), level with O_DIRECT.
  // Network and FUSE file systems keep it: there a read is a round trip, and a caller
  // walking a file in small calls (one time step each) leans on the client's readahead.
  file->network = OnNetworkFileSystem(fd);
  if (!file->direct && !file->network) posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);
  file->id = IdentityOf(st);
  if (mode == DirectMode::kMisses && file->direct) {
    // The buffered twin. Opened by path, so it must be the same file: one renamed over the
    // path in between is not, and the entry then reads everything with O_DIRECT.
    // O_NONBLOCK: a FIFO renamed over the path meanwhile must not block the open (the twin
    // only ever reads with RWF_NOWAIT, so the flag stays). Kept only where cachestat(2)
    // answers for it (io/page_cache.h: not on older kernels, nor for files the caller
    // neither owns nor may write): without it no range is known to be cached.
    int cfd = -1;
    do {
      cfd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    } while (cfd < 0 && errno == EINTR);
    struct stat cst;
    if (cfd >= 0 && fstat(cfd, &cst) == 0 && cst.st_dev == st.st_dev && cst.st_ino == st.st_ino &&
        CachestatWorksOn(cfd)) {
      posix_fadvise(cfd, 0, 0, POSIX_FADV_RANDOM);
      file->cache_fd = cfd;
    } else if (cfd >= 0) {
      close(cfd);
    }
  }
  file->size = file->id.size;

  const size_t cap = capacity();
  std::lock_guard<std::mutex> lock(mu_);
  auto it = map_.find(key);
  if (it != map_.end()) {
    // Another thread opened the path meanwhile: keep the newer file if they differ.
    if (it->second->second->id == file->id) return it->second->second;  // ours closes
    lru_.erase(it->second);
    map_.erase(it);
  }
  // List and map change together or not at all (either insertion may throw bad_alloc).
  lru_.emplace_front(key, file);
  try {
    map_[key] = lru_.begin();
  } catch (...) {
    lru_.pop_front();
    throw;
  }
  EvictLocked(cap);
  return FileRef(file);
}

void FdCache::DropPrefix(const std::string& prefix) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = lru_.begin(); it != lru_.end();) {
    if (it->first.compare(1, prefix.size(), prefix) == 0) {
      map_.erase(it->first);
      it = lru_.erase(it);
    } else {
      ++it;
    }
  }
}

void FdCache::Clear() {
  std::lock_guard<std::mutex> lock(mu_);
  EvictLocked(0);
}

size_t FdCache::size() {
  std::lock_guard<std::mutex> lock(mu_);
  return lru_.size();
}

void FdCache::OnForkAbandon() {
  // The lock may be held by a parent thread that does not exist here; read without it.
  for (auto& entry : lru_) {
    if (entry.second && entry.second->fd >= 0) close(entry.second->fd);
    if (entry.second && entry.second->cache_fd >= 0) close(entry.second->cache_fd);
  }
}

FdCache& ProcessFdCache() { return g_files->Get(); }

Result<OnceFile> OpenOnce(const std::string& path, bool keep_nonblock) {
  OnceFile f;
  bool gave_back = false;
  for (;;) {
    f.fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (f.fd >= 0) break;
    if (errno == ENOENT) return f;
    if (errno == EINTR) continue;
    if ((errno == EMFILE || errno == ENFILE) && !gave_back) {
      // The limit may have been lowered since the cache filled up: descriptors held by
      // reads in flight stay open until those reads finish.
      ProcessFdCache().Clear();
      gave_back = true;
      continue;
    }
    return Status::IoError("cannot open file", errno).WithPath(path);
  }
  struct stat st;
  Status bad;
  if (fstat(f.fd, &st) != 0) {
    bad = Status::IoError("cannot stat file", errno);
  } else if (S_ISDIR(st.st_mode)) {
    bad = Status::IoError("expected a file, found a directory", EISDIR);
  } else if (!S_ISREG(st.st_mode)) {
    bad = Status::IoError("not a regular file", EINVAL);
  } else if (!keep_nonblock && fcntl(f.fd, F_SETFL, 0) != 0) {
    // Of the flags F_SETFL changes, the open above set only O_NONBLOCK: no F_GETFL needed.
    bad = Status::IoError("fcntl failed", errno);
  }
  if (!bad.ok()) {
    close(f.fd);
    return bad.WithPath(path);
  }
  f.size = static_cast<uint64_t>(st.st_size);
  return f;
}

size_t DefaultFdCacheCapacity() {
  rlimit rl{};
  size_t cap = 256;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
    cap = static_cast<size_t>(rl.rlim_cur) / 4;
  }
  return std::clamp<size_t>(cap, 16, 4096);
}

}  // namespace lsio
