// DiskCache (see disk_cache.h).
#include "store/disk_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <thread>
#include <tuple>
#include <vector>

#include "util/process_local.h"

namespace lsio {
namespace {

constexpr char kMagic[8] = {'L', 'S', 'I', 'O', 'B', 'L', 'K', '1'};

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

uint64_t HeaderSize(const std::string& key) { return sizeof(kMagic) + 4 + key.size(); }

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
      ok = std::memcmp(head.data(), kMagic, sizeof(kMagic)) == 0 && klen == key.size() &&
           head.compare(sizeof(kMagic) + 4, key.size(), key) == 0 && ReadAllAt(fd, dst, length, header);
      damaged = std::memcmp(head.data(), kMagic, sizeof(kMagic)) != 0;
    }
  } else {
    damaged = true;  // blocks are renamed into place whole: a wrong size is damage
  }
  if (ok) {
    const struct timespec times[2] = {{0, UTIME_OMIT}, {0, UTIME_NOW}};  // mtime = LRU clock
    futimens(fd, times);
  }
  close(fd);
  if (!ok && damaged) unlink(path.c_str());
  ++(ok ? hits_ : misses_);
  return ok;
}

void DiskCache::Put(const std::string& url, const std::string& version, uint64_t offset, uint64_t length,
                    const uint8_t* src) {
  const std::string key = Key(url, version, offset, length);
  const uint64_t size = HeaderSize(key) + length;
  if (size > capacity_) return;
  const std::string path = BlockPath(key);
  const std::string sub = path.substr(0, path.rfind('/'));
  // The 256 subdirectories are created once per process (2 syscalls saved per block).
  const size_t sub_index = static_cast<size_t>(std::stoul(path.substr(dir_.size() + 1, 2), nullptr, 16));
  if (!made_[sub_index].load(std::memory_order_relaxed)) {
    if ((mkdir(dir_.c_str(), 0777) != 0 && errno != EEXIST) || (mkdir(sub.c_str(), 0777) != 0 && errno != EEXIST)) {
      ++errors_;
      return;
    }
    made_[sub_index].store(true, std::memory_order_relaxed);
  }
  const std::string tmp = sub + "/.tmp." + std::to_string(getpid()) + "." +
                          std::to_string(std::hash<std::thread::id>{}(std::this_thread::get_id())) + "." +
                          std::to_string(counter_.fetch_add(1));
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0) {
    ++errors_;
    return;
  }
  std::string head(kMagic, sizeof(kMagic));
  const uint32_t klen = static_cast<uint32_t>(key.size());
  head.append(reinterpret_cast<const char*>(&klen), 4);
  head += key;
  const bool written = WriteAll(fd, reinterpret_cast<const uint8_t*>(head.data()), head.size()) &&
                       WriteAll(fd, src, length);
  close(fd);
  if (!written || rename(tmp.c_str(), path.c_str()) != 0) {
    unlink(tmp.c_str());
    ++errors_;
    return;
  }
  ++puts_;
  bool evict = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    total_ += size;
    evict = !scanned_ || total_ > capacity_;
  }
  if (evict) Evict(capacity_ - capacity_ / 10);
}

uint64_t DiskCache::Evict(uint64_t target) {
  std::lock_guard<std::mutex> lock(mu_);
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
    ++errors_;
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
  scanned_ = true;
  total_ = total;
  return total;
}

DiskCache::Stats DiskCache::stats() const {
  Stats s;
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

std::shared_ptr<DiskCache> SharedDiskCache(const std::string& dir, uint64_t capacity_bytes) {
  DiskCaches& c = g_caches->Get();
  std::lock_guard<std::mutex> lock(c.mu);
  auto& slot = c.by_dir[dir];
  if (slot == nullptr || slot->capacity() < capacity_bytes) slot = std::make_shared<DiskCache>(dir, capacity_bytes);
  return slot;
}

}  // namespace lsio
