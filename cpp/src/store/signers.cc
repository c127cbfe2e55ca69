// Request signers (see providers.h): none, a bearer token, AWS Signature V4.
#include <ctime>

#include "net/sigv4.h"
#include "store/providers.h"

namespace lsio {
namespace {

class NoSigner final : public Signer {
 public:
  void Sign(const std::string&, const std::vector<std::pair<std::string, std::string>>&,
            const std::shared_ptr<const SignerCredentials>&, HttpRequest*) const override {}
};

class BearerSigner final : public Signer {
 public:
  void Sign(const std::string&, const std::vector<std::pair<std::string, std::string>>&,
            const std::shared_ptr<const SignerCredentials>& creds, HttpRequest* q) const override {
    q->headers.emplace_back("Authorization", "Bearer " + creds->token);
  }
};

class SigV4Signer final : public Signer {
 public:
  SigV4Signer(std::string host, std::string region, std::string service)
      : host_(std::move(host)), region_(std::move(region)), service_(std::move(service)) {}

  void Sign(const std::string& path, const std::vector<std::pair<std::string, std::string>>& query,
            const std::shared_ptr<const SignerCredentials>& creds, HttpRequest* q) const override {
    // Signed per attempt: x-amz-date must be current when a retry goes out minutes later.
    q->sign = [this, creds, path, query](const HttpRequest& req, std::vector<std::pair<std::string, std::string>>* headers) {
      SigV4Request s;
      s.method = req.method;
      s.host = host_;
      s.path = path;
      s.query = query;
      s.headers = *headers;
      s.payload_hash = std::string(kUnsignedPayload);
      SigV4Credentials c{creds->access_key_id, creds->secret_access_key, creds->session_token};
      SigV4Scope scope{region_, service_, SigV4Style::kS3};
      LSIO_ASSIGN_OR_RETURN(SigV4Signature sig, SignV4(s, c, scope, static_cast<int64_t>(std::time(nullptr))));
      for (auto& h : sig.headers) headers->push_back(std::move(h));
      return Status::Ok();
    };
  }

 private:
  std::string host_, region_, service_;
};

}  // namespace

std::shared_ptr<const Signer> MakeSigner(SigningKind kind, std::string host, std::string region, std::string service) {
  switch (kind) {
    case SigningKind::kSigV4: return std::make_shared<SigV4Signer>(std::move(host), std::move(region), std::move(service));
    case SigningKind::kBearer: return std::make_shared<BearerSigner>();
    case SigningKind::kNone: break;
  }
  return std::make_shared<NoSigner>();
}

}  // namespace lsio
