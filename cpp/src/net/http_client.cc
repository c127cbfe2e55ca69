// HttpClient over libcurl's multi interface: the one HTTP transport of the remote stores.
// http_client.h is the contract (range checks, retries, resume, errors, fork); this file is
// how it is met with libcurl 7.88 (Debian 12) and later.
//
// Shape:
//   * CurlProcess (one per process, in a ProcessLocal): curl_global_init, a CURLSH sharing the
//     DNS cache and TLS sessions between threads, and a table of the sockets libcurl opened,
//     so that a forked child can close its copies of them without touching the connections
//     (which still belong to the parent).
//   * ThreadCurl (thread_local, checked against the fork generation): the calling thread's
//     CURLM and a few idle easy handles. The CURLM outlives Run calls because it holds the
//     connection cache: keep-alive connections are reused by the next Run on the same thread.
//   * Run: a loop on the calling thread that starts up to max_in_flight requests (pulled
//     from the caller's `next`; the span form pulls from its span), drives
//     curl_multi_perform / curl_multi_poll (at most 20 ms per wait when cancelled() is given),
//     enforces the stall timeout itself (millisecond precision, where CURLOPT_LOW_SPEED_TIME
//     counts whole seconds), harvests finished attempts and either finishes the request
//     (on_done) or schedules its next attempt (a resume at once, else after a backoff).
//
// Connection sharing: the connection cache is not shared through the CURLSH. libcurl 7.88
// documents CURL_LOCK_DATA_CONNECT as "not supported to share connections between multiple
// concurrent threads" (CURLSHOPT_SHARE(3)), and Run is called from many threads at once, so
// each thread keeps its connections in its own CURLM instead.
//
// SIGPIPE: the process's disposition is never changed. libcurl sends with MSG_NOSIGNAL on
// Linux (and its OpenSSL backend writes through libcurl's socket layer, not a socket BIO),
// so a peer that resets a connection gives EPIPE/ECONNRESET, not a signal.
// tests/cpp/net/http_client_test.cc proves it for plain HTTP with SIGPIPE's default action;
// HTTPS is exercised later from Python against nginx.
#include "net/http_client.h"

#include <curl/curl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <queue>
#include <random>
#include <string_view>
#include <thread>

#include "net/sigv4.h"
#include "util/process_local.h"

namespace lsio {
namespace {

// Attempts for a refused connection (ECONNREFUSED), whatever the retry budget.
constexpr unsigned kRefusedAttempts = 3;

using Clock = std::chrono::steady_clock;
using Headers = std::vector<std::pair<std::string, std::string>>;

constexpr size_t kErrorBodyLimit = 4096;       // kept of a non-2xx body (for ErrorDialect::describe)
constexpr size_t kXmlHoldLimit = 64 * 1024;    // a 2xx body held back for ErrorDialect::retry_in_body
constexpr long kBufferSize = 128 * 1024;       // receive buffer per transfer (default 16 KiB)
constexpr size_t kMaxIdleEasyHandles = 64;     // easy handles kept per thread between calls
constexpr auto kCancelPoll = std::chrono::milliseconds(20);
constexpr auto kIdlePoll = std::chrono::milliseconds(250);

int64_t MsBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(b - a).count();
}

bool IEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  }
  return true;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n'))
    s.remove_suffix(1);
  return s;
}

// Decimal digits only, no sign, no overflow.
bool ParseU64(std::string_view s, uint64_t* out) {
  if (s.empty() || s.size() > 19) return false;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  *out = v;
  return true;
}

// "bytes a-b/total" or "bytes a-b/*" (RFC 9110 §14.4). total_known false for "*".
bool ParseContentRange(std::string_view v, uint64_t* a, uint64_t* b, uint64_t* total,
                       bool* total_known) {
  v = Trim(v);
  if (v.size() < 6 || !IEquals(v.substr(0, 6), "bytes ")) return false;
  v.remove_prefix(6);
  v = Trim(v);
  const size_t dash = v.find('-');
  const size_t slash = v.find('/');
  if (dash == std::string_view::npos || slash == std::string_view::npos || dash > slash) return false;
  if (!ParseU64(v.substr(0, dash), a) || !ParseU64(v.substr(dash + 1, slash - dash - 1), b)) return false;
  if (*b < *a) return false;
  std::string_view t = v.substr(slash + 1);
  if (t == "*") {
    *total_known = false;
    return true;
  }
  if (!ParseU64(t, total) || *b >= *total) return false;
  *total_known = true;
  return true;
}

// "bytes */total" of a 416 answer.
bool ParseUnsatisfiedRange(std::string_view v, uint64_t* total) {
  v = Trim(v);
  if (v.size() < 8 || !IEquals(v.substr(0, 6), "bytes ")) return false;
  v.remove_prefix(6);
  v = Trim(v);
  if (v.size() < 3 || v.substr(0, 2) != "*/") return false;
  return ParseU64(v.substr(2), total);
}

// The headers that name a request: the provider's, or plain HTTP's.
const std::vector<std::string>& RequestIdHeaders(const HttpClientOptions& opt) {
  static const std::vector<std::string> kPlain = {"x-request-id"};
  return opt.dialect != nullptr ? opt.dialect->request_id_headers : kPlain;
}

// Same code and errno, new message (Status has no message setter).
Status Reworded(const Status& s, std::string message) {
  switch (s.code()) {
    case StatusCode::kIoError: return Status::IoError(std::move(message), s.error_number());
    case StatusCode::kUnavailable: return Status::Unavailable(std::move(message), s.error_number());
    default: return Status(s.code(), std::move(message));
  }
}

// ---------------------------------------------------------------------------------------
// Process state.

class CurlHttpClient;

struct CurlProcess {
  // Sockets libcurl opened through OpenSocket, by descriptor: st_ino + 1 (0: none). Lock-free
  // so that OnForkAbandon, in a child where any lock may be held by a thread that is gone,
  // can read it. Descriptors past the table are not tracked (a child then keeps its copy).
  static constexpr size_t kTrackedFds = 4096;

  CurlProcess();
  ~CurlProcess();

  // A forked child must neither reuse nor shut down the parent's connections (their TLS and
  // HTTP state lives in the parent). Closing the child's copy of a socket leaves the
  // connection open in the parent; fstat checks that the descriptor is still the socket
  // libcurl opened (the child may have closed and reused the number meanwhile).
  void OnForkAbandon() {
    for (size_t fd = 0; fd < kTrackedFds; ++fd) {
      const uint64_t ino1 = sockets[fd].load(std::memory_order_relaxed);
      if (ino1 == 0) continue;
      struct stat st;
      if (fstat(static_cast<int>(fd), &st) == 0 && S_ISSOCK(st.st_mode) &&
          static_cast<uint64_t>(st.st_ino) + 1 == ino1) {
        close(static_cast<int>(fd));
      }
      sockets[fd].store(0, std::memory_order_relaxed);
    }
  }

  Status init;
  CURLSH* share = nullptr;
  // One mutex per kind of shared data, as CURLSHOPT_LOCKFUNC asks.
  std::array<std::mutex, static_cast<size_t>(CURL_LOCK_DATA_LAST)> locks;
  std::array<std::atomic<uint64_t>, kTrackedFds> sockets{};
  std::unique_ptr<CurlHttpClient> client;
};

void ShareLock(CURL*, curl_lock_data data, curl_lock_access, void* p) {
  const auto i = static_cast<size_t>(data);
  auto* proc = static_cast<CurlProcess*>(p);
  if (i < proc->locks.size()) proc->locks[i].lock();
}

void ShareUnlock(CURL*, curl_lock_data data, void* p) {
  const auto i = static_cast<size_t>(data);
  auto* proc = static_cast<CurlProcess*>(p);
  if (i < proc->locks.size()) proc->locks[i].unlock();
}

