// HttpClient: many HTTP(S) GET/HEAD requests in flight at once over libcurl's multi interface,
// with connection reuse, retries and byte-range checks. The transport under the remote stores
// (store/object_store.*); it knows nothing of Zarr, S3 or keys.
//
// Usage:
//   1. HttpClientOptions opt;  opt.max_in_flight = 32;  ...
//      HttpClient& client = ProcessHttpClient();        // one per process, rebuilt after fork
//   2. Fill HttpRequests: url, method, range, if_match, headers, dst (room for the range) or
//      dst == nullptr to receive the body in `body`; an optional `sign` callback adds the
//      per-attempt signature headers (SigV4 dates change between retries).
//   3. client.Run(requests, opt, on_done, cancelled): returns once every request is finished;
//      on_done(i) runs on the calling thread as soon as request i is finished (ok or not, after
//      its retries, cancelled included: exactly once per request), so the caller can decode it
//      while other requests are still in flight. on_done may call Run again (it gets its own
//      multi handle). An exception thrown by on_done cancels the requests still in flight
//      (their on_done runs, its own exceptions dropped) and then propagates out of Run.
//      Or client.RunStream(next, opt, on_done, cancelled), when the requests are not all known
//      up front: next() runs on the calling thread whenever fewer than max_in_flight requests
//      are in flight and returns another request (kept alive and untouched by the caller until
//      its on_done) or nullptr when it has none to give now; it is asked again after every
//      finished request, and RunStream returns once it gave nullptr with nothing in flight.
//      A reader that refills as requests finish keeps the link busy, where waiting for the
//      slowest request of each batch leaves it idle (the executor's remote workers).
//   4. Read each request's outcome: status (Ok, or the final error), http_status, etag,
//      object_size, transferred, request_id, attempts, missing (404/410). Run resets the
//      outputs first, so a request may be run again.
//
// Semantics:
//   - Range kinds: kNone (whole object), kRange (bytes=offset-(offset+length-1)), kSuffix
//     (bytes=-length). A 206 must carry a Content-Range that matches what was asked (suffix:
//     the last min(length, size) bytes) and a Content-Length (if any) equal to its span;
//     anything else, a missing Content-Range included, fails with kDataLoss naming both (an
//     object shorter than a kRange is such a mismatch). object_size comes from Content-Range's
//     total (206) or Content-Length (200). transferred counts the bytes of the range written
//     (kSuffix: min(length, size), at dst[0..)); for kNone, the body's size.
//   - length 0 with kRange/kSuffix: Ok at once, no request (a Range header cannot say it).
//     kSuffix of an empty object (S3 answers 416 "bytes */0"): Ok, transferred 0.
//     Any other 416: kIoError (EIO) naming the object's size when the server gave it.
//   - A 200 answer to a range request: when the whole object is <= ignored_range_limit bytes
//     (by its Content-Length), the wanted bytes are taken from it; else kUnavailable "server
//     ignores Range requests". Not retried.
//   - 404 and 410: missing = true, status Ok (callers decide what absent means).
//   - 412 (If-Match failed): kIoError with errno ESTALE and precondition_failed = true; the
//     store words it ("changed since its index was read"), keeping the server's code,
//     message and request id. Never retried.
//   - 304 (If-None-Match matched): Ok with not_modified = true, etag from the answer, no body.
//   - Weak ETags (W/"...") are never sent in If-Match (it compares strongly: a conforming
//     server answers 412 to every such request); a resumed body without a strong ETag
//     starts over.
//   - Bounded bodies: a whole-object GET with max_body never buffers more than max_body
//     bytes (Content-Length checked before the first byte; chunked bodies as they come);
//     2xx XML bodies held back to look for an S3 <Error> are bounded the same way.
//   - 401/403: kIoError with errno EACCES and permission_denied = true. Never retried.
//   - Any other non-2xx answer not retried below: kIoError (errno EIO) with the status.
//   - Retried with exponential backoff and full jitter (uniform in [0, min(retry_max_delay_ms,
//     retry_base_delay_ms * 2^k)]; a Retry-After header is a floor within that cap), each time
//     on a fresh connection (CURLOPT_FRESH_CONNECT): connection errors (refused, reset, DNS,
//     TLS handshake, nothing or garbage received), timeouts, a stall (no byte for
//     stall_timeout_ms once the answer began; 0 disables; before its first byte the attempt
//     is bounded by connect_timeout_ms and timeout_ms), 408, 429, 5xx, and an error document served as a 2xx
//     body in place of the data when the provider's ErrorDialect says it asks for a retry
//     (S3's SlowDown: store/s3.cc). TLS verification
//     failures and bad URLs are not retried. A request waiting for its retry keeps its
//     max_in_flight slot (backing off must lower the load).
//   - A body cut short (connection closed or reset, or fewer bytes than Content-Length /
//     Content-Range promised) is resumed at once (no backoff when the attempt made progress)
//     with a Range request for the rest (kNone: bytes=N-), pinned with If-Match to the ETag
//     of the first answer; without a strong ETag the read starts over instead. From then on
//     every answer must carry that ETag: a 412, or an answer with another ETag, ends the
//     request with precondition_failed (the object changed during the read).
//   - Bounded by max_attempts and total_timeout_ms per request (an attempt's timeout is
//     clipped to what is left), then the last error with "after N attempts".
//   - Bytes are written only inside [dst, dst + length) (kRange/kSuffix) or into `body`.
//   - Errors name the URL with RedactSecrets applied (no query signatures, no tokens) in
//     Status::path(), the range in Status::WithRange (kRange; kSuffix once its place is known;
//     the message says "bytes=-N" before that and the Range of a resumed attempt), and in the
//     message the HTTP status, the provider's words for the error (ErrorDialect::describe)
//     and the server's request id (ErrorDialect::request_id_headers) when given. errno: ESTALE (412),
//     EACCES (401/403), ETIMEDOUT (timeout, stall), the socket's errno for connection
//     errors (ECONNREFUSED, ECONNRESET, EPIPE), else EIO.
//   - Methods other than GET/HEAD, and header names or values with CR, LF or NUL, fail with
//     kInvalidArgument before any request is sent.
//   - cancelled() is polled about every 20 ms on the calling thread; when it returns true,
//     unfinished requests end with kCancelled and Run returns promptly.
//
// Fork and threads: curl_global_init runs once per process; the DNS cache and TLS sessions
// are shared between the calling threads through a CURLSH guarded by mutexes (one per kind
// of data); every thread drives its own CURLM, kept across its Run calls because it holds
// that thread's connection cache: keep-alive connections are reused by the same thread only.
// (The connection cache is not put in the CURLSH: libcurl 7.88 documents sharing connections
// between concurrent threads as unsupported.) The CURLSH lives in a ProcessLocal and each
// thread's CURLM is checked against the fork generation, so a forked child builds fresh
// handles, closes its inherited copies of the parent's sockets (without shutdown(), so the
// parent's connections live on) and never sends a byte on a connection its parent opened.
// Run may be called from many threads at once; a single request is never touched by two
// threads. The process's SIGPIPE disposition is left alone (libcurl sends with MSG_NOSIGNAL).
#pragma once

