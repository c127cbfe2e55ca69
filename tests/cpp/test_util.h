// Shared helpers for the lsio GoogleTest suites (header-only, no lsio dependency, so every
// layer's test binary can use it without linking a layer it must not see).
//
// Usage:
//   1. TempDir dir;                         // a fresh directory, removed at scope exit
//      dir.Write("c/0/0", bytes);           // creates parent directories as needed
//   2. RunInChild([] { return ok ? 0 : 1; })  // fork, run, _exit with the result
//   3. ReferenceCrc32c(bytes): a bit-wise CRC-32C, independent of the engine's.
//   4. OpenDescriptors(): how many descriptors the process holds (leak checks).
//   5. DropCached(path): drops a file from the page cache; false where pages stay (tmpfs).
//      NowaitWorks(path): whether its file system answers preadv2(RWF_NOWAIT).
#pragma once

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <zlib.h>

#include "lsio/box.h"

namespace lsio_test {

using Bytes = std::vector<uint8_t>;

/// Drops `path` from the page cache (fdatasync, POSIX_FADV_DONTNEED) and says whether none of
/// its pages stayed (mincore over a mapping; false on tmpfs, where DONTNEED drops nothing).
inline bool DropCached(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  ::fdatasync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  struct stat st;
  bool dropped = false;
  if (::fstat(fd, &st) == 0 && st.st_size > 0) {
    const size_t size = static_cast<size_t>(st.st_size);
    void* p = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
    if (p != MAP_FAILED) {
      const long page = ::sysconf(_SC_PAGESIZE);
      std::vector<unsigned char> vec((size + page - 1) / page);
      dropped = ::mincore(p, size, vec.data()) == 0;
      for (unsigned char v : vec) dropped &= (v & 1) == 0;
      ::munmap(p, size);
    }
  }
  ::close(fd);
  return dropped;
}

/// Whether preadv2(RWF_NOWAIT) works on the file system of `path` (a cached byte read with
/// it): where it does not, lsio cannot tell a page-cache hit from a miss.
inline bool NowaitWorks(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char b = 0;
  bool ok = ::pread(fd, &b, 1, 0) == 1;
  iovec iov{&b, 1};
  ok = ok && ::preadv2(fd, &iov, 1, 0, RWF_NOWAIT) >= 0;
  ::close(fd);
  return ok;
}

/// A fresh directory under testing::TempDir(), removed recursively on destruction.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = testing::TempDir();
    if (tmpl.empty() || tmpl.back() != '/') tmpl += '/';
    tmpl += "lsio_test_XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    const char* p = mkdtemp(buf.data());
    if (p == nullptr) {
      ADD_FAILURE() << "mkdtemp failed: " << std::strerror(errno);
      return;
    }
    path_ = p;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string Join(const std::string& rel) const { return path_ + "/" + rel; }

  /// Writes `data` to `rel` (parents created) and returns the absolute path.
  std::string Write(const std::string& rel, const Bytes& data) const {
    return Write(rel, std::string(data.begin(), data.end()));
  }
  std::string Write(const std::string& rel, const std::string& data) const {
    const std::string full = Join(rel);
    std::filesystem::create_directories(std::filesystem::path(full).parent_path());
    std::ofstream f(full, std::ios::binary | std::ios::trunc);
    f.write(data.data(), static_cast<std::streamsize>(data.size()));
    f.close();
    EXPECT_TRUE(f.good()) << "cannot write " << full;
    return full;
  }
  std::string MakeDir(const std::string& rel) const {
    const std::string full = Join(rel);
    std::filesystem::create_directories(full);
    return full;
  }

 private:
  std::string path_;
};

/// Forks; the child runs `body` and _exits with its result (0 = success). Returns the
/// child's exit code, or 1000 + signal number if it was killed, or -1 if fork failed.
/// Descriptors this process has open now (0..4095).
inline int OpenDescriptors() {
  int n = 0;
  for (int fd = 0; fd < 4096; ++fd) n += fcntl(fd, F_GETFD) != -1;
  return n;
}