// CURLOPT_OPENSOCKETFUNCTION: libcurl's own socket() plus SOCK_CLOEXEC (an exec'd child
// should not inherit connections) and the fork table entry.
curl_socket_t OpenSocket(void* p, curlsocktype, struct curl_sockaddr* addr) {
  const int fd = socket(addr->family, addr->socktype | SOCK_CLOEXEC, addr->protocol);
  if (fd < 0) return CURL_SOCKET_BAD;
  auto* proc = static_cast<CurlProcess*>(p);
  struct stat st;
  if (static_cast<size_t>(fd) < CurlProcess::kTrackedFds && fstat(fd, &st) == 0) {
    proc->sockets[fd].store(static_cast<uint64_t>(st.st_ino) + 1, std::memory_order_relaxed);
  }
  return fd;
}

int CloseSocket(void* p, curl_socket_t fd) {
  auto* proc = static_cast<CurlProcess*>(p);
  // Forget before closing: once closed, another thread may get the same number.
  if (fd >= 0 && static_cast<size_t>(fd) < CurlProcess::kTrackedFds) {
    proc->sockets[fd].store(0, std::memory_order_relaxed);
  }
  return close(fd);
}

// ---------------------------------------------------------------------------------------
// Per-thread multi handle.

struct ThreadCurl {
  uint64_t gen = 0;
  CurlProcess* proc = nullptr;
  CURLM* multi = nullptr;
  std::vector<CURL*> idle;
  bool busy = false;  // a Run is using it (a nested Run from on_done gets its own)

  ~ThreadCurl() {
    // Handles of an earlier fork generation belong to the parent: leave them alone.
    if (multi == nullptr || gen != ForkGeneration()) return;
    for (CURL* e : idle) curl_easy_cleanup(e);
    curl_multi_cleanup(multi);
  }
};

thread_local ThreadCurl t_curl;

// The multi handle and easy-handle pool one Run uses.
class MultiLease {
 public:
  explicit MultiLease(CurlProcess* proc) {
    ThreadCurl& tc = t_curl;
    if (tc.multi != nullptr && (tc.gen != ForkGeneration() || tc.proc != proc)) {
      // Inherited across fork: leaked on purpose, its sockets were closed by OnForkAbandon.
      tc.multi = nullptr;
      tc.idle = {};
      tc.busy = false;
    }
    if (!tc.busy) {
      if (tc.multi == nullptr) {
        tc.multi = curl_multi_init();
        tc.gen = ForkGeneration();
        tc.proc = proc;
      }
      if (tc.multi != nullptr) {
        tc_ = &tc;
        tc.busy = true;
        multi_ = tc.multi;
        idle_ = &tc.idle;
        return;
      }
    }
    multi_ = curl_multi_init();
    idle_ = &own_idle_;
  }
  ~MultiLease() {
    if (tc_ != nullptr) {
      tc_->busy = false;
      while (tc_->idle.size() > kMaxIdleEasyHandles) {
        curl_easy_cleanup(tc_->idle.back());
        tc_->idle.pop_back();
      }
      return;
    }
    for (CURL* e : own_idle_) curl_easy_cleanup(e);
    if (multi_ != nullptr) curl_multi_cleanup(multi_);
  }
  MultiLease(const MultiLease&) = delete;
  MultiLease& operator=(const MultiLease&) = delete;

  CURLM* multi() const { return multi_; }
  CURL* TakeEasy() {
    if (!idle_->empty()) {
      CURL* e = idle_->back();
      idle_->pop_back();
      curl_easy_reset(e);
      return e;
    }
    return curl_easy_init();
  }
  void GiveEasy(CURL* e) { idle_->push_back(e); }

 private:
  ThreadCurl* tc_ = nullptr;
  CURLM* multi_ = nullptr;
  std::vector<CURL*>* idle_ = nullptr;
  std::vector<CURL*> own_idle_;
};

// ---------------------------------------------------------------------------------------
// One request across its attempts.

enum class Phase { kQueued, kActive, kWaiting, kDone };

struct Transfer {
  HttpRequest* req = nullptr;
  size_t index = 0;             // its slot in Runner::transfers_, reused once it is done
  const HttpClientOptions* opt = nullptr;
  Phase phase = Phase::kQueued;
  std::string url_redacted;

  // Request-level progress. The window is the part of the object the caller wants, in
  // object offsets: [win_start, win_start + win_len), or [0, ...) for kNone (open).
  bool window_known = false;
  bool window_open = false;
  uint64_t win_start = 0;
  uint64_t win_len = 0;
  uint64_t got = 0;             // window bytes written, contiguous from win_start
  std::string pinned_etag;      // If-Match for later attempts (caller's, or first answer's)
  Clock::time_point deadline;   // total_timeout_ms from the first attempt
  Clock::time_point retry_at;
  unsigned backoffs = 0;        // delays taken so far (the backoff exponent)

  // Attempt state.
  CURL* easy = nullptr;
  curl_slist* slist = nullptr;
  char errbuf[CURL_ERROR_SIZE] = {};
  std::string range_header;     // what this attempt sent ("" for none)
  bool ask_range = false;       // a Range was sent
  bool ask_suffix = false;      // ... and it was bytes=-N
  uint64_t ask_a = 0;           // first byte asked
  bool ask_open = false;        // bytes=a- (kNone resume)
  uint64_t ask_b = 0;           // last byte asked (when !ask_open)
  Clock::time_point last_activity;
  // The attempt got a response byte: from then on a silence of stall_timeout_ms is a stall.
  // Before it, connecting and the server's think time are bounded by connect_timeout_ms
  // and the attempt's timeout_ms, which the caller may set past the stall time.
  bool responded = false;
  bool stalled = false;
  // Response (reset at every status line: 100 Continue and the like come first).
  long status = 0;
  std::string reason;
  std::string content_range;
  bool has_content_length = false;
  uint64_t content_length = 0;
  std::string etag;
  std::string last_modified;
  std::string content_type;
  std::string request_id;
  size_t request_id_rank = 0;   // the dialect's request_id_headers, earlier ones preferred
  int64_t retry_after_s = -1;
  // Body handling, decided once the headers are complete (BeginBody).
  bool begun = false;
  bool error_body_mode = false; // non-2xx: keep the start of the body for the message
  std::string error_body;
  bool holding = false;         // 2xx body that may be an error document: held back
  std::string held;
  uint64_t stream_start = 0;    // object offset of the first body byte
  uint64_t stream_pos = 0;      // body bytes seen
  bool stream_expected_known = false;
  uint64_t stream_expected = 0;
  uint64_t attempt_progress = 0;  // window bytes written by this attempt
  Status abort;                 // set by a callback: the request fails with it, unretried
};

// Run resets a request's outputs first, so a request may be run again.
void ResetOutputs(HttpRequest& r) {
  r.status = Status::Ok();
  r.missing = r.precondition_failed = r.permission_denied = r.not_modified = r.too_large = false;
  r.http_status = 0;
  r.etag.clear();
  r.last_modified.clear();
  r.object_size = 0;
  r.object_size_known = false;
  r.transferred = 0;
  r.body.clear();
  r.request_id.clear();
  r.attempts = 0;
  r.first_byte_s = r.total_s = 0;
}

bool IsWeakEtag(const std::string& e) { return e.size() >= 2 && e[0] == 'W' && e[1] == '/'; }

// Text for a request's range in messages, for what WithRange cannot say.
std::string RangeWords(const Transfer& t) {
  const HttpRequest& r = *t.req;
  if (r.method == "HEAD") return "HEAD";
  std::string s = "GET";
  if (r.range == RangeKind::kSuffix && !t.window_known) s += " bytes=-" + std::to_string(r.length);
  const std::string first = r.range == RangeKind::kRange
                                ? "bytes=" + std::to_string(r.offset) + "-" + std::to_string(r.offset + r.length - 1)
                                : std::string();
  if (!t.range_header.empty() && t.range_header != first &&
      !(r.range == RangeKind::kSuffix && !t.window_known)) {
    s += " (resumed with " + t.range_header + ")";
  }
  return s;
}

