// SigV4 signing over libcrypto (see sigv4.h for the rules and their sources).
#include "net/sigv4.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>

namespace lsio {
namespace {

using Digest = std::array<unsigned char, 32>;

constexpr char kHexUpper[] = "0123456789ABCDEF";
constexpr char kHexLower[] = "0123456789abcdef";
constexpr std::string_view kAlgorithm = "AWS4-HMAC-SHA256";
constexpr std::string_view kRedacted = "[REDACTED]";

bool IsUnreserved(unsigned char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_' || c == '.' || c == '~';
}

bool IsAlnum(unsigned char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

char Lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

std::string ToLower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = Lower(c);
  return out;
}

// RFC 7230 "token": what a method or header name may consist of. Anything else (':', a
// space, CR/LF) would let a caller-supplied name smuggle another header into the request.
bool IsToken(std::string_view s) {
  if (s.empty()) return false;
  for (unsigned char c : s) {
    if (IsAlnum(c)) continue;
    if (std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) == std::string_view::npos) {
      return false;
    }
  }
  return true;
}

bool HasLineBreakOrNul(std::string_view s) {
  return s.find_first_of(std::string_view("\r\n\0", 3)) != std::string_view::npos;
}

// Credential scope parts and the access key id end up inside the Authorization header,
// where '/', ',' and whitespace are separators.
bool IsScopePart(std::string_view s) {
  if (s.empty()) return false;
  for (unsigned char c : s) {
    if (c <= ' ' || c == '/' || c == ',' || c == 0x7f) return false;
  }
  return true;
}

std::string Hex(const unsigned char* data, size_t n) {
  std::string out(2 * n, '0');
  for (size_t i = 0; i < n; ++i) {
    out[2 * i] = kHexLower[data[i] >> 4];
    out[2 * i + 1] = kHexLower[data[i] & 0xf];
  }
  return out;
}

bool Sha256(std::string_view data, Digest* out) {
  unsigned int len = 0;
  return EVP_Digest(data.data(), data.size(), out->data(), &len, EVP_sha256(), nullptr) == 1 &&
         len == out->size();
}

bool HmacSha256(const unsigned char* key, size_t key_len, std::string_view data, Digest* out) {
  unsigned int len = 0;
  return HMAC(EVP_sha256(), key, static_cast<int>(key_len),
              reinterpret_cast<const unsigned char*>(data.data()), data.size(), out->data(),
              &len) != nullptr &&
         len == out->size();
}

bool IsValidPayloadHash(std::string_view h) {
  if (h == kUnsignedPayload) return true;
  if (h.size() != 64) return false;
  return std::all_of(h.begin(), h.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// Trim, then collapse runs of spaces/tabs to one space (the suite's get-header-value-trim).
std::string CanonicalHeaderValue(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  bool pending_space = false;
  for (char c : v) {
    if (c == ' ' || c == '\t') {
      pending_space = !out.empty();
      continue;
    }
    if (pending_space) out.push_back(' ');
    pending_space = false;
    out.push_back(c);
  }
  return out;
}

// kGeneric only: RFC 3986 remove_dot_segments plus dropping empty segments, as the generic
// suite's normalize-path cases expect. S3 never does this: there "a/../b" is a key.
std::string NormalizePath(std::string_view path) {
  std::vector<std::string_view> segments;
  bool trailing_slash = false;
  size_t pos = 1;  // path[0] == '/'
  while (pos <= path.size()) {
    size_t end = path.find('/', pos);
    if (end == std::string_view::npos) end = path.size();
    std::string_view seg = path.substr(pos, end - pos);
    const bool last = end == path.size();
    if (seg == "..") {
      if (!segments.empty()) segments.pop_back();
      trailing_slash = true;
    } else if (seg.empty() || seg == ".") {
      trailing_slash = true;
    } else {
      segments.push_back(seg);
      trailing_slash = false;
    }
    if (last) break;
    pos = end + 1;
  }
  std::string out = "/";
  for (size_t i = 0; i < segments.size(); ++i) {
    if (i > 0) out.push_back('/');
    out.append(segments[i]);
  }
  if (trailing_slash && !segments.empty()) out.push_back('/');
  return out;
}

Status Invalid(std::string what) { return Status::InvalidArgument("SigV4: " + std::move(what)); }

Status Validate(const SigV4Request& r, const SigV4Credentials& c, const SigV4Scope& s) {
  if (!IsToken(r.method)) return Invalid("method is empty or not an HTTP token");
  if (r.host.empty() || r.host.find_first_of(" \t\r\n/") != std::string::npos ||
      r.host.find('\0') != std::string::npos) {
    return Invalid("host is empty or contains whitespace or '/'");
  }
  if (r.path.empty() || r.path[0] != '/') return Invalid("path must start with '/'");
  if (!IsValidPayloadHash(r.payload_hash)) {
    return Invalid("payload hash must be UNSIGNED-PAYLOAD or 64 lowercase hex digits");
  }
  for (const auto& [name, value] : r.headers) {
    if (!IsToken(name)) return Invalid("header name '" + name + "' is not an HTTP token");
    if (HasLineBreakOrNul(value)) return Invalid("header '" + name + "' has CR, LF or NUL in its value");
    const std::string lower = ToLower(name);
    if (lower == "host" || lower == "authorization" || lower == "x-amz-date" ||
        lower == "x-amz-content-sha256" || lower == "x-amz-security-token") {
      // Two sources for one header would sign one value and send another.
      return Invalid("header '" + name + "' is set by the signer; do not pass it");
    }
  }
  // The key id is not secret but appears in every log line of a 403; the other fields are.
  // None of them is quoted in a message.
  if (!IsScopePart(c.access_key_id)) return Invalid("access key id is empty or malformed");
  if (c.secret_access_key.empty()) return Invalid("secret access key is empty");
  if (HasLineBreakOrNul(c.session_token)) return Invalid("session token has CR, LF or NUL");
  if (!IsScopePart(s.region)) return Invalid("region is empty or malformed");
  if (!IsScopePart(s.service)) return Invalid("service is empty or malformed");
  return Status::Ok();
}

std::string CanonicalQuery(const std::vector<SigV4Pair>& query) {
  std::vector<SigV4Pair> enc;
  enc.reserve(query.size());
  for (const auto& [k, v] : query) enc.emplace_back(UriEncode(k, false), UriEncode(v, false));
  // Sorted by the *encoded* bytes (get-vanilla-query-order-encoded), name first, then value.
  std::sort(enc.begin(), enc.end());
  std::string out;
  for (const auto& [k, v] : enc) {
    if (!out.empty()) out.push_back('&');
    out.append(k).push_back('=');
    out.append(v);
  }
  return out;
}

// Wipes derived key material when it goes out of scope: a core dump or a reused heap block
// should not hand out a signing key that is valid for a whole day.
struct Cleanse {
  void* p;
  size_t n;
  ~Cleanse() { OPENSSL_cleanse(p, n); }
};

}  // namespace

std::string UriEncode(std::string_view bytes, bool keep_slash) {
  std::string out;
  out.reserve(bytes.size());
  for (unsigned char c : bytes) {
    if (IsUnreserved(c) || (keep_slash && c == '/')) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHexUpper[c >> 4]);
      out.push_back(kHexUpper[c & 0xf]);
    }
  }
  return out;
}

