// DiskCache (see disk_cache.h).
#include "store/disk_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <map>
#include <optional>
#include <string_view>
#include <thread>
#include <tuple>
#include <vector>

#include "util/crc32c.h"
#include "util/process_local.h"

namespace lsio {
namespace {

// Version 2 of the block format: magic, key length (4), key, CRC-32C of the bytes (4), bytes.
// Version 1 files (no checksum) fail the magic check and are removed as damaged.
constexpr char kMagic[8] = {'L', 'S', 'I', 'O', 'B', 'L', 'K', '2'};
// The cache holds byte ranges of objects a user may not want others to see (and URLs in the
// headers): owner-only, whatever the umask.
constexpr mode_t kDirMode = 0700;
constexpr mode_t kFileMode = 0600;
// How stale a hit block's mtime (its LRU time) may be before a hit refreshes it.
constexpr time_t kTouchSeconds = 60;

// 64-bit FNV-1a with a seed: stable across builds and processes (block names must be).
uint64_t Fnv(const std::string& s, uint64_t seed) {
  uint64_t h = 1469598103934665603ull ^ seed;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::string Key(const std::string& url, const std::string& version, uint64_t offset, uint64_t length) {
  std::string k = url;
  k.push_back('\0');
  k += version;
  k.push_back('\0');
  k += std::to_string(offset);
  k.push_back('\0');
  k += std::to_string(length);
  return k;
}

// A tail's key: a leading NUL keeps it apart from every block key (those start with a URL).
std::string TailKey(const std::string& url) { return std::string("\0tail\0", 6) + url; }

// A tail's bytes on disk: version length (4), version, object size (8), the object's last bytes.
std::string EncodeTail(const DiskCache::Tail& t) {
  std::string b;
  const uint32_t vlen = static_cast<uint32_t>(t.version.size());
  b.append(reinterpret_cast<const char*>(&vlen), 4);
  b += t.version;
  b.append(reinterpret_cast<const char*>(&t.size), 8);
  b += t.bytes;
  return b;
}

std::optional<DiskCache::Tail> DecodeTail(std::string_view b) {
  uint32_t vlen = 0;
  if (b.size() < 4) return std::nullopt;
  std::memcpy(&vlen, b.data(), 4);
  if (b.size() < 12ull + vlen) return std::nullopt;
  DiskCache::Tail t;
  t.version.assign(b.data() + 4, vlen);
  std::memcpy(&t.size, b.data() + 4 + vlen, 8);
  t.bytes.assign(b.data() + 12 + vlen, b.size() - 12 - vlen);
  if (t.bytes.size() > t.size) return std::nullopt;
  return t;
}

// Tails are shard indexes and the like: a file larger than this is not one of ours.
constexpr uint64_t kMaxTailFile = 64ull << 20;

bool ReadAllAt(int fd, uint8_t* dst, uint64_t n, uint64_t at) {
  while (n > 0) {
    const ssize_t r = pread(fd, dst, static_cast<size_t>(std::min<uint64_t>(n, 1ull << 30)), static_cast<off_t>(at));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    dst += r;
    n -= static_cast<uint64_t>(r);
    at += static_cast<uint64_t>(r);
  }
  return true;
}

bool WriteAll(int fd, const uint8_t* src, uint64_t n) {
  while (n > 0) {
    const ssize_t w = write(fd, src, static_cast<size_t>(std::min<uint64_t>(n, 1ull << 30)));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    src += w;
    n -= static_cast<uint64_t>(w);
  }
  return true;
}

uint64_t HeaderSize(const std::string& key) { return sizeof(kMagic) + 4 + key.size() + 4; }

// mtime is the LRU clock. A file touched within the last minute keeps its mtime: eviction
// cannot tell a minute apart anyway, and a warm batch then dirties no inodes.
void Touch(int fd, const struct stat& st) {
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  if (now.tv_sec - st.st_mtim.tv_sec >= kTouchSeconds || now.tv_sec < st.st_mtim.tv_sec) {
    const struct timespec times[2] = {{0, UTIME_OMIT}, {0, UTIME_NOW}};
    futimens(fd, times);
  }
}

// mkdir -p with owner-only modes for the directories it creates.
Status MakeDirs(const std::string& dir) {
  if (dir.empty()) return Status::InvalidArgument("cache_dir is empty");
  std::string at;
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = dir.find('/', pos + 1);
    at = dir.substr(0, pos);
    if (at.empty()) continue;
    if (mkdir(at.c_str(), kDirMode) != 0 && errno != EEXIST) {
      const int err = errno;
      return Status::IoError(std::string("cannot create the disk cache directory: ") + std::strerror(err), err)
          .WithPath(at);
    }
  }
  struct stat st;
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return Status::IoError("the disk cache directory is not a directory", ENOTDIR).WithPath(dir);
  }
  if (access(dir.c_str(), R_OK | W_OK | X_OK) != 0) {
    const int err = errno;
    return Status::IoError(std::string("the disk cache directory is not writable: ") + std::strerror(err), err)
        .WithPath(dir);
  }
  return Status::Ok();
}

}  // namespace

