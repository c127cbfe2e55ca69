// Amazon S3 and S3-compatible stores (see providers.h): their error vocabulary and the
// ListObjectsV2 page format.
#include <cstdlib>

#include "store/providers.h"

namespace lsio {
namespace {

std::string XmlUnescape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '&') {
      out += s[i];
      continue;
    }
    const size_t end = s.find(';', i);
    if (end == std::string_view::npos) {
      out += s[i];
      continue;
    }
    const std::string_view ent = s.substr(i + 1, end - i - 1);
    if (ent == "amp") out += '&';
    else if (ent == "lt") out += '<';
    else if (ent == "gt") out += '>';
    else if (ent == "quot") out += '"';
    else if (ent == "apos") out += '\'';
    else if (!ent.empty() && ent[0] == '#') {
      const bool hex = ent.size() > 1 && (ent[1] == 'x' || ent[1] == 'X');
      const unsigned long cp = std::strtoul(std::string(ent.substr(hex ? 2 : 1)).c_str(), nullptr, hex ? 16 : 10);
      if (cp < 0x80) out += static_cast<char>(cp);
      else if (cp < 0x800) { out += static_cast<char>(0xC0 | (cp >> 6)); out += static_cast<char>(0x80 | (cp & 0x3F)); }
      else if (cp < 0x10000) {
        out += static_cast<char>(0xE0 | (cp >> 12));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
      } else {
        out += static_cast<char>(0xF0 | (cp >> 18));
        out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
      }
    } else {
      out.append(s.substr(i, end - i + 1));
    }
    i = end;
  }
  return out;
}

// The text of every <tag>...</tag> inside `xml` (no nesting of the same tag in S3's answers).
std::vector<std::string> XmlAll(std::string_view xml, std::string_view tag) {
  std::vector<std::string> out;
  const std::string open = "<" + std::string(tag) + ">", close = "</" + std::string(tag) + ">";
  size_t at = 0;
  while ((at = xml.find(open, at)) != std::string_view::npos) {
    const size_t b = at + open.size();
    const size_t e = xml.find(close, b);
    if (e == std::string_view::npos) break;
    out.push_back(XmlUnescape(xml.substr(b, e - b)));
    at = e + close.size();
  }
  return out;
}

// The text of the first <tag>...</tag> in an XML error body, or "".
std::string XmlElement(std::string_view body, std::string_view tag) {
  const std::string open = "<" + std::string(tag) + ">";
  const std::string close = "</" + std::string(tag) + ">";
  const size_t a = body.find(open);
  if (a == std::string_view::npos) return {};
  const size_t b = body.find(close, a + open.size());
  if (b == std::string_view::npos) return {};
  return std::string(body.substr(a + open.size(), b - a - open.size()));
}

// "Code: Message" of an <Error> document, "" when the body has no <Code>.
std::string Describe(std::string_view body) {
  const std::string code = XmlElement(body, "Code");
  if (code.empty()) return {};
  const std::string message = XmlElement(body, "Message");
  return code + (message.empty() ? "" : ": " + message.substr(0, 300));
}

// S3 error codes that mean "try again" when they arrive as a 2xx body (object_store and
// TensorStore retry the same ones).
bool IsRetryableCode(std::string_view code) {
  return code == "SlowDown" || code == "InternalError" || code == "ServiceUnavailable" || code == "Throttling" ||
         code == "RequestTimeout";
}

bool IContains(std::string_view hay, std::string_view needle) {
  if (needle.size() > hay.size()) return false;
  for (size_t i = 0; i + needle.size() <= hay.size(); ++i) {
    bool same = true;
    for (size_t k = 0; k < needle.size() && same; ++k) {
      same = std::tolower(static_cast<unsigned char>(hay[i + k])) == std::tolower(static_cast<unsigned char>(needle[k]));
    }
    if (same) return true;
  }
  return false;
}

}  // namespace

std::shared_ptr<const ErrorDialect> S3ErrorDialect() {
  static const std::shared_ptr<const ErrorDialect> kDialect = [] {
    auto d = std::make_shared<ErrorDialect>();
    d->request_id_headers = {"x-amz-request-id", "x-request-id"};
    d->describe = Describe;
    // S3 may answer "200 OK" with an XML <Error> in place of the data.
    d->may_hide_error = [](std::string_view content_type) { return IContains(content_type, "xml"); };
    d->retry_in_body = [](std::string_view body) {
      if (body.find("<Error>") == std::string_view::npos || !IsRetryableCode(XmlElement(body, "Code"))) {
        return std::string();
      }
      return Describe(body);
    };
    d->missing_container = [](std::string_view body) { return XmlElement(body, "Code") == "NoSuchBucket"; };
    return d;
  }();
  return kDialect;
}

Status ParseListPage(std::string_view xml, std::string_view key_prefix, std::vector<std::string>* names,
                     std::string* next_token) {
  next_token->clear();
  if (xml.find("<ListBucketResult") == std::string_view::npos) {
    return Status::DataLoss("listing answer is not an S3 ListBucketResult");
  }
  // CommonPrefixes hold the child "directories"; their Prefix elements come after the
  // request's own <Prefix>, which is outside any CommonPrefixes block.
  for (const std::string& block : XmlAll(xml, "CommonPrefixes")) {
    for (std::string p : XmlAll(block, "Prefix")) {
      if (p.size() <= key_prefix.size() || p.compare(0, key_prefix.size(), key_prefix) != 0) continue;
      p.erase(0, key_prefix.size());
      while (!p.empty() && p.back() == '/') p.pop_back();
      if (!p.empty()) names->push_back(p);
    }
  }
  const auto truncated = XmlAll(xml, "IsTruncated");
  const auto next = XmlAll(xml, "NextContinuationToken");
  if (!truncated.empty() && truncated[0] == "true" && !next.empty()) *next_token = next[0];
  return Status::Ok();
}

namespace {
// ListObjectsV2 with delimiter '/': the child "directories" come back as CommonPrefixes.
class ListObjectsV2 final : public Lister {
 public:
  std::vector<std::pair<std::string, std::string>> PageQuery(std::string_view key_prefix,
                                                             std::string_view token) const override {
    std::vector<std::pair<std::string, std::string>> q;
    if (!token.empty()) q.emplace_back("continuation-token", std::string(token));
    q.emplace_back("delimiter", "/");
    q.emplace_back("list-type", "2");
    q.emplace_back("prefix", std::string(key_prefix));
    return q;
  }
  Status ParsePage(std::string_view body, std::string_view key_prefix, std::vector<std::string>* names,
                   std::string* next_token) const override {
    return ParseListPage(body, key_prefix, names, next_token);
  }
  const char* name() const override { return "S3's ListObjectsV2"; }
};
}  // namespace

std::shared_ptr<const Lister> ListObjectsV2Lister() {
  static const std::shared_ptr<const Lister> kLister = std::make_shared<ListObjectsV2>();
  return kLister;
}

std::shared_ptr<const Provider> S3Provider() {
  static const std::shared_ptr<const Provider> kProvider = [] {
    auto p = std::make_shared<Provider>();
    p->name = "s3";
    p->dialect = S3ErrorDialect();
    p->lister = ListObjectsV2Lister();
    return p;
  }();
  return kProvider;
}

}  // namespace lsio
