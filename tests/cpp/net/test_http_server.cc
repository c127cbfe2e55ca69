// TestHttpServer (see test_http_server.h): blocking sockets, a thread per connection.
#include "net/test_http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <strings.h>

namespace lsio::testing {

std::string SeenRequest::Header(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (k.size() == name.size() && strncasecmp(k.data(), name.data(), k.size()) == 0) return v;
  }
  return {};
}

bool SeenRequest::HasHeader(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (k.size() == name.size() && strncasecmp(k.data(), name.data(), k.size()) == 0) return true;
  }
  return false;
}

std::string HttpResponse(int status, const std::vector<std::pair<std::string, std::string>>& headers,
                         std::string_view body, bool add_content_length) {
  const char* reason = "OK";
  switch (status) {
    case 206: reason = "Partial Content"; break;
    case 400: reason = "Bad Request"; break;
    case 401: reason = "Unauthorized"; break;
    case 403: reason = "Forbidden"; break;
    case 404: reason = "Not Found"; break;
    case 408: reason = "Request Timeout"; break;
    case 410: reason = "Gone"; break;
    case 412: reason = "Precondition Failed"; break;
    case 416: reason = "Range Not Satisfiable"; break;
    case 429: reason = "Too Many Requests"; break;
    case 500: reason = "Internal Server Error"; break;
    case 503: reason = "Service Unavailable"; break;
    default: break;
  }
  std::string s = "HTTP/1.1 " + std::to_string(status) + " " + reason + "\r\n";
  for (const auto& [k, v] : headers) s += k + ": " + v + "\r\n";
  if (add_content_length) s += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  s += "\r\n";
  s += body;
  return s;
}

bool ServerConnection::Send(std::string_view bytes) {
  while (!bytes.empty() && fd_ >= 0) {
    const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return fd_ >= 0;
}

void ServerConnection::Close() {
  if (fd_ < 0) return;
  ::shutdown(fd_, SHUT_WR);
  fd_ = -1;  // the serving thread closes the descriptor
}

void ServerConnection::Reset() {
  if (fd_ < 0) return;
  struct linger lg = {1, 0};
  ::setsockopt(fd_, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
  ::shutdown(fd_, SHUT_RD);  // stop reading; the close in Serve sends the RST
  fd_ = -1;
}

bool ServerConnection::Sleep(int ms) {
  std::unique_lock<std::mutex> lock(server_->mu_);
  return !server_->cv_.wait_for(lock, std::chrono::milliseconds(ms), [this] { return server_->stop_.load(); });
}

TestHttpServer::TestHttpServer(Handler handler) : handler_(std::move(handler)) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) std::abort();
  int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) std::abort();
  if (::listen(listen_fd_, 256) != 0) std::abort();
  socklen_t len = sizeof addr;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  acceptor_ = std::thread([this] { AcceptLoop(); });
}

TestHttpServer::~TestHttpServer() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    for (int fd : open_fds_) ::shutdown(fd, SHUT_RDWR);
  }
  cv_.notify_all();
  acceptor_.join();
  ::close(listen_fd_);
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(mu_);
    threads.swap(threads_);
  }
  for (auto& t : threads) t.join();
}

std::string TestHttpServer::Url(std::string_view path) const {
  return "http://127.0.0.1:" + std::to_string(port_) + std::string(path);
}

std::vector<SeenRequest> TestHttpServer::requests() const {
  std::lock_guard<std::mutex> lock(mu_);
  return seen_;
}

size_t TestHttpServer::request_count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return seen_.size();
}

void TestHttpServer::ResetNextConnections(int n, int delay_ms) {
  int small = 4096;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  reset_delay_ms_ = delay_ms;
  reset_pending_ = n;
}

void TestHttpServer::AcceptLoop() {
  while (!stop_) {
    pollfd p{listen_fd_, POLLIN, 0};
    const int r = ::poll(&p, 1, 20);  // wake regularly to see stop_
    if (r <= 0) continue;
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    const int id = ++connections_;
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) {
      ::close(fd);
      break;
    }
    open_fds_.push_back(fd);
    threads_.emplace_back([this, fd, id] { Serve(fd, id); });
  }
}

void TestHttpServer::Serve(int fd, int id) {
  ServerConnection conn(this, fd, id);
  if (reset_pending_.fetch_sub(1) > 0) {
    conn.Sleep(reset_delay_ms_);
    conn.Reset();
  } else {
    reset_pending_.fetch_add(1);
  }
  std::string buf;
  int seq = 0;
  char tmp[4096];
  while (!stop_ && !conn.closed()) {
    size_t end = buf.find("\r\n\r\n");
    while (end == std::string::npos) {
      const ssize_t n = ::recv(fd, tmp, sizeof tmp, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      buf.append(tmp, static_cast<size_t>(n));
      end = buf.find("\r\n\r\n");
    }
    if (end == std::string::npos) break;
    const std::string head = buf.substr(0, end);
    buf.erase(0, end + 4);
    SeenRequest req;
    req.connection = id;
    req.seq_on_connection = ++seq;
    size_t pos = head.find("\r\n");
    const std::string line = head.substr(0, pos);
    const size_t sp1 = line.find(' ');
    const size_t sp2 = line.find(' ', sp1 + 1);
    req.method = line.substr(0, sp1);
    req.target = line.substr(sp1 + 1, sp2 - sp1 - 1);
    while (pos != std::string::npos) {
      const size_t next = head.find("\r\n", pos + 2);
      const std::string h = head.substr(pos + 2, next == std::string::npos ? std::string::npos : next - pos - 2);
      const size_t colon = h.find(':');
      if (colon != std::string::npos) {
        size_t v = colon + 1;
        while (v < h.size() && h[v] == ' ') ++v;
        req.headers.emplace_back(h.substr(0, colon), h.substr(v));
      }
      pos = next;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      seen_.push_back(req);
    }
    handler_(req, conn);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& f : open_fds_) {
      if (f == fd) {
        f = open_fds_.back();
        open_fds_.pop_back();
        break;
      }
    }
  }
  ::close(fd);
}

}  // namespace lsio::testing