// "(GET, HTTP 503, request id X)".
std::string Detail(const Transfer& t) {
  std::string s = "(" + RangeWords(t);
  if (t.status != 0) {
    s += ", HTTP " + std::to_string(t.status);
    if (!t.reason.empty()) s += " " + t.reason;
  }
  if (!t.request_id.empty()) s += ", request id " + t.request_id;
  return s + ")";
}

size_t WriteCallback(char* data, size_t size, size_t nmemb, void* p);
size_t HeaderCallback(char* data, size_t size, size_t nmemb, void* p);

class CurlHttpClient final : public HttpClient {
 public:
  explicit CurlHttpClient(CurlProcess* proc) : proc_(proc) {}
  void RunStream(const std::function<HttpRequest*()>& next, const HttpClientOptions& options,
                 const std::function<void(HttpRequest&)>& on_done,
                 const std::function<bool()>& cancelled) override;

 private:
  CurlProcess* proc_;
};

// The Run loop's state; one per RunStream call, used only by the calling thread.
class Runner {
 public:
  Runner(CurlProcess* proc, const std::function<HttpRequest*()>& next, const HttpClientOptions& opt,
         const std::function<void(HttpRequest&)>& on_done, const std::function<bool()>& cancelled)
      : proc_(proc), lease_(proc), opt_(opt), next_(next), on_done_(on_done), cancelled_(cancelled),
        rng_(std::random_device{}()) {}

  /// Returns when `next` has nothing more and nothing is in flight (or on cancellation);
  /// rethrows the first exception of on_done once nothing is in flight.
  void Run();

 private:
  struct Due {
    Clock::time_point at;
    size_t index;
    bool operator>(const Due& o) const { return at > o.at; }
  };

  Transfer& NewTransfer(HttpRequest* req);
  void Begin(Transfer& t, Clock::time_point now);
  void StartAttempt(Transfer& t, Clock::time_point now);
  void OnAttemptDone(Transfer& t, CURLcode rc, Clock::time_point now);
  void EndAttempt(Transfer& t);
  void Retry(Transfer& t, Status err, bool immediate, Clock::time_point now);
  void Finish(Transfer& t, Status st);
  void CancelAll();
  Status TransportError(const Transfer& t, CURLcode rc, bool* retryable) const;
  Status HttpError(Transfer& t, bool* retryable);

  CurlProcess* proc_;
  MultiLease lease_;
  const HttpClientOptions& opt_;
  const std::function<HttpRequest*()>& next_;
  const std::function<void(HttpRequest&)>& on_done_;
  const std::function<bool()>& cancelled_;
  // Slots, at most max_in_flight in use (a deque: libcurl's callbacks hold their addresses).
  std::deque<Transfer> transfers_;
  std::vector<size_t> free_;
  std::priority_queue<Due, std::vector<Due>, std::greater<Due>> waiting_;
  std::vector<size_t> active_;
  size_t in_flight_ = 0;  // begun and not finished (active or waiting for a retry)
  bool ask_ = true;       // next_ may have a request (it is asked again after every finish)
  bool stop_ = false;     // an on_done threw: cancel what is left
  std::exception_ptr error_;
  std::mt19937_64 rng_;
};

// ---------------------------------------------------------------------------------------
// Callbacks (run inside curl_multi_perform on the calling thread).

// An exception must not unwind through libcurl's C frames (the multi handle would stay
// "inside a callback" for good, holding an easy handle whose Transfer is gone): it aborts the
// transfer instead (returning 0 makes libcurl fail it), as its typed error where possible.
template <typename F>
size_t Guarded(Transfer* t, F&& body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    try {
      t->abort = Status::ResourceExhausted("cannot allocate memory for the HTTP answer");
    } catch (...) {  // then the transfer fails as a write error
    }
  } catch (...) {
    try {
      t->abort = Status::Internal("exception while receiving the HTTP answer");
    } catch (...) {
    }
  }
  return 0;
}

size_t HeaderCallbackBody(char* data, size_t size, size_t nmemb, void* p) {
  auto* t = static_cast<Transfer*>(p);
  const size_t n = size * nmemb;
  t->last_activity = Clock::now();
  t->responded = true;
  std::string_view line = Trim(std::string_view(data, n));
  if (line.size() >= 5 && line.substr(0, 5) == "HTTP/") {
    // A new response (after 100 Continue, or a retry libcurl made itself): start over.
    t->status = 0;
    t->reason.clear();
    t->content_range.clear();
    t->has_content_length = false;
    t->etag.clear();
    t->last_modified.clear();
    t->content_type.clear();
    t->retry_after_s = -1;
    const size_t sp = line.find(' ');
    if (sp != std::string_view::npos) {
      std::string_view rest = line.substr(sp + 1);
      const size_t sp2 = rest.find(' ');
      uint64_t code = 0;
      if (ParseU64(rest.substr(0, sp2), &code) && code < 1000) t->status = static_cast<long>(code);
      if (sp2 != std::string_view::npos) t->reason = std::string(Trim(rest.substr(sp2 + 1)));
    }
    return n;
  }
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos) return n;
  const std::string_view name = Trim(line.substr(0, colon));
  const std::string_view value = Trim(line.substr(colon + 1));
  if (IEquals(name, "content-range")) {
    t->content_range = std::string(value);
  } else if (IEquals(name, "content-length")) {
    t->has_content_length = ParseU64(value, &t->content_length);
  } else if (IEquals(name, "etag")) {
    t->etag = std::string(value);
  } else if (IEquals(name, "last-modified")) {
    t->last_modified = std::string(value.substr(0, 100));
  } else if (IEquals(name, "content-type")) {
    t->content_type = std::string(value);
  } else if (IEquals(name, "retry-after")) {
    uint64_t s = 0;
    if (ParseU64(value, &s)) t->retry_after_s = static_cast<int64_t>(std::min<uint64_t>(s, 86400));
  } else {
    const std::vector<std::string>& ids = RequestIdHeaders(*t->opt);
    for (size_t k = 0; k < ids.size(); ++k) {
      const size_t rank = ids.size() - k;  // earlier names rank higher
      if (IEquals(name, ids[k]) && rank > t->request_id_rank && !value.empty()) {
        t->request_id = std::string(value.substr(0, 200));
        t->request_id_rank = rank;
      }
    }
  }
  return n;
}

// Decides, once the headers are in, where this attempt's body goes; checks the answer
// against what was asked. Returns false (and sets t.abort) when the request must fail.
bool PrepareData(Transfer& t);

bool BeginBody(Transfer& t) {
  t.begun = true;
  HttpRequest& r = *t.req;
  long code = 0;
  curl_easy_getinfo(t.easy, CURLINFO_RESPONSE_CODE, &code);
  if (code != 0) t.status = code;
  if (t.status < 200 || t.status > 299) {
    t.error_body_mode = true;
    return true;
  }
  // The object must not change under a request: once an ETag is known, later answers must
  // carry it too (If-Match asks the server to check; this catches servers that ignore it).
  if (!t.pinned_etag.empty() && !t.etag.empty() && t.etag != t.pinned_etag) {
    r.precondition_failed = true;
    t.abort = Status::IoError("object changed during the read (ETag " + t.pinned_etag + ", now " +
                                  t.etag + ") " + Detail(t),
                              ESTALE);
    return false;
  }
  if (!t.etag.empty()) r.etag = t.etag;
  if (!t.last_modified.empty()) r.last_modified = t.last_modified;
  if (r.method == "HEAD") {
    if (t.has_content_length) {
      r.object_size = t.content_length;
      r.object_size_known = true;
    }
    return true;
  }
  // A body that may be an error document standing in for the data (the provider says
  // which): hold it back, and check it against the range asked only once it turned out to
  // be data.
  const ErrorDialect* dialect = t.opt->dialect.get();
  if (dialect != nullptr && dialect->may_hide_error && dialect->may_hide_error(t.content_type)) {
    t.holding = true;
    return true;
  }
  return PrepareData(t);
}