inline int RunInChild(const std::function<int()>& body) {
  fflush(stdout);
  fflush(stderr);
  const pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    int rc = 1;
    rc = body();
    _exit(rc);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 1000 + WTERMSIG(status);
  return -2;
}

/// Bit-wise CRC-32C (Castagnoli, reflected 0x82F63B78, init/xorout 0xFFFFFFFF).
inline uint32_t ReferenceCrc32c(const uint8_t* p, size_t n) {
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; ++i) {
    c ^= p[i];
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
  }
  return ~c;
}
inline uint32_t ReferenceCrc32c(const Bytes& b) { return ReferenceCrc32c(b.data(), b.size()); }

/// Appends `v` as little-endian bytes of sizeof(T).
template <typename T>
void PutLE(Bytes& out, T v) {
  for (size_t i = 0; i < sizeof(T); ++i) out.push_back(static_cast<uint8_t>(static_cast<uint64_t>(v) >> (8 * i)));
}
template <typename T>
void PutBE(Bytes& out, T v) {
  for (size_t i = sizeof(T); i-- > 0;) out.push_back(static_cast<uint8_t>(static_cast<uint64_t>(v) >> (8 * i)));
}

/// Appends the CRC-32C of `b` to `b` (little endian), as the crc32c codec stores it.
inline Bytes WithCrc(Bytes b) {
  PutLE<uint32_t>(b, ReferenceCrc32c(b));
  return b;
}

/// Deterministic pseudo-random bytes (64-bit LCG).
inline Bytes PatternBytes(size_t n, uint64_t seed = 1) {
  Bytes b(n);
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < n; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    b[i] = static_cast<uint8_t>(x >> 56);
  }
  return b;
}