#include <cstdint>
#include <functional>
#include <atomic>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "lsio/status.h"

namespace lsio {

/// How a provider's servers say what went wrong. The transport knows HTTP only; what an
/// error body means, and which header names the request, is the provider's (store/s3.cc,
/// store/gcs.cc, store/http.cc) and is passed in here.
struct ErrorDialect {
  /// Response headers that carry the server's request id, the most telling first.
  std::vector<std::string> request_id_headers = {"x-request-id"};
  /// The provider's own words in an error body ("Code: Message"), "" if none.
  std::function<std::string(std::string_view body)> describe;
  /// Whether a 2xx answer of this Content-Type may be an error document standing in for the
  /// data (S3's "200 OK" with <Error><Code>SlowDown</Code>): such a body is held back (up to
  /// 64 KiB) until retry_in_body has looked at it.
  std::function<bool(std::string_view content_type)> may_hide_error;
  /// Non-empty: the held 2xx body is an error document asking to be retried (its words for
  /// the message); empty: it is the data.
  std::function<std::string(std::string_view body)> retry_in_body;
  /// True when a 404 body says the container itself (S3/GCS bucket) does not exist: the
  /// request then fails with ENOENT instead of reading as a missing object.
  std::function<bool(std::string_view body)> missing_container;
};

struct HttpClientOptions {
  /// Set once any request of these options got an HTTP answer: a refused connection is then
  /// a server restarting (the full retry schedule), before it a likely wrong endpoint (a few
  /// quick attempts). Shared by copies of the options (one store's requests).
  std::shared_ptr<std::atomic<bool>> endpoint_answered = std::make_shared<std::atomic<bool>>(false);
  unsigned max_in_flight = 32;          ///< requests in flight per Run call
  uint64_t timeout_ms = 30000;          ///< one attempt, connect to last byte
  uint64_t connect_timeout_ms = 5000;
  uint64_t stall_timeout_ms = 15000;    ///< no byte for this long once the answer began: retry
  unsigned max_attempts = 10;           ///< per request, the first included
  uint64_t total_timeout_ms = 180000;   ///< per request, all attempts and backoff
  uint64_t retry_base_delay_ms = 100;
  uint64_t retry_max_delay_ms = 15000;
  bool verify_ssl = true;
  std::string ca_file;                  ///< empty: the system CA store
  uint64_t ignored_range_limit = 16u << 20;
  /// The provider's error vocabulary; null: plain HTTP (x-request-id, no body parsing).
  std::shared_ptr<const ErrorDialect> dialect;
};

enum class RangeKind { kNone, kRange, kSuffix };

struct HttpRequest {
  // --- in ---
  std::string url;
  std::string method = "GET";           ///< GET or HEAD
  RangeKind range = RangeKind::kNone;
  uint64_t offset = 0;                  ///< kRange
  uint64_t length = 0;                  ///< kRange, kSuffix: bytes wanted
  std::string if_match;                 ///< sent as If-Match when not empty (a strong ETag, quoted)
  /// Sent as If-None-Match when not empty (an ETag, strong or weak: the server compares
  /// weakly): a 304 answer then ends the request Ok with not_modified set and no body.
  std::string if_none_match;
  /// Whole-object GETs (kNone into `body`): the most bytes the body may have; 0 = no bound.
  /// A Content-Length above it, or a body growing past it, ends the request with
  /// kInvalidFormat and too_large set before more than max_body bytes are buffered.
  uint64_t max_body = 0;
  std::vector<std::pair<std::string, std::string>> headers;  ///< extra headers, every attempt
  /// Called before every attempt with the headers that attempt sends (Range, If-Match and
  /// `headers` already in); appends its own (Authorization, x-amz-date, ...). An error ends
  /// the request with that status, unretried.
  std::function<Status(const HttpRequest&, std::vector<std::pair<std::string, std::string>>*)> sign;
  uint8_t* dst = nullptr;               ///< kRange/kSuffix: room for `length` bytes; else null
  // --- out ---
  Status status;
  bool missing = false;                 ///< 404/410
  bool precondition_failed = false;     ///< 412
  bool permission_denied = false;       ///< 401/403
  bool not_modified = false;            ///< 304 to if_none_match (status Ok, no body)
  bool too_large = false;               ///< the body would pass max_body (status kInvalidFormat)
  long http_status = 0;                 ///< of the last attempt (0: no answer)
  std::string etag;                     ///< as sent by the server, quotes kept
  std::string last_modified;            ///< the Last-Modified header, as sent
  uint64_t object_size = 0;             ///< whole object's size, when the answer told it
  bool object_size_known = false;
  uint64_t transferred = 0;             ///< bytes written to dst (or body)
  std::string body;                     ///< the body when dst == nullptr (kNone, HEAD: empty)
  std::string request_id;
  unsigned attempts = 0;
  /// The caller's own tag (RunStream callers find their state from the request); untouched.
  void* user = nullptr;
  /// Of the last attempt that completed its transfer (libcurl's timers, seconds from its
  /// start): time to the first byte of the response, and to its end.
  double first_byte_s = 0;
  double total_s = 0;
};

class HttpClient {
 public:
  virtual ~HttpClient() = default;
  /// Runs every request (see the header comment); returns when all are finished. On
  /// cancellation, requests not yet started end kCancelled too (on_done once per request).
  void Run(std::span<HttpRequest> requests, const HttpClientOptions& options,
           const std::function<void(size_t)>& on_done, const std::function<bool()>& cancelled = {});
  /// What `next` may return to have the requests it gave so far sent now, before it is
  /// asked again (at once, without waiting for a request to finish): a caller that does
  /// work of its own inside next() (a disk cache serving reads) gets its requests on the
  /// wire first, so that they overlap that work.
  static inline HttpRequest* const kSendNow = reinterpret_cast<HttpRequest*>(alignof(HttpRequest));
  /// Runs requests as `next` gives them (see the header comment). On cancellation, `next` is
  /// not asked again; the requests it gave end kCancelled.
  virtual void RunStream(const std::function<HttpRequest*()>& next, const HttpClientOptions& options,
                         const std::function<void(HttpRequest&)>& on_done,
                         const std::function<bool()>& cancelled = {}) = 0;
};

/// The process's client (created on first use, again in a forked child). Fails with
/// kUnavailable when libcurl cannot be initialised.
Result<HttpClient*> ProcessHttpClient();

}  // namespace lsio