// Ends a whole-object read whose body would pass max_body (size: what the answer announced,
// 0 when it did not say), before the buffer grows past the bound.
bool TooLarge(Transfer& t, uint64_t size) {
  HttpRequest& r = *t.req;
  r.too_large = true;
  r.body.clear();
  r.body.shrink_to_fit();
  t.abort = Status::InvalidFormat("object is " + (size != 0 ? std::to_string(size) + " bytes, " : std::string()) +
                                  "larger than the limit of " + std::to_string(r.max_body) + " bytes " + Detail(t));
  return false;
}

// Maps a 2xx answer's body onto the window (object offsets) after checking it against what
// was asked. Returns false (and sets t.abort) when the request must fail.
bool PrepareData(Transfer& t) {
  HttpRequest& r = *t.req;
  if (t.status == 206) {
    uint64_t a = 0, b = 0, total = 0;
    bool total_known = false;
    if (!ParseContentRange(t.content_range, &a, &b, &total, &total_known)) {
      t.abort = Status::DataLoss("206 answer with a missing or malformed Content-Range '" +
                                 t.content_range + "' " + Detail(t));
      return false;
    }
    std::string want;
    bool match = true;
    if (t.ask_suffix) {
      want = "the last " + std::to_string(r.length) + " bytes";
      if (!total_known) {
        match = false;
      } else {
        const uint64_t n = std::min<uint64_t>(r.length, total);
        match = n > 0 && a == total - n && b == total - 1;
      }
    } else if (t.ask_range) {
      want = "bytes " + std::to_string(t.ask_a) + "-" + (t.ask_open ? std::string() : std::to_string(t.ask_b));
      match = a == t.ask_a && (t.ask_open ? (!total_known || b == total - 1) : b == t.ask_b);
    } else {
      want = "the whole object";
      match = a == 0 && (!total_known || b == total - 1);
    }
    if (match && total_known && r.object_size_known && total != r.object_size) match = false;
    if (match && t.has_content_length && t.content_length != b - a + 1) match = false;
    if (!match) {
      t.abort = Status::DataLoss("server sent Content-Range '" + t.content_range + "'" +
                                 (t.has_content_length ? " with Content-Length " + std::to_string(t.content_length) : "") +
                                 " for " + want + " " + Detail(t));
      return false;
    }
    if (total_known) {
      r.object_size = total;
      r.object_size_known = true;
      if (t.window_open && r.dst == nullptr && r.max_body != 0 && total > r.max_body) return TooLarge(t, total);
    }
    if (t.ask_suffix) {
      t.window_known = true;
      t.win_start = a;
      t.win_len = b - a + 1;
    }
    t.stream_start = a;
    t.stream_expected_known = true;
    t.stream_expected = b - a + 1;
  } else {
    // 200 (or another 2xx): the whole object from byte 0.
    // A whole-object request that was resumed may get the whole object again: fine.
    if (t.ask_range && !t.window_open) {
      if (!t.has_content_length || t.content_length > t.opt->ignored_range_limit) {
        t.abort = Status::Unavailable(
            "server ignores Range requests: it answered 200 with the whole object (" +
            (t.has_content_length ? std::to_string(t.content_length) + " bytes" : std::string("size not given")) +
            ", more than the " + std::to_string(t.opt->ignored_range_limit) + " bytes taken that way) " + Detail(t));
        return false;
      }
      const uint64_t total = t.content_length;
      if (r.range == RangeKind::kSuffix && !t.window_known) {
        t.window_known = true;
        t.win_len = std::min<uint64_t>(r.length, total);
        t.win_start = total - t.win_len;
      }
      if (!t.window_open && t.win_start + t.win_len > total) {
        t.abort = Status::DataLoss("object is " + std::to_string(total) + " bytes, shorter than the range asked " + Detail(t));
        return false;
      }
    }
    // The bytes come again from the start: count them again (they are the same object,
    // pinned by ETag, so what was written before is overwritten with equal bytes).
    t.got = 0;
    if (t.window_open && r.dst == nullptr) r.body.clear();
    if (t.window_open && r.dst == nullptr && r.max_body != 0 && t.has_content_length &&
        t.content_length > r.max_body) {
      return TooLarge(t, t.content_length);
    }
    if (t.has_content_length) {
      r.object_size = t.content_length;
      r.object_size_known = true;
      // A declared length is a hint, not a promise: reserve at most 64 MiB up front (the body
      // grows geometrically past it), so a forged Content-Length cannot ask for terabytes.
      if (t.window_open && r.dst == nullptr) {
        r.body.reserve(static_cast<size_t>(std::min<uint64_t>(t.content_length, uint64_t{64} << 20)));
      }
    }
    t.stream_start = 0;
    t.stream_expected_known = t.has_content_length;
    t.stream_expected = t.content_length;
  }
  return true;
}

// Copies body bytes that fall inside the window; everything else is dropped.
bool Deliver(Transfer& t, const char* data, size_t n) {
  HttpRequest& r = *t.req;
  if (t.stream_expected_known && t.stream_pos + n > t.stream_expected) {
    t.abort = Status::DataLoss("server sent more than the " + std::to_string(t.stream_expected) +
                               " bytes it announced " + Detail(t));
    return false;
  }
  const uint64_t p0 = t.stream_start + t.stream_pos;
  const uint64_t p1 = p0 + n;
  t.stream_pos += n;
  const uint64_t lo = std::max(p0, t.win_start);
  const uint64_t hi = t.window_open ? p1 : std::min(p1, t.win_start + t.win_len);
  if (lo >= hi) return true;
  const uint64_t rel = lo - t.win_start;
  if (rel > t.got) {  // a gap: cannot happen for answers that passed BeginBody's checks
    t.abort = Status::Internal("HTTP body bytes out of order " + Detail(t));
    return false;
  }
  const size_t len = static_cast<size_t>(hi - lo);
  const char* src = data + (lo - p0);
  if (r.dst != nullptr) {
    // Never outside [dst, dst + length): the window is at most `length` long.
    if (rel + len > r.length) {
      t.abort = Status::Internal("HTTP body past the destination " + Detail(t));
      return false;
    }
    std::memcpy(r.dst + rel, src, len);
  } else {
    if (r.max_body != 0 && rel + len > r.max_body) return TooLarge(t, 0);
    if (r.max_body != 0 && r.body.capacity() < rel + len) {
      // Geometric growth, but never a buffer past the bound (a body without Content-Length).
      r.body.reserve(static_cast<size_t>(std::min<uint64_t>(r.max_body, std::max<uint64_t>(rel + len, 2 * r.body.capacity()))));
    }
    if (r.body.size() < rel + len) r.body.resize(rel + len);
    std::memcpy(r.body.data() + rel, src, len);
  }
  t.got = std::max(t.got, rel + len);
  t.attempt_progress += len;
  return true;
}

size_t HeaderCallback(char* data, size_t size, size_t nmemb, void* p) {
  return Guarded(static_cast<Transfer*>(p), [&] { return HeaderCallbackBody(data, size, nmemb, p); });
}