namespace {
std::string WithoutTrailingSlash(std::string d) {
  while (d.size() > 1 && d.back() == '/') d.pop_back();
  return d;
}
}  // namespace

DiskCache::DiskCache(std::string dir, uint64_t capacity_bytes)
    : dir_(WithoutTrailingSlash(std::move(dir))), capacity_(capacity_bytes) {}

std::string DiskCache::BlockPath(const std::string& key) const {
  char name[40];
  std::snprintf(name, sizeof name, "%016llx%016llx", static_cast<unsigned long long>(Fnv(key, 0)),
                static_cast<unsigned long long>(Fnv(key, 0x9E3779B97F4A7C15ull)));
  return dir_ + "/" + std::string(name, 2) + "/" + name + ".blk";
}

bool DiskCache::Get(const std::string& url, const std::string& version, uint64_t offset, uint64_t length,
                    uint8_t* dst) {
  const std::string key = Key(url, version, offset, length);
  const std::string path = BlockPath(key);
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    ++misses_;
    return false;
  }
  bool ok = false;
  bool damaged = false;
  struct stat st;
  const uint64_t header = HeaderSize(key);
  if (fstat(fd, &st) == 0 && static_cast<uint64_t>(st.st_size) == header + length) {
    std::string head(static_cast<size_t>(header), '\0');
    if (ReadAllAt(fd, reinterpret_cast<uint8_t*>(head.data()), header, 0)) {
      uint32_t klen = 0;
      std::memcpy(&klen, head.data() + sizeof(kMagic), 4);
      const bool ours = std::memcmp(head.data(), kMagic, sizeof(kMagic)) == 0 && klen == key.size() &&
                        head.compare(sizeof(kMagic) + 4, key.size(), key) == 0;
      if (ours && ReadAllAt(fd, dst, length, header)) {
        // The bytes must be the ones written: a block damaged on disk (or left half-written
        // by a crash) is a miss, never data.
        uint32_t stored = 0;
        std::memcpy(&stored, head.data() + header - 4, 4);
        ok = stored == Crc32c(dst, static_cast<size_t>(length));
        damaged = !ok;
        if (damaged) ++corrupt_;
      }
      damaged = damaged || std::memcmp(head.data(), kMagic, sizeof(kMagic)) != 0;
    }
  } else {
    damaged = true;  // blocks are renamed into place whole: a wrong size is damage
  }
  if (ok) {
    Touch(fd, st);
  }
  close(fd);
  if (!ok && damaged) unlink(path.c_str());
  ++(ok ? hits_ : misses_);
  return ok;
}

std::optional<DiskCache::Tail> DiskCache::GetTail(const std::string& url) {
  const std::string key = TailKey(url);
  const std::string path = BlockPath(key);
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  const uint64_t header = HeaderSize(key);
  std::optional<Tail> tail;
  bool damaged = true;
  struct stat st;
  if (fstat(fd, &st) == 0 && static_cast<uint64_t>(st.st_size) >= header &&
      static_cast<uint64_t>(st.st_size) <= header + kMaxTailFile) {
    std::string file(static_cast<size_t>(st.st_size), '\0');
    if (ReadAllAt(fd, reinterpret_cast<uint8_t*>(file.data()), file.size(), 0)) {
      uint32_t klen = 0, stored = 0;
      std::memcpy(&klen, file.data() + sizeof(kMagic), 4);
      std::memcpy(&stored, file.data() + header - 4, 4);
      const std::string_view body(file.data() + header, file.size() - header);
      if (std::memcmp(file.data(), kMagic, sizeof(kMagic)) == 0 && klen == key.size() &&
          file.compare(sizeof(kMagic) + 4, key.size(), key) == 0) {
        if (stored == Crc32c(reinterpret_cast<const uint8_t*>(body.data()), body.size())) tail = DecodeTail(body);
        damaged = !tail.has_value();
        if (damaged) ++corrupt_;
      } else {
        damaged = std::memcmp(file.data(), kMagic, sizeof(kMagic)) != 0;  // else a hash collision
      }
    }
  }
  if (tail) Touch(fd, st);
  close(fd);
  if (!tail && damaged) unlink(path.c_str());
  ++(tail ? hits_ : misses_);
  return tail;
}

void DiskCache::EraseTail(const std::string& url) {
  // The usage counter is not lowered: the next scan recounts (as for damaged blocks).
  unlink(BlockPath(TailKey(url)).c_str());
}

