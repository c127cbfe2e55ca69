// Status formatting. Messages are built so that a user can find the bad bytes: the file,
// the chunk and the byte range are appended when known.
#include "lsio/status.h"

#include <cstring>

namespace lsio {

const char* StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "Ok";
    case StatusCode::kInvalidArgument: return "InvalidArgument";
    case StatusCode::kInvalidType: return "InvalidType";
    case StatusCode::kInvalidFormat: return "InvalidFormat";
    case StatusCode::kUnimplemented: return "Unimplemented";
    case StatusCode::kDataLoss: return "DataLoss";
    case StatusCode::kIoError: return "IoError";
    case StatusCode::kUnavailable: return "Unavailable";
    case StatusCode::kOutOfRange: return "OutOfRange";
    case StatusCode::kResourceExhausted: return "ResourceExhausted";
    case StatusCode::kInternal: return "Internal";
    case StatusCode::kCancelled: return "Cancelled";
  }
  return "Unknown";
}

std::string Status::ToString(bool include_errno) const {
  if (ok()) return "OK";
  std::string s = message_;
  if (errno_ != 0 && !include_errno) {
    s += ": ";
    s += std::strerror(errno_);
  } else if (errno_ != 0) {
    s += " (errno ";
    s += std::to_string(errno_);
    s += ": ";
    s += std::strerror(errno_);
    s += ")";
  }
  std::string ctx;
  auto add = [&ctx](const std::string& part) {
    ctx += ctx.empty() ? "" : ", ";
    ctx += part;
  };
  // A location with a scheme ("s3://...", "https://...") is an object, not a file.
  const bool url = path_.find("://") != std::string::npos;
  if (!path_.empty()) add((url ? "object '" : "file '") + path_ + "'");
  if (!chunk_.empty()) add("chunk " + chunk_);
  if (has_range_) {
    add("bytes [" + std::to_string(range_offset_) + ", " +
        std::to_string(range_offset_ + range_length_) + ")");
  }
  if (!ctx.empty()) s += " [" + ctx + "]";
  return s;
}

Status& Status::Redact(std::string_view secret) {
  if (secret.size() < 4) return *this;
  for (std::string* text : {&message_, &path_}) {
    size_t at = 0;
    while ((at = text->find(secret, at)) != std::string::npos) {
      text->replace(at, secret.size(), "[REDACTED]");
      at += 10;
    }
  }
  return *this;
}

}  // namespace lsio
