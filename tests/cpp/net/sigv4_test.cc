// SigV4 signing (net/sigv4.h) against published vectors, plus S3 rules and redaction.
//
// Vector sources (data only, embedded below; no implementation code was copied):
//   * Generic rules: AWS's "aws-sig-v4-test-suite" (Copyright Amazon.com, Apache-2.0), as
//     shipped in boto/botocore tests/unit/auth/aws4_testsuite (commit 0e6e2404b85d). Each
//     block names its case directory; the three strings are that case's .creq, .sts and
//     .authz files verbatim. The suite signs for region us-east-1, service "service", at
//     20150830T123600Z, with AKIDEXAMPLE / wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY.
//   * S3 rules: the "GET Object" example of the S3 API reference, "Signature Calculations
//     for the Authorization Header: Transferring Payload in a Single Chunk"
//     (docs.aws.amazon.com/AmazonS3/latest/API/sig-v4-header-based-auth.html): canonical
//     request, string-to-sign hash 7344ae5b... and signature f0e8bdb8....
//   * S3 keys needing encoding, session tokens and query strings: expected signatures were
//     computed with botocore 1.43.11's S3SigV4Auth (an independent implementation) from the
//     same inputs, at 20130524T000000Z with the S3 example's credentials.
#include "net/sigv4.h"

#include <gtest/gtest.h>

#include <string>