size_t WriteCallbackBody(char* data, size_t size, size_t nmemb, void* p) {
  auto* t = static_cast<Transfer*>(p);
  const size_t n = size * nmemb;
  t->last_activity = Clock::now();
  if (!t->begun && !BeginBody(*t)) return 0;  // 0: libcurl stops with CURLE_WRITE_ERROR
  if (t->error_body_mode) {
    const size_t keep = std::min(n, kErrorBodyLimit - std::min(kErrorBodyLimit, t->error_body.size()));
    t->error_body.append(data, keep);
    return n;
  }
  if (t->req->method == "HEAD") return n;
  if (t->holding) {
    t->held.append(data, n);
    if (t->held.size() <= kXmlHoldLimit) return n;
    // Too long for an error document: it is data after all.
    t->holding = false;
    std::string held = std::move(t->held);
    t->held.clear();
    return PrepareData(*t) && Deliver(*t, held.data(), held.size()) ? n : 0;
  }
  return Deliver(*t, data, n) ? n : 0;
}

size_t WriteCallback(char* data, size_t size, size_t nmemb, void* p) {
  return Guarded(static_cast<Transfer*>(p), [&] { return WriteCallbackBody(data, size, nmemb, p); });
}

// ---------------------------------------------------------------------------------------
// The loop.

Transfer& Runner::NewTransfer(HttpRequest* req) {
  size_t i;
  if (!free_.empty()) {
    i = free_.back();
    free_.pop_back();
    transfers_[i] = Transfer();
  } else {
    i = transfers_.size();
    transfers_.emplace_back();
  }
  Transfer& t = transfers_[i];
  t.req = req;
  t.index = i;
  t.opt = &opt_;
  return t;
}

void Runner::Run() {
  if (lease_.multi() == nullptr) {
    while (!stop_) {
      HttpRequest* req = next_();
      if (req == HttpClient::kSendNow) continue;  // nothing is sent here: ask again
      if (req == nullptr) break;
      Transfer& t = NewTransfer(req);
      t.phase = Phase::kActive;  // counted by Finish
      ++in_flight_;
      Finish(t, Status::ResourceExhausted("cannot create a libcurl multi handle"));
    }
    if (error_) std::rethrow_exception(error_);
    return;
  }
  // HTTP/1.1 only, so nothing to multiplex; keep up to 2x max_in_flight idle connections
  // (the default, 4x the handles currently added, shrinks when few are added).
  curl_multi_setopt(lease_.multi(), CURLMOPT_PIPELINING, CURLPIPE_NOTHING);
  curl_multi_setopt(lease_.multi(), CURLMOPT_MAXCONNECTS,
                    static_cast<long>(std::max<unsigned>(2 * std::max(1u, opt_.max_in_flight), 16)));

  const size_t max_in_flight = std::max(1u, opt_.max_in_flight);
  Clock::time_point next_cancel_check = Clock::now();

  // Whatever throws in the loop (an allocation in next_, a store's on_done work), the handles
  // still in libcurl's multi must be removed before the transfers they point to go away:
  // the multi outlives this call (one per thread).
  try {
    for (;;) {
      Clock::time_point now = Clock::now();
      if (stop_) break;
      if (cancelled_ && now >= next_cancel_check) {
        next_cancel_check = now + kCancelPoll;
        if (cancelled_()) break;
      }
      // Due retries first (they hold their in-flight slot), then new requests.
      while (!waiting_.empty() && waiting_.top().at <= now) {
        const size_t i = waiting_.top().index;
        waiting_.pop();
        if (transfers_[i].phase == Phase::kWaiting) StartAttempt(transfers_[i], now);
      }
      bool send_now = false;
      while (ask_ && in_flight_ < max_in_flight && !stop_) {
        HttpRequest* req = next_();
        if (req == HttpClient::kSendNow) {
          send_now = true;  // perform once, then ask again without waiting
          break;
        }
        if (req == nullptr) {
          ask_ = false;
          break;
        }
        Begin(NewTransfer(req), now);
      }
      if (in_flight_ == 0) {
        if (ask_ && !stop_) continue;  // a request finished at once (on_done may have given more)
        break;
      }
      // Stalls: no byte for stall_timeout_ms. Removing the handle closes its connection.
      for (size_t k = 0; k < active_.size();) {
        Transfer& t = transfers_[active_[k]];
        if (opt_.stall_timeout_ms > 0 && t.responded &&
            MsBetween(t.last_activity, now) >= static_cast<int64_t>(opt_.stall_timeout_ms)) {
          curl_multi_remove_handle(lease_.multi(), t.easy);
          t.stalled = true;
          OnAttemptDone(t, CURLE_OPERATION_TIMEDOUT, now);  // removes it from active_
          continue;
        }
        ++k;
      }

      int running = 0;
      const CURLMcode mc = curl_multi_perform(lease_.multi(), &running);
      if (mc != CURLM_OK && mc != CURLM_CALL_MULTI_PERFORM) {
        const Status st = Status::Internal(std::string("curl_multi_perform: ") + curl_multi_strerror(mc));
        while (!active_.empty()) {
          Transfer& t = transfers_[active_.back()];
          curl_multi_remove_handle(lease_.multi(), t.easy);
          EndAttempt(t);
          Finish(t, st);
        }
      }
      int left = 0;
      while (CURLMsg* msg = curl_multi_info_read(lease_.multi(), &left)) {
        if (msg->msg != CURLMSG_DONE) continue;
        Transfer* t = nullptr;
        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, reinterpret_cast<char**>(&t));
        const CURLcode rc = msg->data.result;
        curl_multi_remove_handle(lease_.multi(), msg->easy_handle);
        if (t != nullptr && rc == CURLE_OK) {
          // Timings of the attempt that delivered the body: the stores estimate from them
          // how many bytes one first-byte latency is worth (coalescing, object_store.cc).
          double first = 0, total = 0;
          curl_easy_getinfo(msg->easy_handle, CURLINFO_STARTTRANSFER_TIME, &first);
          curl_easy_getinfo(msg->easy_handle, CURLINFO_TOTAL_TIME, &total);
          t->req->first_byte_s = first;
          t->req->total_s = total;
        }
        if (t != nullptr) OnAttemptDone(*t, rc, Clock::now());
      }
      if (in_flight_ == 0 && !ask_) break;
      if (stop_ || send_now || (ask_ && in_flight_ < max_in_flight)) continue;  // refill before waiting

      // Wait for sockets, libcurl's own timers (curl_multi_poll honours them), the next
      // retry, the next possible stall, or the next cancellation check.
      now = Clock::now();
      Clock::time_point wake = now + (cancelled_ ? kCancelPoll : kIdlePoll);
      if (!waiting_.empty()) wake = std::min(wake, waiting_.top().at);
      for (size_t i : active_) {
        if (opt_.stall_timeout_ms == 0) break;
        if (!transfers_[i].responded) continue;
        wake = std::min(wake, transfers_[i].last_activity + std::chrono::milliseconds(opt_.stall_timeout_ms));
      }
      const int64_t wait_ms = std::max<int64_t>(0, MsBetween(now, wake));
      if (wait_ms > 0 || active_.empty()) {
        if (active_.empty() && !waiting_.empty()) {
          // Nothing in libcurl's hands: just sleep until the next retry (or cancel check).
          if (wait_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(wait_ms));
        } else if (!active_.empty()) {
          curl_multi_poll(lease_.multi(), nullptr, 0, static_cast<int>(wait_ms), nullptr);
        }
      }
    }
  } catch (...) {
    if (!error_) error_ = std::current_exception();
  }
  // Cancelled, an on_done threw, or the loop did: end what is still in flight (no-op when
  // nothing is).
  CancelAll();
  if (error_) std::rethrow_exception(error_);
}

