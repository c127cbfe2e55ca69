// TestHttpServer: a scripted HTTP/1.1 server on 127.0.0.1 for the HttpClient tests.
//
// Every fault the client must survive is produced exactly: the handler sees each parsed
// request (with the connection it came on) and writes whatever bytes it likes, then may
// close the connection, reset it (RST), or sleep. Connections are kept alive between
// requests unless the handler closes them, so tests can count connections to see reuse.
//
// Usage:
//   TestHttpServer server([](const SeenRequest& req, ServerConnection& conn) {
//     conn.Send(HttpResponse(200, {{"ETag", "\"v1\""}}, "hello"));
//   });
//   client request url = server.Url("/key");
//   ... server.connections(), server.requests() to check what the client did.
//
// One thread accepts; each connection gets its own thread, so handlers run concurrently and
// must be thread-safe. The destructor wakes sleeping handlers, shuts every connection down
// and joins all threads. GET/HEAD only: request bodies are not read.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace lsio::testing {

struct SeenRequest {
  int connection = 0;      ///< 1-based, in accept order
  int seq_on_connection = 0;  ///< 1 for the first request on its connection
  std::string method;
  std::string target;      ///< "/path?query"
  std::vector<std::pair<std::string, std::string>> headers;
  /// Value of the header `name` (case-insensitive), or "" when absent.
  std::string Header(std::string_view name) const;
  bool HasHeader(std::string_view name) const;
};

class TestHttpServer;

class ServerConnection {
 public:
  /// Writes all bytes (MSG_NOSIGNAL); false once the peer is gone.
  bool Send(std::string_view bytes);
  /// Orderly close (FIN) after what was sent.
  void Close();
  /// Abortive close: SO_LINGER 0, so the peer gets a RST.
  void Reset();
  /// Sleeps up to `ms`; returns early (false) when the server stops.
  bool Sleep(int ms);
  int id() const { return id_; }
  bool closed() const { return fd_ < 0; }

 private:
  friend class TestHttpServer;
  ServerConnection(TestHttpServer* server, int fd, int id) : server_(server), fd_(fd), id_(id) {}
  TestHttpServer* server_;
  int fd_;
  int id_;
};

using Handler = std::function<void(const SeenRequest&, ServerConnection&)>;

/// "HTTP/1.1 <status> <reason>\r\n" + headers + Content-Length (unless given) + body.
std::string HttpResponse(int status, const std::vector<std::pair<std::string, std::string>>& headers,
                         std::string_view body, bool add_content_length = true);

class TestHttpServer {
 public:
  explicit TestHttpServer(Handler handler);
  ~TestHttpServer();
  TestHttpServer(const TestHttpServer&) = delete;
  TestHttpServer& operator=(const TestHttpServer&) = delete;

  uint16_t port() const { return port_; }
  std::string Url(std::string_view path) const;
  int connections() const { return connections_.load(); }
  std::vector<SeenRequest> requests() const;
  size_t request_count() const;
  /// The next `n` accepted connections are reset after `delay_ms` without reading anything,
  /// and from now on accepted sockets get a small receive buffer, so that a client sending a
  /// large request is still writing when the RST arrives (the SIGPIPE test).
  void ResetNextConnections(int n, int delay_ms);

 private:
  friend class ServerConnection;
  void AcceptLoop();
  void Serve(int fd, int id);

  Handler handler_;
  int listen_fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> connections_{0};
  std::atomic<int> reset_pending_{0};
  std::atomic<int> reset_delay_ms_{0};
  mutable std::mutex mu_;
  std::condition_variable cv_;  // wakes Sleep on stop
  std::vector<SeenRequest> seen_;
  std::vector<int> open_fds_;
  std::vector<std::thread> threads_;
  std::thread acceptor_;
};

}  // namespace lsio::testing
