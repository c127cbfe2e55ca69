// lsio/status.h: error values used by every layer of the engine.
//
// lsio never throws below cpp/bindings/. Functions that can fail return a Status, or a
// Result<T> that holds either a T or a non-OK Status.
//
// Usage:
//   1. Fail with a code and a message:   return Status::DataLoss("crc32c mismatch");
//   2. Attach context as you go up:       st.WithPath(path).WithRange(off, len)
//   3. Propagate:                          LSIO_RETURN_IF_ERROR(DoThing());
//                                          LSIO_ASSIGN_OR_RETURN(auto x, MakeThing());
//   4. The bindings map each StatusCode to one Python exception class (bindings/errors.cc).
//
// Invariants: an OK Status carries no message; a Result<T> that is OK holds a value.
// Pitfall: LSIO_ASSIGN_OR_RETURN expands to several statements, so it cannot be the
// body of an unbraced if/else.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace lsio {

/// What went wrong, in the categories the Python layer raises.
enum class StatusCode : int {
  kOk = 0,
  kInvalidArgument,  ///< caller misuse (bad `out`, bad option): TypeError / ValueError
  kInvalidType,      ///< wrong dtype for `out`: TypeError
  kInvalidFormat,    ///< malformed metadata: lsio.FormatError
  kUnimplemented,    ///< valid but unsupported feature: lsio.UnsupportedError
  kDataLoss,         ///< corrupt data (index, checksum, codec): lsio.CorruptDataError
  kIoError,          ///< a system call failed: lsio.StorageError
  kUnavailable,      ///< a resource (io_uring) cannot be had: lsio.StorageError
  kOutOfRange,       ///< selection outside the array: lsio.BoundsError
  kResourceExhausted,///< allocation or limit exceeded: MemoryError
  kCancelled,        ///< the caller interrupted the call (Ctrl-C): KeyboardInterrupt
  kInternal,         ///< a bug in lsio: RuntimeError
};

/// Human-readable name of a code ("DataLoss").
const char* StatusCodeName(StatusCode code);

/// A success or an error with a message, an optional errno, file path and byte range.
class Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  static Status InvalidArgument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
  static Status InvalidType(std::string m) { return {StatusCode::kInvalidType, std::move(m)}; }
  static Status InvalidFormat(std::string m) { return {StatusCode::kInvalidFormat, std::move(m)}; }
  static Status Unimplemented(std::string m) { return {StatusCode::kUnimplemented, std::move(m)}; }
  static Status DataLoss(std::string m) { return {StatusCode::kDataLoss, std::move(m)}; }
  static Status IoError(std::string m, int err) {
    Status s(StatusCode::kIoError, std::move(m));
    s.errno_ = err;
    return s;
  }
  static Status Unavailable(std::string m, int err = 0) {
    Status s(StatusCode::kUnavailable, std::move(m));
    s.errno_ = err;
    return s;
  }
  static Status OutOfRange(std::string m) { return {StatusCode::kOutOfRange, std::move(m)}; }
  static Status ResourceExhausted(std::string m) { return {StatusCode::kResourceExhausted, std::move(m)}; }
  static Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
  static Status Cancelled(std::string m) { return {StatusCode::kCancelled, std::move(m)}; }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  int error_number() const { return errno_; }
  const std::string& path() const { return path_; }
  bool has_range() const { return has_range_; }
  uint64_t range_offset() const { return range_offset_; }
  uint64_t range_length() const { return range_length_; }
  const std::string& chunk() const { return chunk_; }

  /// Context setters: each keeps the first value set (the innermost, most precise one).
  Status& WithPath(const std::string& path) {
    if (!ok() && path_.empty()) path_ = path;
    return *this;
  }
  Status& WithRange(uint64_t offset, uint64_t length) {
    if (!ok() && !has_range_) {
      has_range_ = true;
      range_offset_ = offset;
      range_length_ = length;
    }
    return *this;
  }
  Status& WithChunk(const std::string& chunk) {
    if (!ok() && chunk_.empty()) chunk_ = chunk;
    return *this;
  }

  /// Overwrites the path (WithPath keeps the first): a remote store names its objects by
  /// the user's URL ("s3://bucket/key") rather than the transport's endpoint URL.
  Status& ReplacePath(const std::string& path) {
    if (!ok()) path_ = path;
    return *this;
  }

  /// Replaces every occurrence of `secret` in the message and path with "[REDACTED]" (a
  /// remote store's own token or key echoed back by a server). Secrets shorter than 4
  /// bytes are left alone: masking them would mangle unrelated text.
  Status& Redact(std::string_view secret);

  /// "message (errno 5: Input/output error) [file '...', chunk (1, 2), bytes [100, 200)]".
  /// With include_errno false the errno part reads ": Input/output error" instead (for
  /// OSError, whose str() already shows the number).
  std::string ToString(bool include_errno = true) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
  int errno_ = 0;
  std::string path_;
  std::string chunk_;
  bool has_range_ = false;
  uint64_t range_offset_ = 0;
  uint64_t range_length_ = 0;
};

/// A value or an error. Access the value only after checking ok().
template <typename T>
class Result {
 public:
  Result(T value) : v_(std::move(value)) {}                      // NOLINT: implicit on purpose
  Result(Status status) : v_(std::move(status)) {}               // NOLINT: implicit on purpose
  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOkStatus;
    return ok() ? kOkStatus : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace lsio

#define LSIO_CONCAT_INNER_(a, b) a##b
#define LSIO_CONCAT_(a, b) LSIO_CONCAT_INNER_(a, b)

/// Returns the Status of `expr` from the enclosing function unless it is OK.
#define LSIO_RETURN_IF_ERROR(expr)              \
  do {                                          \
    ::lsio::Status lsio_st_ = (expr);           \
    if (!lsio_st_.ok()) return lsio_st_;        \
  } while (0)

/// `LSIO_ASSIGN_OR_RETURN(auto x, F())`: evaluates F(), returns its Status on error, else
/// moves the value into the declaration.
#define LSIO_ASSIGN_OR_RETURN(decl, expr)                                   \
  auto LSIO_CONCAT_(lsio_res_, __LINE__) = (expr);                          \
  if (!LSIO_CONCAT_(lsio_res_, __LINE__).ok())                              \
    return LSIO_CONCAT_(lsio_res_, __LINE__).status();                      \
  decl = std::move(LSIO_CONCAT_(lsio_res_, __LINE__)).value()