// A request's first attempt.
void Runner::Begin(Transfer& t, Clock::time_point now) {
  HttpRequest& r = *t.req;
  t.phase = Phase::kActive;
  ++in_flight_;
  ResetOutputs(r);
  t.url_redacted = RedactSecrets(r.url);
  t.deadline = now + std::chrono::milliseconds(opt_.total_timeout_ms);
  t.pinned_etag = r.if_match;

  if (r.method != "GET" && r.method != "HEAD") {
    Finish(t, Status::InvalidArgument("HttpClient supports GET and HEAD, not '" + r.method + "'"));
    return;
  }
  if (r.url.empty()) {
    Finish(t, Status::InvalidArgument("HTTP request without a URL"));
    return;
  }
  if (r.method == "GET") {
    switch (r.range) {
      case RangeKind::kNone:
        t.window_known = t.window_open = true;
        break;
      case RangeKind::kRange:
        if (r.length > 0 && r.offset > UINT64_MAX - r.length) {
          Finish(t, Status::InvalidArgument("HTTP range overflows"));
          return;
        }
        t.window_known = true;
        t.win_start = r.offset;
        t.win_len = r.length;
        break;
      case RangeKind::kSuffix:
        break;
    }
    // Zero bytes wanted: nothing to ask (a Range cannot even say it).
    if (r.range != RangeKind::kNone && r.length == 0) {
      Finish(t, Status::Ok());
      return;
    }
  }
  StartAttempt(t, now);
}

void Runner::StartAttempt(Transfer& t, Clock::time_point now) {
  HttpRequest& r = *t.req;
  t.phase = Phase::kActive;
  const int64_t left_ms = MsBetween(now, t.deadline);
  if (left_ms <= 0) {
    Finish(t, Status::IoError("total timeout of " + std::to_string(opt_.total_timeout_ms) + " ms reached " + Detail(t),
                              ETIMEDOUT));
    return;
  }
  ++r.attempts;

  // Reset the attempt.
  t.range_header.clear();
  t.ask_range = t.ask_suffix = t.ask_open = false;
  t.ask_a = t.ask_b = 0;
  t.stalled = false;
  t.status = 0;
  t.reason.clear();
  t.content_range.clear();
  t.has_content_length = false;
  t.content_length = 0;
  t.etag.clear();
  t.last_modified.clear();
  t.content_type.clear();
  t.request_id.clear();
  t.request_id_rank = 0;
  t.retry_after_s = -1;
  t.begun = t.error_body_mode = t.holding = false;
  t.error_body.clear();
  t.held.clear();
  t.stream_start = t.stream_pos = 0;
  t.stream_expected_known = false;
  t.stream_expected = 0;
  t.attempt_progress = 0;
  t.abort = Status::Ok();
  t.errbuf[0] = '\0';

  Headers headers;
  if (r.method == "GET") {
    if (r.range == RangeKind::kSuffix && !t.window_known) {
      t.ask_range = t.ask_suffix = true;
      t.range_header = "bytes=-" + std::to_string(r.length);
    } else if (!t.window_open) {
      t.ask_range = true;
      t.ask_a = t.win_start + t.got;
      t.ask_b = t.win_start + t.win_len - 1;
      t.range_header = "bytes=" + std::to_string(t.ask_a) + "-" + std::to_string(t.ask_b);
    } else if (t.got > 0) {
      t.ask_range = t.ask_open = true;
      t.ask_a = t.got;
      t.range_header = "bytes=" + std::to_string(t.ask_a) + "-";
    }
    if (!t.range_header.empty()) headers.emplace_back("Range", t.range_header);
  }
  if (!t.pinned_etag.empty() && !IsWeakEtag(t.pinned_etag) && (r.attempts > 1 || !r.if_match.empty())) {
    headers.emplace_back("If-Match", t.pinned_etag);
  }
  if (!r.if_none_match.empty()) headers.emplace_back("If-None-Match", r.if_none_match);
  for (const auto& h : r.headers) headers.push_back(h);
  if (r.sign) {
    Status st = r.sign(r, &headers);
    if (!st.ok()) {
      Finish(t, st);
      return;
    }
  }
  for (const auto& [name, value] : headers) {
    const auto bad = [](const std::string& s) { return s.find_first_of(std::string_view("\r\n\0", 3)) != std::string::npos; };
    if (name.empty() || bad(name) || bad(value) || name.find(':') != std::string::npos) {
      Finish(t, Status::InvalidArgument("HTTP header with an empty name, ':', CR, LF or NUL: '" +
                                        RedactSecrets(name) + "'"));
      return;
    }
    // "Name;" is libcurl's way to send a header with an empty value.
    const std::string line = value.empty() ? name + ";" : name + ": " + value;
    curl_slist* s = curl_slist_append(t.slist, line.c_str());
    if (s == nullptr) {
      Finish(t, Status::ResourceExhausted("out of memory building HTTP headers"));
      return;
    }
    t.slist = s;
  }

  t.easy = lease_.TakeEasy();
  if (t.easy == nullptr) {
    Finish(t, Status::ResourceExhausted("cannot create a libcurl easy handle"));
    return;
  }
  CURL* e = t.easy;
  curl_easy_setopt(e, CURLOPT_URL, r.url.c_str());
  curl_easy_setopt(e, CURLOPT_PRIVATE, static_cast<void*>(&t));
  curl_easy_setopt(e, CURLOPT_SHARE, proc_->share);
  // Required with threads: no SIGALRM for DNS timeouts (the threaded resolver needs none),
  // and it makes libcurl send with MSG_NOSIGNAL.
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  // S3 offers only HTTP/1.1 and object_store measured h2 slower for bulk GETs; a pool of
  // h1 connections is also what max_in_flight counts.
  curl_easy_setopt(e, CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_1_1));
  curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");  // never file:// or others
  curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(e, CURLOPT_USERAGENT, "lsio");
  // Keepalive probes find connections that a NAT or load balancer dropped silently.
  curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(e, CURLOPT_TCP_KEEPIDLE, 30L);
  curl_easy_setopt(e, CURLOPT_TCP_KEEPINTVL, 15L);
  // 60 s of DNS caching (libcurl's default, explicit): endpoints like S3 rotate addresses,
  // so a longer cache would pin all traffic to a few hosts.
  curl_easy_setopt(e, CURLOPT_DNS_CACHE_TIMEOUT, 60L);
  // Reuse connections idle up to 30 s (default 118 s): servers close idle keep-alive
  // connections after a few seconds to a minute, and each stale one costs a failed send.
  curl_easy_setopt(e, CURLOPT_MAXAGE_CONN, 30L);
  curl_easy_setopt(e, CURLOPT_BUFFERSIZE, kBufferSize);
  curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(std::max<uint64_t>(1, opt_.connect_timeout_ms)));
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS,
                   static_cast<long>(std::max<int64_t>(1, std::min<int64_t>(static_cast<int64_t>(opt_.timeout_ms), left_ms))));
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, t.slist);
  curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, HeaderCallback);
  curl_easy_setopt(e, CURLOPT_HEADERDATA, static_cast<void*>(&t));
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, WriteCallback);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, static_cast<void*>(&t));
  curl_easy_setopt(e, CURLOPT_ERRORBUFFER, t.errbuf);
  curl_easy_setopt(e, CURLOPT_OPENSOCKETFUNCTION, OpenSocket);
  curl_easy_setopt(e, CURLOPT_OPENSOCKETDATA, static_cast<void*>(proc_));
  curl_easy_setopt(e, CURLOPT_CLOSESOCKETFUNCTION, CloseSocket);
  curl_easy_setopt(e, CURLOPT_CLOSESOCKETDATA, static_cast<void*>(proc_));
  if (r.method == "HEAD") curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
  if (!opt_.verify_ssl) {
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 0L);
  } else if (!opt_.ca_file.empty()) {
    curl_easy_setopt(e, CURLOPT_CAINFO, opt_.ca_file.c_str());
  }
  // A retry goes to a new connection: the old one may lead to an overloaded or broken
  // server behind the load balancer, or be half dead.
  if (r.attempts > 1) curl_easy_setopt(e, CURLOPT_FRESH_CONNECT, 1L);

  t.last_activity = now;
  t.responded = false;
  const CURLMcode mc = curl_multi_add_handle(lease_.multi(), e);
  if (mc != CURLM_OK) {
    EndAttempt(t);
    Finish(t, Status::Internal(std::string("curl_multi_add_handle: ") + curl_multi_strerror(mc)));
    return;
  }
  active_.push_back(t.index);
}

