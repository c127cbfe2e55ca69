// AWS Signature Version 4 (SigV4) request signing, and redaction of signing secrets.
//
// Why lsio signs requests itself: Debian 12's libcurl (7.88) has CURLOPT_AWS_SIGV4, but it
// neither sends `x-amz-content-sha256` (S3 rejects requests without it) nor encodes the
// canonical path correctly (fixed in curl 8.9). Signing here needs only OpenSSL's SHA-256
// and HMAC-SHA256 (libcrypto); this file holds no hand-written cryptography.
//
// SignV4 is a pure function: no I/O, no clock, no global state. The caller passes the time,
// so signatures are reproducible and testable against AWS's published vectors.
//
// Usage:
//   1. Describe the request. `path` is the *unencoded* object path: with a path-style host
//      ("s3.us-east-1.amazonaws.com") it starts with the bucket, "/bucket/c/0/1"; with a
//      virtual-host style host ("bucket.s3.us-east-1.amazonaws.com") it is "/c/0/1".
//        SigV4Request req;
//        req.method = "GET";
//        req.host = "bucket.s3.us-east-1.amazonaws.com";   // with ":port" if not default
//        req.path = "/c/0/1";
//        req.headers = {{"Range", "bytes=0-1023"}};          // extra headers to sign
//        req.payload_hash = kUnsignedPayload;                 // or Sha256Hex(body)
//   2. Give the credentials and scope: SigV4Credentials{key_id, secret, session_token} and
//      SigV4Scope{"us-east-1", "s3", SigV4Style::kS3}.
//   3. LSIO_ASSIGN_OR_RETURN(SigV4Signature sig, SignV4(req, creds, scope, unix_seconds));
//   4. With kS3, send the request to "https://" + host + sig.encoded_path (+ "?" +
//      sig.encoded_query when not empty); with kGeneric, send the path you passed and
//      sig.encoded_query. Send the caller's headers from step 1, the Host header equal to
//      req.host, and every header in sig.headers (Authorization, x-amz-date,
//      x-amz-content-sha256, x-amz-security-token). Use sig.encoded_path/encoded_query
//      verbatim: S3 recomputes the canonical request from the URL it receives, so any
//      other encoding of the same key fails with SignatureDoesNotMatch.
//   5. Before a URL, a header dump or any text that may hold them goes into a Status
//      message, a repr or a log, pass it through RedactSecrets().
//
// Canonical rules (SigV4Style):
//   kS3       S3 and S3-compatible stores (MinIO, R2, GCS XML API with HMAC keys). The
//             path is URI-encoded once, segment by segment, and never normalised: "a//b",
//             "./" and "../" are parts of the object key. `x-amz-content-sha256` is added
//             and signed.
//   kGeneric  Every other AWS service, and AWS's generic test suite. `path` is the path as
//             it appears in the request line (for a real request, already percent-encoded),
//             normalised (RFC 3986 dot segments removed, empty segments dropped), then
//             URI-encoded once more: relative to the raw path that is AWS's "encode twice".
//             No `x-amz-content-sha256` header is added.
//   Both: unreserved characters (A-Z a-z 0-9 - _ . ~) are kept, every other byte becomes
//   %XX with uppercase hex; '/' is kept in the path and encoded in query names and values.
//   Query parameters are given decoded, and are encoded and sorted by name, then value; a
//   parameter without a value signs as "name=". Header names are lowercased; values are
//   trimmed and runs of spaces/tabs collapse to one space; repeated names are joined with
//   ',' in the order given; all given headers, host and the x-amz-* headers are signed.
//
// Redaction (RedactSecrets): values of Authorization, X-Amz-Security-Token, X-Amz-Signature
// and X-Amz-Credential are replaced by "[REDACTED]", in header form ("Name: value" up to the
// end of the line or closing quote) and in parameter form ("Name=value" up to '&', ',',
// whitespace or a quote), case-insensitively; bare "Signature=" and "Credential=" inside a
// copied Authorization value are masked too. The secret access key never leaves SignV4.
// SigV4Signature::canonical_request contains the session token in clear text: redact it
// before showing it anywhere.
//
// Errors: SignV4 fails with kInvalidArgument for missing fields, a path not starting with
// '/', a malformed payload hash or timestamp, CR/LF or NUL in a header or token (header
// injection), or a header the signer owns; messages never contain a secret.
//
// Thread-safety: every function here is reentrant and may be called concurrently.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "lsio/status.h"

