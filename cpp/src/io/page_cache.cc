// Page cache room, the direct="auto" rule and cachestat(2); see page_cache.h.
#include "io/page_cache.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>
#include <vector>

namespace lsio {
namespace {

// cachestat(2) is newer than the kernel headers of the distributions lsio builds on
// (Debian 12 ships 6.1's): its number is the same on every architecture (generic table),
// and its structures are fixed by the ABI.
#ifndef __NR_cachestat
#define __NR_cachestat 451
#endif
struct CachestatRange {
  uint64_t off;
  uint64_t len;
};
struct Cachestat {
  uint64_t nr_cache;
  uint64_t nr_dirty;
  uint64_t nr_writeback;
  uint64_t nr_evicted;
  uint64_t nr_recently_evicted;
};

std::atomic<bool> g_cachestat_works{true};

// Limits at or above this are "no limit" (cgroup v1 writes PAGE_COUNTER_MAX pages, ~2^63).
constexpr uint64_t kNoLimit = uint64_t{1} << 62;

bool ReadText(const std::string& path, std::string* out) {
  std::ifstream f(path);
  if (!f) return false;
  std::stringstream ss;
  ss << f.rdbuf();
  *out = ss.str();
  return true;
}

bool ParseU64(const std::string& s, uint64_t* v) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  const unsigned long long x = std::strtoull(s.c_str(), &end, 10);
  if (errno != 0 || end == s.c_str()) return false;
  *v = x;
  return true;
}

// The value of `key` in a "key value" file (memory.stat), or in /proc/meminfo ("Key: n kB").
// "8G", "512MiB", "1048576": binary suffixes, as the Python layer's sizes (_options.parse_size).
bool ParseSize(const std::string& s, uint64_t* v) {
  size_t i = 0;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
  uint64_t n = 0;
  if (!ParseU64(s.substr(0, i), &n)) return false;
  std::string unit = s.substr(i);
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  int shift = 0;
  if (unit.empty() || unit == "B") shift = 0;
  else if (unit == "K" || unit == "KB" || unit == "KIB") shift = 10;
  else if (unit == "M" || unit == "MB" || unit == "MIB") shift = 20;
  else if (unit == "G" || unit == "GB" || unit == "GIB") shift = 30;
  else if (unit == "T" || unit == "TB" || unit == "TIB") shift = 40;
  else return false;
  if (shift > 0 && n > (std::numeric_limits<uint64_t>::max() >> shift)) return false;
  *v = n << shift;
  return true;
}

bool StatField(const std::string& text, const std::string& key, uint64_t* v) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, key.size(), key) != 0 || line.size() == key.size()) continue;
    const char c = line[key.size()];
    if (c != ' ' && c != ':' && c != '\t') continue;
    size_t i = key.size() + 1;
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    return ParseU64(line.substr(i), v);
  }
  return false;
}

// The directories of this process's memory cgroup and its ancestors, innermost first, each
// with whether it is cgroup v1 (memory.limit_in_bytes) or v2 (memory.max).
struct Group {
  std::string dir;
  bool v1;
};

std::vector<Group> MemoryGroups(const std::string& proc_root, const std::string& cgroup_root) {
  std::vector<Group> out;
  std::string text;
  if (!ReadText(proc_root + "/self/cgroup", &text)) return out;
  std::istringstream in(text);
  std::string line;
  std::string v1_path, v2_path;
  bool have_v1 = false, have_v2 = false;
  while (std::getline(in, line)) {
    const size_t a = line.find(':');
    const size_t b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1);
    const std::string path = line.substr(b + 1);
    if (controllers.empty() && line.compare(0, a, "0") == 0) {
      have_v2 = true;
      v2_path = path;
    } else {
      std::istringstream cs(controllers);
      std::string c;
      while (std::getline(cs, c, ',')) {
        if (c == "memory") {
          have_v1 = true;
          v1_path = path;
        }
      }
    }
  }
  const auto walk = [&](std::string base, std::string path, bool v1) {
    while (!path.empty() && path.back() == '/') path.pop_back();
    for (;;) {
      out.push_back({base + path, v1});
      if (path.empty()) break;
      const size_t slash = path.rfind('/');
      path = slash == std::string::npos ? std::string() : path.substr(0, slash);
    }
  };
  if (have_v1) walk(cgroup_root + "/memory", v1_path, true);
  if (have_v2) {
    // Unified hierarchy at the root (v2 only), or under "unified" (hybrid systemd setups).
    std::string probe;
    const bool at_root = ReadText(cgroup_root + "/cgroup.controllers", &probe);
    walk(at_root ? cgroup_root : cgroup_root + "/unified", v2_path, false);
  }
  return out;
}

}  // namespace