// Gives back the attempt's easy handle and header list.
void Runner::EndAttempt(Transfer& t) {
  if (t.easy != nullptr) {
    lease_.GiveEasy(t.easy);
    t.easy = nullptr;
  }
  if (t.slist != nullptr) {
    curl_slist_free_all(t.slist);
    t.slist = nullptr;
  }
  auto it = std::find(active_.begin(), active_.end(), t.index);
  if (it != active_.end()) {
    *it = active_.back();
    active_.pop_back();
  }
}

Status Runner::TransportError(const Transfer& t, CURLcode rc, bool* retryable) const {
  long os_errno = 0;
  if (t.easy != nullptr) curl_easy_getinfo(t.easy, CURLINFO_OS_ERRNO, &os_errno);
  std::string what = t.errbuf[0] != '\0' ? std::string(t.errbuf) : std::string(curl_easy_strerror(rc));
  int err = os_errno != 0 ? static_cast<int>(os_errno) : EIO;
  *retryable = true;
  switch (rc) {
    case CURLE_OPERATION_TIMEDOUT:
      err = ETIMEDOUT;
      if (t.stalled) what = "no data for " + std::to_string(opt_.stall_timeout_ms) + " ms (stalled)";
      break;
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_CONNECT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_HTTP3:
    case CURLE_WEIRD_SERVER_REPLY:
      break;
    default:  // TLS verification, bad URL, unsupported protocol, out of memory, ...
      *retryable = false;
      break;
  }
  return Status::IoError(what + " " + Detail(t), err);
}

// The error for a non-2xx answer (or missing = true for 404/410: Ok).
Status Runner::HttpError(Transfer& t, bool* retryable) {
  HttpRequest& r = *t.req;
  *retryable = false;
  std::string text = "HTTP " + std::to_string(t.status);
  std::string server;
  if (const ErrorDialect* d = opt_.dialect.get(); d != nullptr && d->describe) {
    const std::string words = d->describe(t.error_body);
    if (!words.empty()) server = ": " + words.substr(0, 400);
  }
  const long s = t.status;
  if (s == 404 || s == 410) {
    // A missing bucket is no missing object: reading it as the fill value would be wrong,
    // and "no zarr.json" would not say what is wrong.
    if (const ErrorDialect* d = opt_.dialect.get(); d != nullptr && d->missing_container &&
                                                    d->missing_container(t.error_body)) {
      return Status::IoError("the bucket does not exist" + server + " " + Detail(t), ENOENT);
    }
    r.missing = true;
    return Status::Ok();
  }
  if (s == 304 && !r.if_none_match.empty()) {
    r.not_modified = true;
    if (!t.etag.empty()) r.etag = t.etag;
    return Status::Ok();
  }
  if (s == 412) {
    r.precondition_failed = true;
    return Status::IoError("precondition failed: If-Match " + t.pinned_etag + " no longer matches" + server + " " +
                               Detail(t),
                           ESTALE);
  }
  if (s == 401 || s == 403) {
    r.permission_denied = true;
    return Status::IoError("permission denied" + server + " " + Detail(t), EACCES);
  }
  if (s == 416) {
    uint64_t total = 0;
    if (ParseUnsatisfiedRange(t.content_range, &total)) {
      r.object_size = total;
      r.object_size_known = true;
      // The last N bytes of an empty object: nothing, which is the right answer.
      if (r.range == RangeKind::kSuffix && total == 0) return Status::Ok();
      text = "range not satisfiable: the object is " + std::to_string(total) + " bytes";
    } else {
      text = "range not satisfiable";
    }
    return Status::IoError(text + server + " " + Detail(t), EIO);
  }
  if (s == 408 || s == 429 || (s >= 500 && s <= 599)) *retryable = true;
  return Status::IoError("request failed" + server + " " + Detail(t), EIO);
}

void Runner::OnAttemptDone(Transfer& t, CURLcode rc, Clock::time_point now) {
  HttpRequest& r = *t.req;
  if (t.status != 0) r.http_status = t.status;
  if (t.status != 0 && opt_.endpoint_answered != nullptr) opt_.endpoint_answered->store(true, std::memory_order_relaxed);
  if (!t.request_id.empty()) r.request_id = t.request_id;
  // A HEAD or an empty body never reached the write callback.
  if (rc == CURLE_OK && !t.begun && !BeginBody(t)) rc = CURLE_WRITE_ERROR;
  if (rc == CURLE_OK && t.holding) {
    // A held 2xx body: an error document where data should be (S3's "200 OK" then
    // <Error><Code>SlowDown</Code>...) is retried; anything else is the data.
    const ErrorDialect* d = opt_.dialect.get();
    const std::string words = d != nullptr && d->retry_in_body ? d->retry_in_body(t.held) : std::string();
    if (!words.empty()) {
      Status err = Status::IoError("server error " + words.substr(0, 400) + " in a " + std::to_string(t.status) +
                                       " answer " + Detail(t),
                                   EAGAIN);
      EndAttempt(t);
      Retry(t, std::move(err), false, now);
      return;
    }
    t.holding = false;
    std::string held = std::move(t.held);
    t.held.clear();
    if (!PrepareData(t) || !Deliver(t, held.data(), held.size())) rc = CURLE_WRITE_ERROR;
  }
  if (!t.abort.ok()) {  // a callback refused the answer: final
    Status st = t.abort;
    EndAttempt(t);
    Finish(t, std::move(st));
    return;
  }

  const bool success_answer = t.status >= 200 && t.status <= 299;
  bool truncated = false;
  if (rc == CURLE_OK && success_answer && r.method == "GET") {
    if (t.stream_expected_known && t.stream_pos < t.stream_expected) truncated = true;
    if (!t.window_open && t.got < t.win_len) truncated = true;
    if (t.window_open && r.object_size_known && t.got < r.object_size) truncated = true;
  }
  if (rc != CURLE_OK || truncated) {
    bool retryable = true;
    Status err;
    if (truncated) {
      err = Status::IoError("body cut short: " + std::to_string(t.stream_pos) + " of " +
                                std::to_string(t.stream_expected) + " bytes " + Detail(t),
                            EIO);
    } else {
      err = TransportError(t, rc, &retryable);
    }
    if (!retryable) {
      EndAttempt(t);
      Finish(t, std::move(err));
      return;
    }
    // A 2xx body that broke off: go on from where it stopped, pinned to the object's ETag.
    // Without a strong ETag the rest could come from another version, so start over.
    bool immediate = false;
    if (success_answer && r.method == "GET" && t.begun && !t.error_body_mode) {
      if (!r.etag.empty() && !IsWeakEtag(r.etag) && t.pinned_etag.empty()) t.pinned_etag = r.etag;
      if (t.pinned_etag.empty() || IsWeakEtag(t.pinned_etag)) {
        t.got = 0;
        if (t.window_open && r.dst == nullptr) r.body.clear();
      }
      immediate = t.attempt_progress > 0;  // progress was made: no reason to wait
    }
    EndAttempt(t);
    Retry(t, std::move(err), immediate, now);
    return;
  }

  if (!success_answer) {
    bool retryable = false;
    Status err = HttpError(t, &retryable);
    EndAttempt(t);
    if (retryable) {
      Retry(t, std::move(err), false, now);
    } else {
      Finish(t, std::move(err));
    }
    return;
  }
  if (!r.etag.empty() && !IsWeakEtag(r.etag) && t.pinned_etag.empty()) t.pinned_etag = r.etag;
  EndAttempt(t);
  Finish(t, Status::Ok());
}