namespace lsio {

/// `x-amz-content-sha256` value for a request whose body is not hashed (S3 GET/HEAD).
inline constexpr std::string_view kUnsignedPayload = "UNSIGNED-PAYLOAD";

/// SHA-256 of the empty string, the payload hash of a body-less request in the generic style.
inline constexpr std::string_view kEmptyPayloadSha256 =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

/// Which canonicalisation rules apply (see the file comment).
enum class SigV4Style {
  kS3,       ///< single encoding, no path normalisation, x-amz-content-sha256 signed
  kGeneric,  ///< AWS's generic rules: normalised path encoded once more, no content header
};

/// A name/value pair: a query parameter (decoded) or an HTTP header.
using SigV4Pair = std::pair<std::string, std::string>;

/// The parts of an HTTP request that SigV4 signs.
struct SigV4Request {
  std::string method;                 ///< "GET", "HEAD", "PUT", ... (sent as given)
  std::string host;                   ///< Host header value, with ":port" when not default
  std::string path;                   ///< starts with '/': unencoded (kS3), as sent (kGeneric)
  std::vector<SigV4Pair> query;       ///< decoded parameters, any order; "" value allowed
  std::vector<SigV4Pair> headers;     ///< headers to sign besides host and x-amz-*
  std::string payload_hash;           ///< kUnsignedPayload or 64 lowercase hex digits
};

/// Long-term or temporary credentials. Never printed; see RedactSecrets for the rest.
struct SigV4Credentials {
  std::string access_key_id;      ///< "AKIA..." / "ASIA..."
  std::string secret_access_key;  ///< used only as HMAC key material
  std::string session_token;      ///< empty: none (long-term keys)
};

/// Where and how the signature applies.
struct SigV4Scope {
  std::string region;   ///< "us-east-1"; S3-compatible stores often accept any value
  std::string service;  ///< "s3"
  SigV4Style style = SigV4Style::kS3;
};

/// What SignV4 produces.
struct SigV4Signature {
  /// Headers to add to the request, in this order: x-amz-date, x-amz-content-sha256 (kS3
  /// only), x-amz-security-token (when a token was given), Authorization.
  std::vector<SigV4Pair> headers;
  /// The canonical URI. With kS3 this is also the path to send.
  std::string encoded_path;
  /// The canonical query string ("" without parameters); send it as the URL's query.
  std::string encoded_query;
  /// The intermediate strings, for tests and debugging. canonical_request holds the session
  /// token in clear text: pass it through RedactSecrets before showing it.
  std::string canonical_request;
  std::string string_to_sign;
  std::string signature;  ///< 64 hex digits, also inside the Authorization header
};

/// Signs `request` at `unix_seconds` (seconds since 1970-01-01T00:00:00Z, which must fall in
/// years 1970..9999). Pure: the same inputs always give the same output.
/// Fails with kInvalidArgument (see the file comment) or kInternal if libcrypto fails.
Result<SigV4Signature> SignV4(const SigV4Request& request, const SigV4Credentials& credentials,
                              const SigV4Scope& scope, int64_t unix_seconds);

/// "YYYYMMDDTHHMMSSZ" for `unix_seconds`, the x-amz-date format.
/// Fails with kInvalidArgument outside years 1970..9999.
Result<std::string> FormatAmzDate(int64_t unix_seconds);

/// RFC 3986 percent-encoding as SigV4 wants it: unreserved bytes kept, others %XX
/// (uppercase); '/' kept only when `keep_slash`.
std::string UriEncode(std::string_view bytes, bool keep_slash);

/// Lowercase hex SHA-256 of `data` (libcrypto), for SigV4Request::payload_hash.
/// Fails with kInternal if libcrypto fails.
Result<std::string> Sha256Hex(std::string_view data);

/// Copy of `text` with signing secrets replaced by "[REDACTED]" (see the file comment).
/// Total: never fails, and redacting twice changes nothing more.
std::string RedactSecrets(std::string_view text);

}  // namespace lsio