namespace lsio {
namespace {

struct Expected {
  const char* creq;
  const char* sts;
  const char* authz;
};

// get-vanilla/get-vanilla
constexpr Expected kGetVanilla = {
    "GET\n/\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-amz-date\ne3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/aws4_request\nbb579772317eb040ac9ed261061d46c1f17a8133879d6129b6e1c25292927e63",
    "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders=host;x-amz-date, Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31",
};
// get-vanilla-query-order-key-case/get-vanilla-query-order-key-case
constexpr Expected kGetVanillaQueryOrderKeyCase = {
    "GET\n/\nParam1=value1&Param2=value2\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-amz-date\ne3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/aws4_request\n816cd5b414d056048ba4f7c5386d6e0533120fb1fcfa93762cf0fc39e2cf19e0",
    "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders=host;x-amz-date, Signature=b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500",
};
// get-vanilla-empty-query-key/get-vanilla-empty-query-key
constexpr Expected kGetVanillaEmptyQueryKey = {
    "GET\n/\nParam1=value1\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-amz-date\ne3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/aws4_request\n1e24db194ed7d0eec2de28d7369675a243488e08526e8c1c73571282f7c517ab",
    "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders=host;x-amz-date, Signature=a67d582fa61cc504c4bae71f336f98b97f1ea3c7a6bfe1b6e45aec72011b9aeb",
};
// get-vanilla-query-order-encoded/get-vanilla-query-order-encoded
constexpr Expected kGetVanillaQueryOrderEncoded = {
    "GET\n/\n%E1%88%B4=Value1&Param=Value2&Param-3=Value3\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-amz-date\ne3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/aws4_request\n868294f5c38bd141c4972a373a76654f1418a8e4fc18b2e7903ae45e8ae0ec71",
    "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders=host;x-amz-date, Signature=371d3713e185cc334048618a97f809c9ffe339c62934c032af5a0e595648fcac",
};
// get-vanilla-query-unreserved/get-vanilla-query-unreserved
constexpr Expected kGetVanillaQueryUnreserved = {
    "GET\n/\n-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz=-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-amz-date\ne3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/aws4_request\nc30d4703d9f799439be92736156d47ccfb2d879ddf56f5befa6d1d6aab979177",
    "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders=host;x-amz-date, Signature=9c3e54bfcdf0b19771a7f523ee5669cdf59bc7cc0884027167c21bb143a40197",
};
// get-vanilla-utf8-query/get-vanilla-utf8-query
constexpr Expected kGetVanillaUtf8Query = {
    "GET\n/\n%E1%88%B4=bar\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-amz-date\ne3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/aws4_request\neb30c5bed55734080471a834cc727ae56beb50e5f39d1bff6d0d38cb192a7073",
    "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders=host;x-amz-date, Signature=2cdec8eed098649ff3a119c94853b13c643bcf08f8b0a1d91e12c9027818dd04",
};
// get-utf8/get-utf8
constexpr Expected kGetUtf8 = {
    "GET\n/%E1%88%B4\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-amz-date\ne3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/aws4_request\n2a0a97d02205e45ce2e994789806b19270cfbbb0921b278ccf58f5249ac42102",
    "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders=host;x-amz-date, Signature=8318018e0b0f223aa2bbf98705b62bb787dc9c0e678f255a891fd03141be5d85",
};
// get-unreserved/get-unreserved
constexpr Expected kGetUnreserved = {
    "GET\n/-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-amz-date\ne3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/aws4_request\n6a968768eefaa713e2a6b16b589a8ea192661f098f37349f4e2c0082757446f9",
    "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders=host;x-amz-date, Signature=07ef7494c76fa4850883e2b006601f940f8a34d404d0cfa977f52a65bbf5f24f",
};
// normalize-path/get-space/get-space
constexpr Expected kGetSpace = {
    "GET\n/example%20space/\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-amz-date\ne3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/aws4_request\n63ee75631ed7234ae61b5f736dfc7754cdccfedbff4b5128a915706ee9390d86",
    "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders=host;x-amz-date, Signature=652487583200325589f1fba4c7e578f72c47cb61beeca81406b39ddec1366741",
};
// normalize-path/get-slashes/get-slashes
constexpr Expected kGetSlashes = {
    "GET\n/example/\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-amz-date\ne3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/aws4_request\ncb96b4ac96d501f7c5c15bc6d67b3035061cfced4af6585ad927f7e6c985c015",
    "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders=host;x-amz-date, Signature=9a624bd73a37c9a373b5312afbebe7a714a789de108f0bdfe846570885f57e84",
};
// normalize-path/get-relative-relative/get-relative-relative
constexpr Expected kGetRelativeRelative = {
    "GET\n/\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-amz-date\ne3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/aws4_request\nbb579772317eb040ac9ed261061d46c1f17a8133879d6129b6e1c25292927e63",
    "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders=host;x-amz-date, Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31",
};
// normalize-path/get-special-character/get-special-character
constexpr Expected kGetSpecialCharacter = {
    "GET\n/example/%24delete\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-amz-date\ne3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/aws4_request\n4053e45b5cef7cec5e17f736b1c12b3faf0388fd4c0bd24326386f132039ce5c",
    "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders=host;x-amz-date, Signature=a853c9b21b528b19643d00910d35b83a10c366a10833ceefb45edd6c80e40f27",
};
// post-x-www-form-urlencoded/post-x-www-form-urlencoded
constexpr Expected kPostXWwwFormUrlencoded = {
    "POST\n/\n\ncontent-type:application/x-www-form-urlencoded\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\ncontent-type;host;x-amz-date\n9095672bbd1f56dfc5b65f3e153adc8731a4a654192329106275f4c7b24d0b6e",
    "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/aws4_request\n42a5e5bb34198acb3e84da4f085bb7927f2bc277ca766e6d19c73c2154021281",
    "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders=content-type;host;x-amz-date, Signature=ff11897932ad3f4e8b18135d722051e5ac45fc38421b1da7b9d196a0fe09473a",
};
// get-header-value-trim/get-header-value-trim
constexpr Expected kGetHeaderValueTrim = {
    "GET\n/\n\nhost:example.amazonaws.com\nmy-header1:value1\nmy-header2:\"a b c\"\nx-amz-date:20150830T123600Z\n\nhost;my-header1;my-header2;x-amz-date\ne3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/aws4_request\na726db9b0df21c14f559d0a978e563112acb1b9e05476f0a6a1c7d68f28605c7",
    "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders=host;my-header1;my-header2;x-amz-date, Signature=acc3ed3afb60bb290fc8d2dd0098b9911fcaa05412b367055dee359757a9c736",
};
// get-header-key-duplicate/get-header-key-duplicate
constexpr Expected kGetHeaderKeyDuplicate = {
    "GET\n/\n\nhost:example.amazonaws.com\nmy-header1:value2,value2,value1\nx-amz-date:20150830T123600Z\n\nhost;my-header1;x-amz-date\ne3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/aws4_request\ndc7f04a3abfde8d472b0ab1a418b741b7c67174dad1551b4117b15527fbe966c",
    "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders=host;my-header1;x-amz-date, Signature=c9d5ea9f3f72853aea855b47ea873832890dbdd183b4468f858259531a5138ea",
};
// get-vanilla-with-session-token/get-vanilla-with-session-token
constexpr Expected kGetVanillaWithSessionToken = {
    "GET\n/\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\nx-amz-security-token:6e86291e8372ff2a2260956d9b8aae1d763fbf315fa00fa31553b73ebf194267\n\nhost;x-amz-date;x-amz-security-token\ne3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/aws4_request\n067b36aa60031588cea4a4cde1f21215227a047690c72247f1d70b32fbbfad2b",
    "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders=host;x-amz-date;x-amz-security-token, Signature=07ec1639c89043aa0e3e2de82b96708f198cceab042d4a97044c66dd9f74e7f8",
};
// post-sts-token/post-sts-header-before/post-sts-header-before
constexpr Expected kPostStsHeaderBefore = {
    "POST\n/\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\nx-amz-security-token:AQoDYXdzEPT//////////wEXAMPLEtc764bNrC9SAPBSM22wDOk4x4HIZ8j4FZTwdQWLWsKWHGBuFqwAeMicRXmxfpSPfIeoIYRqTflfKD8YUuwthAx7mSEI/qkPpKPi/kMcGdQrmGdeehM4IC1NtBmUpp2wUE8phUZampKsburEDy0KPkyQDYwT7WZ0wq5VSXDvp75YU9HFvlRd8Tx6q6fE8YQcHNVXAkiY9q6d+xo0rKwT38xVqr7ZD0u0iPPkUL64lIZbqBAz+scqKmlzm8FDrypNC9Yjc8fPOLn9FX9KSYvKTr4rvx3iSIlTJabIQwj2ICCR/oLxBA==\n\nhost;x-amz-date;x-amz-security-token\ne3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/aws4_request\nc237e1b440d4c63c32ca95b5b99481081cb7b13c7e40434868e71567c1a882f6",
    "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders=host;x-amz-date;x-amz-security-token, Signature=85d96828115b5dc0cfc3bd16ad9e210dd772bbebba041836c64533a82be05ead",
};
// post-sts-token/post-sts-header-after/post-sts-header-after
constexpr Expected kPostStsHeaderAfter = {
    "POST\n/\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-amz-date\ne3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/aws4_request\n553f88c9e4d10fc9e109e2aeb65f030801b70c2f6468faca261d401ae622fc87",
    "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders=host;x-amz-date, Signature=5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b",
};

constexpr int64_t k20150830T123600Z = 1440938160;
constexpr int64_t k20130524T000000Z = 1369353600;

// The generic suite's request: host example.amazonaws.com, GET /, empty body.
SigV4Request SuiteRequest() {
  SigV4Request r;
  r.method = "GET";
  r.host = "example.amazonaws.com";
  r.path = "/";
  r.payload_hash = std::string(kEmptyPayloadSha256);
  return r;
}

void ExpectSuite(const SigV4Request& r, const Expected& want, const std::string& token = "") {
  const SigV4Credentials creds{"AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", token};
  const SigV4Scope scope{"us-east-1", "service", SigV4Style::kGeneric};
  auto sig = SignV4(r, creds, scope, k20150830T123600Z);
  ASSERT_TRUE(sig.ok()) << sig.status().ToString();
  EXPECT_EQ(sig->canonical_request, want.creq);
  EXPECT_EQ(sig->string_to_sign, want.sts);
  ASSERT_FALSE(sig->headers.empty());
  EXPECT_EQ(sig->headers.back().first, "Authorization");
  EXPECT_EQ(sig->headers.back().second, want.authz);
}

TEST(SigV4Test, GetVanilla) { ExpectSuite(SuiteRequest(), kGetVanilla); }

TEST(SigV4Test, GetVanillaQueryOrderKeyCase) {
  SigV4Request r = SuiteRequest();
  r.query = {{"Param2", "value2"}, {"Param1", "value1"}};
  ExpectSuite(r, kGetVanillaQueryOrderKeyCase);
}

TEST(SigV4Test, GetVanillaEmptyQueryKey) {
  SigV4Request r = SuiteRequest();
  r.query = {{"Param1", "value1"}};
  ExpectSuite(r, kGetVanillaEmptyQueryKey);
}

TEST(SigV4Test, GetVanillaQueryOrderEncoded) {
  SigV4Request r = SuiteRequest();
  r.query = {{"Param-3", "Value3"}, {"Param", "Value2"}, {"\xE1\x88\xB4", "Value1"}};
  ExpectSuite(r, kGetVanillaQueryOrderEncoded);
}

TEST(SigV4Test, GetVanillaQueryUnreserved) {
  SigV4Request r = SuiteRequest();
  const std::string u = "-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
  r.query = {{u, u}};
  ExpectSuite(r, kGetVanillaQueryUnreserved);
}

TEST(SigV4Test, GetVanillaUtf8Query) {
  SigV4Request r = SuiteRequest();
  r.query = {{"\xE1\x88\xB4", "bar"}};
  ExpectSuite(r, kGetVanillaUtf8Query);
}

TEST(SigV4Test, GetUtf8) {
  SigV4Request r = SuiteRequest();
  r.path = "/\xE1\x88\xB4";
  ExpectSuite(r, kGetUtf8);
}

TEST(SigV4Test, GetUnreserved) {
  SigV4Request r = SuiteRequest();
  r.path = "/-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
  ExpectSuite(r, kGetUnreserved);
}

TEST(SigV4Test, GetSpace) {
  SigV4Request r = SuiteRequest();
  r.path = "/example space/";
  ExpectSuite(r, kGetSpace);
}

TEST(SigV4Test, GenericNormalizesSlashes) {
  SigV4Request r = SuiteRequest();
  r.path = "//example//";
  ExpectSuite(r, kGetSlashes);
}

TEST(SigV4Test, GenericNormalizesRelativeRelative) {
  SigV4Request r = SuiteRequest();
  r.path = "/example1/example2/../..";
  ExpectSuite(r, kGetRelativeRelative);
}

TEST(SigV4Test, GetSpecialCharacter) {
  SigV4Request r = SuiteRequest();
  r.path = "/example/$delete";
  ExpectSuite(r, kGetSpecialCharacter);
}

TEST(SigV4Test, PostXWwwFormUrlencoded) {
  SigV4Request r = SuiteRequest();
  r.method = "POST";
  r.headers = {{"Content-Type", "application/x-www-form-urlencoded"}};
  auto body_hash = Sha256Hex("Param1=value1");
  ASSERT_TRUE(body_hash.ok());
  r.payload_hash = *body_hash;
  ExpectSuite(r, kPostXWwwFormUrlencoded);
}

TEST(SigV4Test, GetHeaderValueTrim) {
  SigV4Request r = SuiteRequest();
  r.headers = {{"My-Header1", " value1"}, {"My-Header2", " \"a   b   c\""}};
  ExpectSuite(r, kGetHeaderValueTrim);
}

TEST(SigV4Test, GetHeaderKeyDuplicate) {
  SigV4Request r = SuiteRequest();
  r.headers = {{"My-Header1", "value2"}, {"My-Header1", "value2"}, {"My-Header1", "value1"}};
  ExpectSuite(r, kGetHeaderKeyDuplicate);
}

TEST(SigV4Test, GetVanillaWithSessionToken) {
  ExpectSuite(SuiteRequest(), kGetVanillaWithSessionToken,
              "6e86291e8372ff2a2260956d9b8aae1d763fbf315fa00fa31553b73ebf194267");
}

TEST(SigV4Test, PostStsHeaderBefore) {
  SigV4Request r = SuiteRequest();
  r.method = "POST";
  ExpectSuite(r, kPostStsHeaderBefore,
              "AQoDYXdzEPT//////////wEXAMPLEtc764bNrC9SAPBSM22wDOk4x4HIZ8j4FZTwdQWLWsKWHGBuFqwAeMicRXmx"
              "fpSPfIeoIYRqTflfKD8YUuwthAx7mSEI/qkPpKPi/kMcGdQrmGdeehM4IC1NtBmUpp2wUE8phUZampKsburEDy0KPk"
              "yQDYwT7WZ0wq5VSXDvp75YU9HFvlRd8Tx6q6fE8YQcHNVXAkiY9q6d+xo0rKwT38xVqr7ZD0u0iPPkUL64lIZbqBA"
              "z+scqKmlzm8FDrypNC9Yjc8fPOLn9FX9KSYvKTr4rvx3iSIlTJabIQwj2ICCR/oLxBA==");
}

// "After": the token header is added once the request is signed, so it is not signed; with
// SignV4 that is a signature without a token (the caller adds the header itself).
TEST(SigV4Test, PostStsHeaderAfter) {
  SigV4Request r = SuiteRequest();
  r.method = "POST";
  ExpectSuite(r, kPostStsHeaderAfter);
}

// ---- S3 style -------------------------------------------------------------------------

const SigV4Credentials kS3Creds{"AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", ""};
const SigV4Scope kS3Scope{"us-east-1", "s3", SigV4Style::kS3};

SigV4Request S3Get(const std::string& host, const std::string& path) {
  SigV4Request r;
  r.method = "GET";
  r.host = host;
  r.path = path;
  r.payload_hash = std::string(kUnsignedPayload);
  return r;
}

std::string HeaderValue(const SigV4Signature& sig, const std::string& name) {
  for (const auto& [k, v] : sig.headers) {
    if (k == name) return v;
  }
  return "<absent>";
}

// The S3 API reference's worked "GET Object" example (first 10 bytes of test.txt).
TEST(SigV4Test, S3DocGetObjectRange) {
  SigV4Request r = S3Get("examplebucket.s3.amazonaws.com", "/test.txt");
  r.headers = {{"Range", "bytes=0-9"}};
  r.payload_hash = std::string(kEmptyPayloadSha256);
  auto sig = SignV4(r, kS3Creds, kS3Scope, k20130524T000000Z);
  ASSERT_TRUE(sig.ok()) << sig.status().ToString();
  EXPECT_EQ(sig->canonical_request,
            "GET\n/test.txt\n\nhost:examplebucket.s3.amazonaws.com\nrange:bytes=0-9\n"
            "x-amz-content-sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\n"
            "x-amz-date:20130524T000000Z\n\nhost;range;x-amz-content-sha256;x-amz-date\n"
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sig->string_to_sign,
            "AWS4-HMAC-SHA256\n20130524T000000Z\n20130524/us-east-1/s3/aws4_request\n"
            "7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972");
  EXPECT_EQ(sig->signature, "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
  EXPECT_EQ(HeaderValue(*sig, "Authorization"),
            "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
            "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
            "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
  EXPECT_EQ(HeaderValue(*sig, "x-amz-date"), "20130524T000000Z");
  EXPECT_EQ(HeaderValue(*sig, "x-amz-content-sha256"), kEmptyPayloadSha256);
  EXPECT_EQ(HeaderValue(*sig, "x-amz-security-token"), "<absent>");
  EXPECT_EQ(sig->encoded_path, "/test.txt");
  EXPECT_EQ(sig->encoded_query, "");
}

// Path-style host, a key with space, '+', '=', '~', UTF-8 and '%': encoded once, uppercase.
TEST(SigV4Test, S3KeyNeedingEncodingPathStyle) {
  SigV4Request r = S3Get("s3.us-east-1.amazonaws.com", "/examplebucket/my key+a=b~c/\xC3\xA9%");
  auto sig = SignV4(r, kS3Creds, kS3Scope, k20130524T000000Z);
  ASSERT_TRUE(sig.ok()) << sig.status().ToString();
  EXPECT_EQ(sig->encoded_path, "/examplebucket/my%20key%2Ba%3Db~c/%C3%A9%25");
  EXPECT_EQ(HeaderValue(*sig, "x-amz-content-sha256"), "UNSIGNED-PAYLOAD");
  EXPECT_EQ(sig->canonical_request,
            "GET\n/examplebucket/my%20key%2Ba%3Db~c/%C3%A9%25\n\nhost:s3.us-east-1.amazonaws.com\n"
            "x-amz-content-sha256:UNSIGNED-PAYLOAD\nx-amz-date:20130524T000000Z\n\n"
            "host;x-amz-content-sha256;x-amz-date\nUNSIGNED-PAYLOAD");
  EXPECT_EQ(sig->signature, "30b9e2f7b8a9aeb1a9021d9660f2c4b6ca15654314d53542f4a39411901b3080");
}

// S3 keeps "//", "./" and "../": they are part of the key. kGeneric would normalise them.
TEST(SigV4Test, S3DoesNotNormalizePath) {
  SigV4Request r = S3Get("examplebucket.s3.amazonaws.com", "/a//b/./c/../d");
  auto sig = SignV4(r, kS3Creds, kS3Scope, k20130524T000000Z);
  ASSERT_TRUE(sig.ok()) << sig.status().ToString();
  EXPECT_EQ(sig->encoded_path, "/a//b/./c/../d");
  EXPECT_EQ(sig->signature, "78a22e02afe268f355131e81b5ace191c7651c0902e9e4999da2def2cbd32cf9");

  SigV4Scope generic = kS3Scope;
  generic.style = SigV4Style::kGeneric;
  auto gen = SignV4(r, kS3Creds, generic, k20130524T000000Z);
  ASSERT_TRUE(gen.ok());
  EXPECT_EQ(gen->encoded_path, "/a/b/d");
  EXPECT_EQ(HeaderValue(*gen, "x-amz-content-sha256"), "<absent>");
}

// S3 encodes once: a key holding "%20" literally becomes %2520, never a space.
TEST(SigV4Test, S3EncodesPercentOnce) {
  auto sig = SignV4(S3Get("b.s3.amazonaws.com", "/a%20b"), kS3Creds, kS3Scope, k20130524T000000Z);
  ASSERT_TRUE(sig.ok());
  EXPECT_EQ(sig->encoded_path, "/a%2520b");
}

TEST(SigV4Test, S3SessionTokenIsSentAndSigned) {
  SigV4Request r = S3Get("examplebucket.s3.amazonaws.com", "/c/0/1");
  r.headers = {{"Range", "bytes=100-199"}};
  SigV4Credentials creds = kS3Creds;
  creds.session_token = "IQoJb3JpZ2luX2VjEXAMPLE/+token==";
  auto sig = SignV4(r, creds, kS3Scope, k20130524T000000Z);
  ASSERT_TRUE(sig.ok()) << sig.status().ToString();
  EXPECT_EQ(HeaderValue(*sig, "x-amz-security-token"), "IQoJb3JpZ2luX2VjEXAMPLE/+token==");
  EXPECT_EQ(sig->canonical_request,
            "GET\n/c/0/1\n\nhost:examplebucket.s3.amazonaws.com\nrange:bytes=100-199\n"
            "x-amz-content-sha256:UNSIGNED-PAYLOAD\nx-amz-date:20130524T000000Z\n"
            "x-amz-security-token:IQoJb3JpZ2luX2VjEXAMPLE/+token==\n\n"
            "host;range;x-amz-content-sha256;x-amz-date;x-amz-security-token\nUNSIGNED-PAYLOAD");
  EXPECT_EQ(sig->signature, "9cf11f0026d530c9e5a6bc4e5c229fb867348c64e39ea971f25d5251f7b6fdeb");
  ASSERT_EQ(sig->headers.size(), 4u);
  EXPECT_EQ(sig->headers[0].first, "x-amz-date");
  EXPECT_EQ(sig->headers[1].first, "x-amz-content-sha256");
  EXPECT_EQ(sig->headers[2].first, "x-amz-security-token");
  EXPECT_EQ(sig->headers[3].first, "Authorization");
}

// ListObjectsV2-style query: '/' encoded in values, "acl" without value signs as "acl=",
// parameters sorted by encoded name.
TEST(SigV4Test, S3QuerySortedEncodedAndEmptyValue) {
  SigV4Request r = S3Get("examplebucket.s3.amazonaws.com", "/");
  r.query = {{"prefix", "data/c/"}, {"list-type", "2"}, {"acl", ""}};
  auto sig = SignV4(r, kS3Creds, kS3Scope, k20130524T000000Z);
  ASSERT_TRUE(sig.ok()) << sig.status().ToString();
  EXPECT_EQ(sig->encoded_query, "acl=&list-type=2&prefix=data%2Fc%2F");
  EXPECT_EQ(sig->signature, "1cedd2f4102a94b1178619c949c13d8f0296c6e5f9e936752a670bc06d850b6c");
}

TEST(SigV4Test, SameInputsSameSignatureAndTimeMatters) {
  SigV4Request r = S3Get("b.s3.amazonaws.com", "/k");
  auto a = SignV4(r, kS3Creds, kS3Scope, k20130524T000000Z);
  auto b = SignV4(r, kS3Creds, kS3Scope, k20130524T000000Z);
  auto c = SignV4(r, kS3Creds, kS3Scope, k20130524T000000Z + 1);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(a->signature, b->signature);
  EXPECT_NE(a->signature, c->signature);
}

TEST(SigV4Test, RejectsBadInputWithoutQuotingSecrets) {
  const SigV4Request good = S3Get("b.s3.amazonaws.com", "/k");
  auto expect_invalid = [&](const SigV4Request& r, const SigV4Credentials& c, const SigV4Scope& s,
                            int64_t t) {
    auto sig = SignV4(r, c, s, t);
    ASSERT_FALSE(sig.ok());
    EXPECT_EQ(sig.status().code(), StatusCode::kInvalidArgument);
    if (!c.secret_access_key.empty()) {
      EXPECT_EQ(sig.status().message().find(c.secret_access_key), std::string::npos);
    }
    if (!c.session_token.empty()) {
      EXPECT_EQ(sig.status().message().find(c.session_token), std::string::npos);
    }
  };
  SigV4Request r = good;
  r.path = "k";
  expect_invalid(r, kS3Creds, kS3Scope, k20130524T000000Z);
  r = good;
  r.payload_hash = "E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855";
  expect_invalid(r, kS3Creds, kS3Scope, k20130524T000000Z);
  r = good;
  r.headers = {{"X-Evil", "a\r\nAuthorization: x"}};
  expect_invalid(r, kS3Creds, kS3Scope, k20130524T000000Z);
  r = good;
  r.headers = {{"Bad Name", "v"}};
  expect_invalid(r, kS3Creds, kS3Scope, k20130524T000000Z);
  for (const char* owned : {"Host", "authorization", "X-Amz-Date", "x-amz-content-sha256",
                            "X-Amz-Security-Token"}) {
    r = good;
    r.headers = {{owned, "v"}};
    expect_invalid(r, kS3Creds, kS3Scope, k20130524T000000Z);
  }
  r = good;
  r.host = "";
  expect_invalid(r, kS3Creds, kS3Scope, k20130524T000000Z);
  SigV4Credentials c = kS3Creds;
  c.session_token = "tok\nen-secret";
  expect_invalid(good, c, kS3Scope, k20130524T000000Z);
  c = kS3Creds;
  c.access_key_id = "";
  expect_invalid(good, c, kS3Scope, k20130524T000000Z);
  c = kS3Creds;
  c.secret_access_key = "";
  expect_invalid(good, c, kS3Scope, k20130524T000000Z);
  SigV4Scope s = kS3Scope;
  s.region = "us/east";
  expect_invalid(good, kS3Creds, s, k20130524T000000Z);
  expect_invalid(good, kS3Creds, kS3Scope, -1);
  expect_invalid(good, kS3Creds, kS3Scope, 253402300800);
}

TEST(SigV4Test, FormatAmzDate) {
  EXPECT_EQ(FormatAmzDate(0).value(), "19700101T000000Z");
  EXPECT_EQ(FormatAmzDate(k20150830T123600Z).value(), "20150830T123600Z");
  EXPECT_EQ(FormatAmzDate(951782400).value(), "20000229T000000Z");  // leap day
  EXPECT_EQ(FormatAmzDate(253402300799).value(), "99991231T235959Z");
  EXPECT_FALSE(FormatAmzDate(-1).ok());
}

TEST(SigV4Test, Sha256HexAndUriEncode) {
  EXPECT_EQ(Sha256Hex("").value(), kEmptyPayloadSha256);
  EXPECT_EQ(UriEncode("a b/c~d+e=f", true), "a%20b/c~d%2Be%3Df");
  EXPECT_EQ(UriEncode("a b/c", false), "a%20b%2Fc");
  EXPECT_EQ(UriEncode("\xC3\xA9\xFF", false), "%C3%A9%FF");
}

// ---- RedactSecrets ---------------------------------------------------------------------

TEST(SigV4Test, RedactsPresignedUrl) {
  const std::string url =
      "https://b.s3.amazonaws.com/c/0/1?X-Amz-Algorithm=AWS4-HMAC-SHA256"
      "&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request"
      "&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host"
      "&X-Amz-Security-Token=IQoJb3JpZ2luX2VjEXAMPLE%2F%2Btoken%3D%3D"
      "&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404";
  EXPECT_EQ(RedactSecrets(url),
            "https://b.s3.amazonaws.com/c/0/1?X-Amz-Algorithm=AWS4-HMAC-SHA256"
            "&X-Amz-Credential=[REDACTED]&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400"
            "&X-Amz-SignedHeaders=host&X-Amz-Security-Token=[REDACTED]&X-Amz-Signature=[REDACTED]");
  // Lowercase parameter names too (some S3-compatible stores emit them).
  EXPECT_EQ(RedactSecrets("GET /k?x-amz-signature=abc123 failed"), "GET /k?x-amz-signature=[REDACTED] failed");
}

TEST(SigV4Test, RedactsHeaderDump) {
  const std::string dump =
      "GET /c/0/1 HTTP/1.1\r\nHost: b.s3.amazonaws.com\r\nRange: bytes=0-9\r\n"
      "Authorization: AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/"
      "aws4_request, SignedHeaders=host;range, Signature=f0e8bdb87c964420e857bd35b5d6ed31\r\n"
      "x-amz-security-token:IQoJb3JpZ2luX2VjEXAMPLE/+token==\r\nx-amz-date: 20130524T000000Z\r\n";
  EXPECT_EQ(RedactSecrets(dump),
            "GET /c/0/1 HTTP/1.1\r\nHost: b.s3.amazonaws.com\r\nRange: bytes=0-9\r\n"
            "Authorization: [REDACTED]\r\nx-amz-security-token:[REDACTED]\r\n"
            "x-amz-date: 20130524T000000Z\r\n");
}

TEST(SigV4Test, RedactsReprsAndBareAuthorizationValues) {
  EXPECT_EQ(RedactSecrets("{'Authorization': 'AWS4-HMAC-SHA256 Credential=AK/x, Signature=ab', 'Range': 'bytes=0-9'}"),
            "{'Authorization': '[REDACTED]', 'Range': 'bytes=0-9'}");
  EXPECT_EQ(RedactSecrets(R"({"X-Amz-Security-Token": "tok/+=", "a": 1})"),
            R"({"X-Amz-Security-Token": "[REDACTED]", "a": 1})");
  EXPECT_EQ(RedactSecrets("AWS4-HMAC-SHA256 Credential=AKID/20150830/us-east-1/s3/aws4_request, "
                          "SignedHeaders=host;x-amz-date, Signature=5fa00fa3"),
            "AWS4-HMAC-SHA256 Credential=[REDACTED], SignedHeaders=host;x-amz-date, "
            "Signature=[REDACTED]");
}

TEST(SigV4Test, RedactLeavesOtherTextAndIsIdempotent) {
  const std::string plain =
      "SignatureDoesNotMatch: the signature we calculated does not match; SignedHeaders=host;range "
      "key c/0/1 bytes [0, 10)";
  EXPECT_EQ(RedactSecrets(plain), plain);
  EXPECT_EQ(RedactSecrets(""), "");
  const std::string once = RedactSecrets("Authorization: AWS4 x\nX-Amz-Signature=ff&a=b");
  EXPECT_EQ(once, "Authorization: [REDACTED]\nX-Amz-Signature=[REDACTED]&a=b");
  EXPECT_EQ(RedactSecrets(once), once);
}

// What SignV4 produces, once redacted, holds no signature, token or credential.
TEST(SigV4Test, RedactsSignerOutput) {
  SigV4Request r = S3Get("examplebucket.s3.amazonaws.com", "/c/0/1");
  SigV4Credentials creds = kS3Creds;
  creds.session_token = "IQoJb3JpZ2luX2VjEXAMPLEtoken";
  auto sig = SignV4(r, creds, kS3Scope, k20130524T000000Z);
  ASSERT_TRUE(sig.ok());
  std::string dump = sig->canonical_request + "\n";
  for (const auto& [k, v] : sig->headers) dump += k + ": " + v + "\n";
  const std::string red = RedactSecrets(dump);
  EXPECT_EQ(red.find(creds.session_token), std::string::npos) << red;
  EXPECT_EQ(red.find(sig->signature), std::string::npos) << red;
  EXPECT_EQ(red.find(creds.access_key_id), std::string::npos) << red;
  EXPECT_EQ(red.find(creds.secret_access_key), std::string::npos) << red;
  EXPECT_NE(red.find("x-amz-date: 20130524T000000Z"), std::string::npos) << red;
}

}  // namespace
}  // namespace lsio