Result<std::string> Sha256Hex(std::string_view data) {
  Digest d{};
  if (!Sha256(data, &d)) return Status::Internal("SigV4: libcrypto SHA-256 failed");
  return Hex(d.data(), d.size());
}

Result<std::string> FormatAmzDate(int64_t unix_seconds) {
  // 9999-12-31T23:59:59Z: x-amz-date has four year digits.
  if (unix_seconds < 0 || unix_seconds > 253402300799) {
    return Invalid("timestamp " + std::to_string(unix_seconds) + " is outside years 1970..9999");
  }
  using namespace std::chrono;
  const sys_seconds tp{seconds{unix_seconds}};
  const sys_days day = floor<days>(tp);
  const year_month_day ymd{day};
  const hh_mm_ss<seconds> hms{tp - day};
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%04d%02u%02uT%02d%02d%02dZ", static_cast<int>(ymd.year()),
                static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()),
                static_cast<int>(hms.hours().count()), static_cast<int>(hms.minutes().count()),
                static_cast<int>(hms.seconds().count()));
  return std::string(buf);
}

Result<SigV4Signature> SignV4(const SigV4Request& request, const SigV4Credentials& credentials,
                              const SigV4Scope& scope, int64_t unix_seconds) {
  LSIO_RETURN_IF_ERROR(Validate(request, credentials, scope));
  LSIO_ASSIGN_OR_RETURN(const std::string amz_date, FormatAmzDate(unix_seconds));
  const std::string date = amz_date.substr(0, 8);
  const bool s3 = scope.style == SigV4Style::kS3;

  SigV4Signature sig;
  sig.encoded_path = UriEncode(s3 ? std::string_view(request.path) : NormalizePath(request.path), true);
  sig.encoded_query = CanonicalQuery(request.query);

  sig.headers.emplace_back("x-amz-date", amz_date);
  if (s3) sig.headers.emplace_back("x-amz-content-sha256", request.payload_hash);
  if (!credentials.session_token.empty()) {
    sig.headers.emplace_back("x-amz-security-token", credentials.session_token);
  }

  // Canonical headers: lowercase names, sorted; a stable sort keeps repeated names in the
  // order given, and their values are then joined with ',' (get-header-key-duplicate).
  std::vector<SigV4Pair> all;
  all.reserve(request.headers.size() + sig.headers.size() + 1);
  all.emplace_back("host", CanonicalHeaderValue(request.host));
  for (const auto& [k, v] : request.headers) all.emplace_back(ToLower(k), CanonicalHeaderValue(v));
  for (const auto& [k, v] : sig.headers) all.emplace_back(k, CanonicalHeaderValue(v));
  std::stable_sort(all.begin(), all.end(),
                   [](const SigV4Pair& a, const SigV4Pair& b) { return a.first < b.first; });
  std::string canonical_headers;
  std::string signed_headers;
  for (size_t i = 0; i < all.size(); ++i) {
    if (i > 0 && all[i].first == all[i - 1].first) {
      canonical_headers.pop_back();  // the '\n' of the previous line
      canonical_headers.append(",").append(all[i].second).push_back('\n');
      continue;
    }
    canonical_headers.append(all[i].first).append(":").append(all[i].second).push_back('\n');
    if (!signed_headers.empty()) signed_headers.push_back(';');
    signed_headers.append(all[i].first);
  }

  sig.canonical_request = request.method + "\n" + sig.encoded_path + "\n" + sig.encoded_query +
                          "\n" + canonical_headers + "\n" + signed_headers + "\n" +
                          request.payload_hash;

  const std::string credential_scope =
      date + "/" + scope.region + "/" + scope.service + "/aws4_request";
  LSIO_ASSIGN_OR_RETURN(const std::string creq_hash, Sha256Hex(sig.canonical_request));
  sig.string_to_sign =
      std::string(kAlgorithm) + "\n" + amz_date + "\n" + credential_scope + "\n" + creq_hash;

  // Signing key = HMAC chain over date, region, service, "aws4_request", keyed first by
  // "AWS4" + secret. Every intermediate is wiped on the way out.
  std::string k_secret = "AWS4" + credentials.secret_access_key;
  Digest k_date{}, k_region{}, k_service{}, k_signing{}, mac{};
  Cleanse wipe[] = {{k_secret.data(), k_secret.size()}, {k_date.data(), k_date.size()},
                    {k_region.data(), k_region.size()}, {k_service.data(), k_service.size()},
                    {k_signing.data(), k_signing.size()}};
  (void)wipe;
  if (!HmacSha256(reinterpret_cast<const unsigned char*>(k_secret.data()), k_secret.size(), date,
                  &k_date) ||
      !HmacSha256(k_date.data(), k_date.size(), scope.region, &k_region) ||
      !HmacSha256(k_region.data(), k_region.size(), scope.service, &k_service) ||
      !HmacSha256(k_service.data(), k_service.size(), "aws4_request", &k_signing) ||
      !HmacSha256(k_signing.data(), k_signing.size(), sig.string_to_sign, &mac)) {
    return Status::Internal("SigV4: libcrypto HMAC-SHA256 failed");
  }
  sig.signature = Hex(mac.data(), mac.size());
  sig.headers.emplace_back("Authorization", std::string(kAlgorithm) +
                                                " Credential=" + credentials.access_key_id + "/" +
                                                credential_scope + ", SignedHeaders=" +
                                                signed_headers + ", Signature=" + sig.signature);
  return sig;
}