inline Bytes Concat(const std::vector<Bytes>& parts) {
  Bytes out;
  for (const Bytes& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

/// Bytes from a hex dump such as "00 01 ff".
inline Bytes FromHex(const std::string& hex) {
  Bytes out;
  int hi = -1;
  for (char c : hex) {
    int v;
    if (c >= '0' && c <= '9') v = c - '0';
    else if (c >= 'a' && c <= 'f') v = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F') v = c - 'A' + 10;
    else continue;
    if (hi < 0) {
      hi = v;
    } else {
      out.push_back(static_cast<uint8_t>(hi * 16 + v));
      hi = -1;
    }
  }
  return out;
}

/// The byte-exact shard blobs of zarr-format.md §6.9: a [4,4] uint16 array, one shard of
/// [2,2] inner chunks, data arange(16) with the lower-right 2x2 block zeroed (not stored).
inline Bytes Shard69ZarrPythonEnd() {
  return FromHex(
      "00 00 01 00 04 00 05 00 08 00 09 00 0c 00 0d 00"
      "02 00 03 00 06 00 07 00 00 00 00 00 00 00 00 00"
      "08 00 00 00 00 00 00 00 10 00 00 00 00 00 00 00"
      "08 00 00 00 00 00 00 00 08 00 00 00 00 00 00 00"
      "08 00 00 00 00 00 00 00 ff ff ff ff ff ff ff ff"
      "ff ff ff ff ff ff ff ff ba 79 9d 56");
}
inline Bytes Shard69ZarrPythonStart() {
  return FromHex(
      "44 00 00 00 00 00 00 00 08 00 00 00 00 00 00 00"
      "54 00 00 00 00 00 00 00 08 00 00 00 00 00 00 00"
      "4c 00 00 00 00 00 00 00 08 00 00 00 00 00 00 00"
      "ff ff ff ff ff ff ff ff ff ff ff ff ff ff ff ff"
      "1a f5 a7 29 00 00 01 00 04 00 05 00 08 00 09 00"
      "0c 00 0d 00 02 00 03 00 06 00 07 00");
}
inline Bytes Shard69TensorStore() {
  return FromHex(
      "00 00 01 00 04 00 05 00 02 00 03 00 06 00 07 00"
      "08 00 09 00 0c 00 0d 00 00 00 00 00 00 00 00 00"
      "08 00 00 00 00 00 00 00 08 00 00 00 00 00 00 00"
      "08 00 00 00 00 00 00 00 10 00 00 00 00 00 00 00"
      "08 00 00 00 00 00 00 00 ff ff ff ff ff ff ff ff"
      "ff ff ff ff ff ff ff ff 21 50 2b 4c");
}

/// Expected decoded values of the §6.9 array, C order.
inline std::vector<uint16_t> Shard69Values() {
  std::vector<uint16_t> v(16);
  for (int i = 0; i < 16; ++i) v[static_cast<size_t>(i)] = static_cast<uint16_t>(i);
  for (int r = 2; r < 4; ++r)
    for (int c = 2; c < 4; ++c) v[static_cast<size_t>(r * 4 + c)] = 0;
  return v;
}

/// `v` as 4 little-endian bytes.
inline std::string Le32(uint32_t v) {
  std::string s(4, '\0');
  for (int k = 0; k < 4; ++k) s[static_cast<size_t>(k)] = static_cast<char>(v >> (8 * k));
  return s;
}

/// A vlen-utf8 chunk as numcodecs writes it: the item count, then each item's length and
/// bytes (little-endian uint32 lengths).
inline std::string VlenUtf8Chunk(const std::vector<std::string>& items) {
  std::string s = Le32(static_cast<uint32_t>(items.size()));
  for (const std::string& it : items) s += Le32(static_cast<uint32_t>(it.size())) + it;
  return s;
}

/// True when LSIO_REQUIRE_URING=1: io_uring tests fail instead of skipping.
inline bool RequireUring() {
  const char* e = std::getenv("LSIO_REQUIRE_URING");
  return e != nullptr && std::string(e) == "1";
}

// A C-contiguous view of `shape` (elements of `itemsize` bytes) over `data`.
inline lsio::DstView View(void* data, std::vector<int64_t> shape, size_t itemsize) {
  lsio::DstView v;
  v.data = static_cast<uint8_t*>(data);
  v.shape = shape;
  v.byte_strides.resize(shape.size());
  int64_t s = static_cast<int64_t>(itemsize);
  for (size_t d = shape.size(); d-- > 0;) {
    v.byte_strides[d] = s;
    s *= shape[d];
  }
  return v;
}

inline lsio::DstView View(std::vector<uint8_t>& buf, std::vector<int64_t> shape, size_t itemsize = 1) {
  return View(buf.data(), std::move(shape), itemsize);
}

// A selection from per-dimension starts, counts and (optional) steps.
inline lsio::Selection Box(std::vector<int64_t> start, std::vector<int64_t> count,
                           std::vector<int64_t> step = {}) {
  lsio::Selection s;
  for (size_t d = 0; d < start.size(); ++d) s.push_back({start[d], count[d], step.empty() ? 1 : step[d]});
  return s;
}

/// zlib's deflate of `data` with windowBits `bits` (15 + 16: a gzip member, 15: zlib, -15:
/// raw deflate); `header` adds gzip header fields (name, comment, extra, header CRC).
inline Bytes DeflateBits(const Bytes& data, int bits, gz_header* header = nullptr, int level = 6) {
  z_stream zs{};
  EXPECT_EQ(deflateInit2(&zs, level, Z_DEFLATED, bits, 8, Z_DEFAULT_STRATEGY), Z_OK);
  if (header != nullptr) {
    EXPECT_EQ(deflateSetHeader(&zs, header), Z_OK);
  }
  Bytes out(deflateBound(&zs, static_cast<uLong>(data.size())) + 256);
  zs.next_in = const_cast<Bytef*>(data.data());
  zs.avail_in = static_cast<uInt>(data.size());
  zs.next_out = out.data();
  zs.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&zs, Z_FINISH), Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

}  // namespace lsio_test
