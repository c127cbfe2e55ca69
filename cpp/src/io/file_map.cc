// FileMap and MapAccessGuard: see file_map.h.
#include "io/file_map.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

namespace lsio {

bool OnMapFault(FileMap* map, void* addr);

namespace {

uintptr_t g_page = 4096;
struct sigaction g_previous;
std::once_flag g_install_once;
bool g_installed = false;

// The map of this thread's active guard. Global-dynamic like the rest of the extension's
// TLS (initial-exec would move all of it into glibc's small static TLS reserve, which
// torch's and sklearn's libraries also draw on). A thread's first access may allocate it, so
// the handler reads it only while some guard is active (g_guards) and every thread that
// holds a guard has accessed it already; a foreign thread's SIGBUS in that window is the one
// case that can reach the lazy allocation.
thread_local const FileMap* t_guarded = nullptr;
std::atomic<int> g_guards{0};

// Whatever SIGBUS did before this handler was installed.
void Chain(int sig, siginfo_t* info, void* context) {
  if ((g_previous.sa_flags & SA_SIGINFO) != 0 && g_previous.sa_sigaction != nullptr) {
    g_previous.sa_sigaction(sig, info, context);
    return;
  }
  if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN) {
    g_previous.sa_handler(sig);
    return;
  }
  const bool sent = info == nullptr || info->si_code <= 0;
  if (sent && g_previous.sa_handler == SIG_IGN) return;  // ignored, as it was
  // The default action (a synchronous SIGBUS cannot be ignored): reset it and let it happen,
  // on return for a fault (the access repeats) or now for a signal someone sent.
  struct sigaction dfl;
  std::memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(sig, &dfl, nullptr);
  if (sent) raise(sig);
}

void OnSigbus(int sig, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  const FileMap* m = g_guards.load(std::memory_order_acquire) > 0 ? t_guarded : nullptr;
  if (m != nullptr && info != nullptr) {
    if (info->si_code > 0) {  // raised by the kernel for an access
      const auto* a = static_cast<const uint8_t*>(info->si_addr);
      if (a >= m->data() && a < m->data() + m->size() && OnMapFault(const_cast<FileMap*>(m), info->si_addr)) {
        errno = saved_errno;
        return;
      }
    } else {
      // Sent, not raised by an access, to a thread inside a guard: Python's faulthandler
      // enabled after this handler re-raises a fault it caught this way, after putting this
      // handler back. Returning repeats the access, whose fault then comes here.
      errno = saved_errno;
      return;
    }
  }
  Chain(sig, info, context);
  errno = saved_errno;
}

void InstallHandler() {
  const long page = sysconf(_SC_PAGESIZE);
  if (page > 0) g_page = static_cast<uintptr_t>(page);
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = OnSigbus;
  sigemptyset(&sa.sa_mask);
  // SA_NODEFER: a handler chained to may re-raise SIGBUS from inside this one.
  sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
  g_installed = sigaction(SIGBUS, &sa, &g_previous) == 0;
}

// mincore(2) tells the truth about the page cache only for files the caller owns or may write
// (see file_map.h); for others it says every page is resident.
bool ResidencyVisible(int fd, const struct stat& st) {
  if (st.st_uid == geteuid()) return true;
  const std::string self = "/proc/self/fd/" + std::to_string(fd);
  return faccessat(AT_FDCWD, self.c_str(), W_OK, AT_EACCESS) == 0;
}

}  // namespace

bool OnMapFault(FileMap* map, void* addr) {
  map->faulted_.store(true, std::memory_order_release);
  // Zeros over the page that is gone, so the access completes. If even that fails (no room
  // for another mapping: vm.max_map_count), the caller chains to the previous handler or the
  // default action, as without the guard: returning would repeat the fault forever.
  void* page = reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(addr) & ~(g_page - 1));
  return mmap(page, g_page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != MAP_FAILED;
}

bool FileMap::GuardReady() {
  std::call_once(g_install_once, InstallHandler);
  if (!g_installed) return false;
  struct sigaction now;
  if (sigaction(SIGBUS, nullptr, &now) != 0) return false;
  return (now.sa_flags & SA_SIGINFO) != 0 && now.sa_sigaction == OnSigbus;
}

std::unique_ptr<FileMap> FileMap::Create(int fd, uint64_t size, int64_t mtime_ns, int64_t ctime_ns) {
  if (fd < 0 || size == 0 || size > static_cast<uint64_t>(SIZE_MAX)) return nullptr;
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || !ResidencyVisible(fd, st)) return nullptr;
  std::call_once(g_install_once, InstallHandler);
  if (!g_installed) return nullptr;
  void* p = mmap(nullptr, static_cast<size_t>(size), PROT_READ, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return nullptr;
  return std::unique_ptr<FileMap>(new FileMap(static_cast<const uint8_t*>(p), fd, size, mtime_ns, ctime_ns));
}

bool FileMap::Unchanged() const {
  if (faulted()) return false;
  struct stat st;
  if (fstat(fd_, &st) != 0) return false;
  const int64_t m = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  const int64_t c = static_cast<int64_t>(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec;
  return static_cast<uint64_t>(st.st_size) == size_ && m == mtime_ns_ && c == ctime_ns_;
}

FileMap::~FileMap() { munmap(const_cast<uint8_t*>(base_), static_cast<size_t>(size_)); }

bool FileMap::Resident(uint64_t offset, uint64_t length) const {
  if (offset > size_ || length > size_ - offset || faulted() || retired_.load(std::memory_order_acquire)) return false;
  if (length == 0) return true;
  const uintptr_t from = reinterpret_cast<uintptr_t>(base_ + offset) & ~(g_page - 1);
  const uintptr_t to = reinterpret_cast<uintptr_t>(base_ + offset + length);
  const size_t pages = static_cast<size_t>((to - from + g_page - 1) / g_page);
  thread_local std::vector<unsigned char> vec;
  if (vec.size() < pages) vec.resize(pages);
  if (mincore(reinterpret_cast<void*>(from), to - from, vec.data()) != 0) return false;
  for (size_t i = 0; i < pages; ++i) {
    if ((vec[i] & 1) == 0) return false;
  }
  return true;
}

MapAccessGuard::MapAccessGuard(const FileMap& map) : previous_(t_guarded) {
  t_guarded = &map;
  g_guards.fetch_add(1, std::memory_order_acq_rel);
}

MapAccessGuard::~MapAccessGuard() {
  g_guards.fetch_sub(1, std::memory_order_acq_rel);
  t_guarded = previous_;
}

}  // namespace lsio