namespace {

// Names whose values RedactSecrets masks, lowercase. "signature" and "credential" also
// catch the X-Amz- query forms and the parts of a copied Authorization value.
constexpr std::string_view kSecretNames[] = {
    "authorization", "x-amz-security-token", "x-amz-signature", "x-amz-credential",
    "signature",     "credential",
};

bool StartsWithNoCase(std::string_view text, size_t pos, std::string_view lower_name) {
  if (text.size() - pos < lower_name.size()) return false;
  for (size_t i = 0; i < lower_name.size(); ++i) {
    if (Lower(text[pos + i]) != lower_name[i]) return false;
  }
  return true;
}

// If a secret-bearing "name<sep>value" starts at `pos`, sets [*begin, *end) to its value.
bool MatchSecret(std::string_view text, size_t pos, size_t* begin, size_t* end) {
  if (pos > 0 && IsAlnum(static_cast<unsigned char>(text[pos - 1]))) return false;
  for (std::string_view name : kSecretNames) {
    if (!StartsWithNoCase(text, pos, name)) continue;
    size_t j = pos + name.size();
    if (j < text.size() && (text[j] == '"' || text[j] == '\'')) ++j;  // 'Authorization': ...
    while (j < text.size() && (text[j] == ' ' || text[j] == '\t')) ++j;
    if (j >= text.size() || (text[j] != ':' && text[j] != '=')) continue;
    const bool header_form = text[j] == ':';
    ++j;
    while (j < text.size() && (text[j] == ' ' || text[j] == '\t')) ++j;
    char quote = 0;
    if (j < text.size() && (text[j] == '"' || text[j] == '\'')) quote = text[j++];
    size_t k = j;
    while (k < text.size()) {
      const char c = text[k];
      if (c == '\r' || c == '\n' || (quote != 0 && c == quote)) break;
      // A header value runs to the end of the line (it contains spaces and commas); a
      // parameter value stops at the next separator.
      if (quote == 0 && !header_form &&
          std::string_view("&,; \t\"'#").find(c) != std::string_view::npos) {
        break;
      }
      ++k;
    }
    if (k == j) return false;
    *begin = j;
    *end = k;
    return true;
  }
  return false;
}

}  // namespace

std::string RedactSecrets(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    size_t begin = 0, end = 0;
    if (MatchSecret(text, i, &begin, &end)) {
      out.append(text.substr(i, begin - i)).append(kRedacted);
      i = end;
    } else {
      out.push_back(text[i++]);
    }
  }
  return out;
}

}  // namespace lsio