PageCacheRoom CurrentPageCacheRoom(const std::string& proc_root, const std::string& cgroup_root) {
  PageCacheRoom room;
  if (const char* env = std::getenv("LSIO_PAGE_CACHE_BYTES"); env != nullptr && *env != '\0') {
    // Python's lsio.open refuses a value it cannot parse (_options.py); here one is ignored.
    std::string text(env);
    text.erase(std::remove(text.begin(), text.end(), ' '), text.end());
    uint64_t v = 0;
    if (ParseSize(text, &v)) {
      room.bytes = v;
      room.source = "LSIO_PAGE_CACHE_BYTES";
      return room;
    }
  }
  room.bytes = std::numeric_limits<uint64_t>::max();
  room.source = "unknown";
  std::string text;
  uint64_t kib = 0;
  if (ReadText(proc_root + "/meminfo", &text) && StatField(text, "MemAvailable", &kib)) {
    room.bytes = kib * 1024;
    room.source = "MemAvailable";
  }
  for (const Group& g : MemoryGroups(proc_root, cgroup_root)) {
    std::string limit_text;
    if (!ReadText(g.dir + (g.v1 ? "/memory.limit_in_bytes" : "/memory.max"), &limit_text)) continue;
    while (!limit_text.empty() && (limit_text.back() == '\n' || limit_text.back() == ' ')) limit_text.pop_back();
    uint64_t limit = 0;
    if (!ParseU64(limit_text, &limit) || limit >= kNoLimit) continue;  // "max" or unlimited
    if (!g.v1) {
      // memory.high throttles and reclaims above it: the group's cache lives below it.
      std::string high_text;
      uint64_t high = 0;
      if (ReadText(g.dir + "/memory.high", &high_text) && ParseU64(high_text, &high)) limit = std::min(limit, high);
    }
    // Memory the page cache cannot take back: anonymous memory and shmem/tmpfs pages
    // (DataLoader tensors in /dev/shm), which count against the limit and have no swap.
    uint64_t anon = 0, shmem = 0;
    std::string stat;
    if (ReadText(g.dir + "/memory.stat", &stat)) {
      if (g.v1) {
        if (!StatField(stat, "total_rss", &anon)) StatField(stat, "rss", &anon);
        if (!StatField(stat, "total_shmem", &shmem)) StatField(stat, "shmem", &shmem);
      } else {
        StatField(stat, "anon", &anon);
        StatField(stat, "shmem", &shmem);
      }
    }
    anon += shmem;
    const uint64_t r = limit > anon ? limit - anon : 0;
    if (r < room.bytes) {
      room.bytes = r;
      room.source = "cgroup " + g.dir;
    }
  }
  return room;
}

DirectDecision ChooseDirect(uint64_t stored_bytes, const PageCacheRoom& room) {
  DirectDecision c;
  c.stored_bytes = stored_bytes;
  c.room_bytes = room.bytes;
  c.room_source = room.source;
  c.direct_misses = stored_bytes > room.bytes;
  c.mode = c.direct_misses ? "auto: direct misses" : "auto: buffered";
  const std::string sizes = std::to_string(stored_bytes >> 20) + " MiB stored, " +
                            std::to_string(room.bytes >> 20) + " MiB of page cache room (" + room.source + ")";
  c.reason = c.direct_misses ? "larger than the page cache room: misses read with O_DIRECT, cached ranges from the cache; " + sizes
                             : "fits in the page cache room: read buffered; " + sizes;
  return c;
}

bool CachestatAvailable() {
  // A bad descriptor answers EBADF where the call exists; ENOSYS (old kernel) or EPERM
  // (seccomp filters refuse whatever the arguments) where it does not.
  static const bool probed = [] {
    CachestatRange range{0, 0};
    Cachestat cs{};
    if (syscall(__NR_cachestat, -1, &range, &cs, 0) != 0 && (errno == ENOSYS || errno == EPERM)) {
      g_cachestat_works.store(false, std::memory_order_relaxed);
    }
    return true;
  }();
  (void)probed;
  return g_cachestat_works.load(std::memory_order_relaxed);
}

bool CachestatWorksOn(int fd) {
  if (!CachestatAvailable()) return false;
  CachestatRange range{0, 1};
  Cachestat cs{};
  if (syscall(__NR_cachestat, fd, &range, &cs, 0) == 0) return true;
  if (errno == ENOSYS) g_cachestat_works.store(false, std::memory_order_relaxed);
  return false;
}

Cached CachedState(int fd, uint64_t offset, uint64_t length, uint64_t file_size) {
  const uint64_t end = std::min(offset + length, file_size);
  if (end <= offset) return Cached::kAll;
  if (!CachestatAvailable()) return Cached::kUnknown;
  static const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const uint64_t first = offset / page;
  const uint64_t pages = (end + page - 1) / page - first;
  CachestatRange range{first * page, pages * page};
  Cachestat cs{};
  if (syscall(__NR_cachestat, fd, &range, &cs, 0) != 0) {
    // ENOSYS: no such call after all. EPERM here is about this file, not the process:
    // kernels since 6.14 answer cachestat only for files the caller owns or may write.
    if (errno == ENOSYS) g_cachestat_works.store(false, std::memory_order_relaxed);
    return Cached::kUnknown;
  }
  if (cs.nr_cache >= pages) return Cached::kAll;
  return cs.nr_cache == 0 ? Cached::kNone : Cached::kSome;
}

}  // namespace lsio