void Runner::Retry(Transfer& t, Status err, bool immediate, Clock::time_point now) {
  HttpRequest& r = *t.req;
  const std::string after = " after " + std::to_string(r.attempts) + (r.attempts == 1 ? " attempt" : " attempts");
  // Nothing listening at an address that never answered is far more often a wrong endpoint
  // than a server restarting: a few quick attempts, not the full schedule (17 s to say so).
  // Once the endpoint has answered, a refusal is a restart and gets the whole schedule.
  const bool refused = err.error_number() == ECONNREFUSED &&
                       !(opt_.endpoint_answered != nullptr && opt_.endpoint_answered->load(std::memory_order_relaxed));
  const unsigned max_attempts = refused ? std::min(kRefusedAttempts, opt_.max_attempts) : opt_.max_attempts;
  if (r.attempts >= std::max(1u, max_attempts)) {
    Finish(t, Reworded(err, err.message() + after +
                                (refused ? " (connection refused: is the endpoint's host and port right?)" : "")));
    return;
  }
  uint64_t delay_ms = 0;
  if (!immediate) {
    // Exponential backoff with full jitter: uniform in [0, min(cap, base * 2^k)].
    const unsigned k = std::min(t.backoffs, 40u);
    const uint64_t cap = std::min<uint64_t>(opt_.retry_max_delay_ms,
                                            k >= 40 ? UINT64_MAX : opt_.retry_base_delay_ms << k);
    delay_ms = cap == 0 ? 0 : std::uniform_int_distribution<uint64_t>(0, cap)(rng_);
    // A server's Retry-After is a floor, within our cap.
    if (t.retry_after_s >= 0) {
      delay_ms = std::max<uint64_t>(delay_ms, std::min<uint64_t>(opt_.retry_max_delay_ms,
                                                                 static_cast<uint64_t>(t.retry_after_s) * 1000));
    }
    ++t.backoffs;
  }
  const Clock::time_point at = now + std::chrono::milliseconds(delay_ms);
  if (at >= t.deadline) {
    Finish(t, Reworded(err, err.message() + after + " (total timeout of " + std::to_string(opt_.total_timeout_ms) +
                                " ms reached)"));
    return;
  }
  t.phase = Phase::kWaiting;
  t.retry_at = at;
  waiting_.push({at, t.index});
}

void Runner::Finish(Transfer& t, Status st) {
  HttpRequest& r = *t.req;
  if (t.easy != nullptr || t.slist != nullptr) EndAttempt(t);
  if (st.ok()) {
    if (r.method == "GET" && !r.missing) {
      r.transferred = t.window_open ? (r.dst == nullptr ? r.body.size() : t.got) : t.got;
    }
  } else {
    st.WithPath(t.url_redacted.empty() ? RedactSecrets(r.url) : t.url_redacted);
    if (r.range == RangeKind::kRange && r.length > 0) {
      st.WithRange(r.offset, r.length);
    } else if (r.range == RangeKind::kSuffix && t.window_known) {
      st.WithRange(t.win_start, t.win_len);
    }
  }
  r.status = std::move(st);
  t.phase = Phase::kDone;
  --in_flight_;
  free_.push_back(t.index);  // nothing refers to the slot any more: reusable by the next request
  ask_ = true;               // the caller may have more to give now (memory freed by on_done)
  if (!on_done_) return;
  try {
    on_done_(r);
  } catch (...) {
    // Propagated by Run once nothing is in flight; later exceptions (from the cancelled
    // requests' on_done) are dropped.
    if (!error_) error_ = std::current_exception();
    stop_ = true;
  }
}

void Runner::CancelAll() {
  // First every handle out of the thread's multi (C calls that cannot throw): whatever the
  // second pass meets (an allocation failing while it names the requests), libcurl then
  // holds nothing that points into this call's transfers.
  for (Transfer& t : transfers_) {
    if (t.phase != Phase::kDone && t.easy != nullptr) curl_multi_remove_handle(lease_.multi(), t.easy);
  }
  for (Transfer& t : transfers_) {
    if (t.phase == Phase::kDone) continue;
    if (t.phase == Phase::kQueued) {
      t.phase = Phase::kActive;
      ++in_flight_;
      t.req->attempts = 0;
    }
    Finish(t, Status::Cancelled("HTTP request cancelled " + Detail(t)));
  }
}

void CurlHttpClient::RunStream(const std::function<HttpRequest*()>& next, const HttpClientOptions& options,
                               const std::function<void(HttpRequest&)>& on_done,
                               const std::function<bool()>& cancelled) {
  Runner runner(proc_, next, options, on_done, cancelled);
  runner.Run();
}

}  // namespace

void HttpClient::Run(std::span<HttpRequest> requests, const HttpClientOptions& options,
                     const std::function<void(size_t)>& on_done, const std::function<bool()>& cancelled) {
  if (requests.empty()) return;
  size_t given = 0;
  std::exception_ptr error;
  try {
    RunStream([&]() -> HttpRequest* { return given < requests.size() ? &requests[given++] : nullptr; }, options,
              [&](HttpRequest& r) {
                if (on_done) on_done(static_cast<size_t>(&r - requests.data()));
              },
              cancelled);
  } catch (...) {
    error = std::current_exception();
  }
  // Cancelled (or an on_done threw) before these started: they end kCancelled too, so that
  // on_done runs once per request; the first exception propagates after them.
  for (; given < requests.size(); ++given) {
    HttpRequest& r = requests[given];
    ResetOutputs(r);
    r.status = Status::Cancelled("HTTP request cancelled before it was sent").WithPath(RedactSecrets(r.url));
    if (!on_done) continue;
    try {
      on_done(given);
    } catch (...) {
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
}

namespace {

CurlProcess::CurlProcess() {
  // Reference-counted by libcurl, so a forked child calling it again is harmless; it is
  // thread-safe where curl_version_info reports CURL_VERSION_THREADSAFE (7.84+, Debian 12).
  const CURLcode rc = curl_global_init(CURL_GLOBAL_DEFAULT);
  if (rc != CURLE_OK) {
    init = Status::Unavailable(std::string("libcurl cannot be initialised: ") + curl_easy_strerror(rc));
    return;
  }
  share = curl_share_init();
  if (share == nullptr) {
    init = Status::Unavailable("libcurl cannot create a share handle");
    return;
  }
  curl_share_setopt(share, CURLSHOPT_USERDATA, static_cast<void*>(this));
  curl_share_setopt(share, CURLSHOPT_LOCKFUNC, ShareLock);
  curl_share_setopt(share, CURLSHOPT_UNLOCKFUNC, ShareUnlock);
  curl_share_setopt(share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
  curl_share_setopt(share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
  client = std::make_unique<CurlHttpClient>(this);
}

CurlProcess::~CurlProcess() {
  // Only reached if a ProcessLocal is destroyed in the process that built it; the process
  // slot below never is (threads may still hold easy handles that point at the share).
  if (share != nullptr) curl_share_cleanup(share);
}

// Leaked on purpose: thread_local ThreadCurls of threads that outlive static destruction
// still point into it.
ProcessLocal<CurlProcess>* const g_curl = new ProcessLocal<CurlProcess>([] { return new CurlProcess(); });

}  // namespace

Result<HttpClient*> ProcessHttpClient() {
  CurlProcess& proc = g_curl->Get();
  if (!proc.init.ok()) return proc.init;
  return static_cast<HttpClient*>(proc.client.get());
}

}  // namespace lsio