void DiskCache::Put(const std::string& url, const std::string& version, uint64_t offset, uint64_t length,
                    const uint8_t* src) {
  const Block b{&url, &version, offset, length, src};
  PutBatch(std::span<const Block>(&b, 1));
}

void DiskCache::PutBatch(std::span<const Block> blocks, std::span<const TailEntry> tails) {
  // Every block is written to a temporary file first; one syncfs makes all of them durable
  // before any is renamed into place (a block visible under its name is whole after a
  // crash too; the checksum catches what a file system loses anyway). One flush per batch,
  // not one fsync per 64 KiB block.
  struct Written {
    std::string tmp, path;
    uint64_t size;
  };
  std::vector<Written> written;
  written.reserve(blocks.size() + tails.size());
  int sync_fd = -1;
  // Blocks and tails alike: a key, and the bytes stored under it.
  struct Entry {
    std::string key;
    const uint8_t* src;
    uint64_t length;
  };
  std::vector<Entry> entries;
  entries.reserve(blocks.size() + tails.size());
  for (const Block& b : blocks) entries.push_back({Key(*b.url, *b.version, b.offset, b.length), b.src, b.length});
  std::vector<std::string> tail_bytes;
  tail_bytes.reserve(tails.size());
  for (const TailEntry& t : tails) {
    tail_bytes.push_back(EncodeTail(*t.tail));
    entries.push_back({TailKey(*t.url), reinterpret_cast<const uint8_t*>(tail_bytes.back().data()),
                       tail_bytes.back().size()});
  }
  for (const Entry& b : entries) {
    const std::string& key = b.key;
    const uint64_t size = HeaderSize(key) + b.length;
    if (size > capacity_) continue;
    const std::string path = BlockPath(key);
    const std::string sub = path.substr(0, path.rfind('/'));
    // The 256 subdirectories are created once per process (2 syscalls saved per block).
    const size_t sub_index = static_cast<size_t>(std::stoul(path.substr(dir_.size() + 1, 2), nullptr, 16));
    if (!made_[sub_index].load(std::memory_order_relaxed)) {
      if ((mkdir(dir_.c_str(), kDirMode) != 0 && errno != EEXIST) || (mkdir(sub.c_str(), kDirMode) != 0 && errno != EEXIST)) {
        NoteError("cannot create " + sub + ": " + std::strerror(errno));
        continue;
      }
      made_[sub_index].store(true, std::memory_order_relaxed);
    }
    std::string tmp = sub + "/.tmp." + std::to_string(getpid()) + "." +
                      std::to_string(std::hash<std::thread::id>{}(std::this_thread::get_id())) + "." +
                      std::to_string(counter_.fetch_add(1));
    const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, kFileMode);
    if (fd < 0) {
      NoteError("cannot create " + tmp + ": " + std::strerror(errno));
      continue;
    }
    std::string head(kMagic, sizeof(kMagic));
    const uint32_t klen = static_cast<uint32_t>(key.size());
    head.append(reinterpret_cast<const char*>(&klen), 4);
    head += key;
    const uint32_t crc = Crc32c(b.src, static_cast<size_t>(b.length));
    head.append(reinterpret_cast<const char*>(&crc), 4);
    const bool ok = WriteAll(fd, reinterpret_cast<const uint8_t*>(head.data()), head.size()) &&
                    WriteAll(fd, b.src, b.length);
    const int err = errno;
    if (ok && sync_fd < 0) sync_fd = dup(fd);
    close(fd);
    if (!ok) {
      unlink(tmp.c_str());
      NoteError("cannot write " + tmp + ": " + std::strerror(err));
      continue;
    }
    written.push_back({std::move(tmp), path, size});
  }
  if (sync_fd >= 0) {
    if (syncfs(sync_fd) != 0) NoteError(std::string("syncfs failed: ") + std::strerror(errno));
    close(sync_fd);
  }
  uint64_t added = 0;
  for (const Written& w : written) {
    if (rename(w.tmp.c_str(), w.path.c_str()) != 0) {
      NoteError("cannot rename " + w.tmp + ": " + std::strerror(errno));
      unlink(w.tmp.c_str());
      continue;
    }
    ++puts_;
    added += w.size;
  }
  if (added == 0) return;
  // The bound holds for the directory, whoever writes to it: every process adds what it
  // wrote to one shared counter (<dir>/usage, under flock), and whoever sees it pass the
  // capacity rescans and evicts.
  if (AddUsage(added) > capacity_) Evict(capacity_ - capacity_ / 10);
}

void DiskCache::NoteError(std::string what) {
  ++errors_;
  std::lock_guard<std::mutex> lock(mu_);
  last_error_ = std::move(what);
}

std::string DiskCache::last_error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_error_;
}

int DiskCache::UsageFd() {
  std::lock_guard<std::mutex> lock(mu_);
  if (usage_fd_ < 0) usage_fd_ = open((dir_ + "/usage").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, kFileMode);
  return usage_fd_;
}

// The shared counter: 8 bytes, read-modify-written under an exclusive flock. A missing or
// unreadable counter reads as unknown (UINT64_MAX before the first scan: scan now).
uint64_t DiskCache::AddUsage(uint64_t added, bool set) {
  const int fd = UsageFd();
  if (fd < 0) {
    NoteError("cannot open " + dir_ + "/usage: " + std::strerror(errno));
    return UINT64_MAX;
  }
  std::lock_guard<std::mutex> in_process(usage_mu_);
  while (flock(fd, LOCK_EX) != 0) {
    if (errno != EINTR) return UINT64_MAX;
  }
  uint64_t total = 0;
  bool known = pread(fd, &total, sizeof total, 0) == static_cast<ssize_t>(sizeof total);
  total = set ? added : (known ? total + added : UINT64_MAX);
  if (total != UINT64_MAX && pwrite(fd, &total, sizeof total, 0) != static_cast<ssize_t>(sizeof total)) {
    total = UINT64_MAX;
  }
  flock(fd, LOCK_UN);
  return total;
}

uint64_t DiskCache::Evict(uint64_t target) {
  // One scan at a time per process; readers and writers never wait for it (the scan takes
  // no lock that Get or Put take).
  std::unique_lock<std::mutex> scan(scan_mu_, std::try_to_lock);
  if (!scan.owns_lock()) return UINT64_MAX;
  struct Block {
    int64_t mtime_ns;
    uint64_t size;
    std::string path;
  };
  std::vector<Block> blocks;
  uint64_t total = 0;
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  const int64_t now_s = std::chrono::duration_cast<std::chrono::seconds>(now).count();
  DIR* top = opendir(dir_.c_str());
  if (top == nullptr) {
    NoteError("cannot scan " + dir_ + ": " + std::strerror(errno));
    return 0;
  }
  while (dirent* d = readdir(top)) {
    if (std::strlen(d->d_name) != 2) continue;
    const std::string sub = dir_ + "/" + d->d_name;
    DIR* in = opendir(sub.c_str());
    if (in == nullptr) continue;
    while (dirent* f = readdir(in)) {
      const std::string name = f->d_name;
      if (name == "." || name == "..") continue;
      const std::string path = sub + "/" + name;
      struct stat st;
      if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
      if (name.rfind(".tmp.", 0) == 0) {
        if (now_s - st.st_mtim.tv_sec > 3600) unlink(path.c_str());  // a writer that died
        continue;
      }
      if (name.size() != 36 || name.compare(32, 4, ".blk") != 0) continue;  // not ours
      const uint64_t size = static_cast<uint64_t>(st.st_size);
      total += size;
      blocks.push_back({static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec, size, path});
    }
    closedir(in);
  }
  closedir(top);
  if (total > target) {
    std::sort(blocks.begin(), blocks.end(), [](const Block& a, const Block& b) { return a.mtime_ns < b.mtime_ns; });
    for (const Block& b : blocks) {
      if (total <= target) break;
      if (unlink(b.path.c_str()) == 0 || errno == ENOENT) {
        total -= b.size;
        ++evictions_;
      }
    }
  }
  AddUsage(total, /*set=*/true);
  return total;
}

DiskCache::~DiskCache() {
  if (usage_fd_ >= 0) close(usage_fd_);
}

DiskCache::Stats DiskCache::stats() const {
  Stats s;
  s.corrupt = corrupt_.load();
  s.hits = hits_.load();
  s.misses = misses_.load();
  s.puts = puts_.load();
  s.evictions = evictions_.load();
  s.errors = errors_.load();
  return s;
}

namespace {
struct DiskCaches {
  std::mutex mu;
  std::map<std::string, std::shared_ptr<DiskCache>> by_dir;
};
ProcessLocal<DiskCaches>* const g_caches = new ProcessLocal<DiskCaches>([] { return new DiskCaches(); });
}  // namespace

Result<std::shared_ptr<DiskCache>> SharedDiskCache(const std::string& dir, uint64_t capacity_bytes) {
  // Created (with its parents) now, so that a directory that cannot be used is an error at
  // open, not a cache that silently never keeps anything.
  LSIO_RETURN_IF_ERROR(MakeDirs(WithoutTrailingSlash(dir)));
  DiskCaches& c = g_caches->Get();
  std::lock_guard<std::mutex> lock(c.mu);
  auto& slot = c.by_dir[dir];
  if (slot == nullptr || slot->capacity() < capacity_bytes) slot = std::make_shared<DiskCache>(dir, capacity_bytes);
  return slot;
}

}  // namespace lsio
