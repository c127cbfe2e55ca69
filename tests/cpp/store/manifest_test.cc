// Manifest (compact tables, lookups, children), kerchunk JSON references (versions 0 and 1,
// templates, base64, whole-object and range references, the errors) and ManifestStore over
// a LocalStore (ranges of a real file, inline values, missing targets, reads past the end).
#include "store/manifest.h"

#include <algorithm>
#include <cerrno>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "store/kerchunk.h"
#include "store/local_store.h"
#include "test_util.h"

namespace lsio {
namespace {

using lsio_test::TempDir;

std::shared_ptr<const Manifest> Parse(const std::string& json) {
  auto m = ParseKerchunkJson(json);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? m.value() : nullptr;
}

TEST(ManifestTest, FindsEveryKindAndNothingElse) {
  Manifest::Builder b;
  const uint32_t u = b.Url("s3://bucket/a.nc");
  EXPECT_EQ(b.Url("s3://bucket/a.nc"), u);  // deduplicated
  b.AddRange("t/0.1", u, 100, 20);
  b.AddInline("t/.zarray", "{}");
  b.AddWhole("t/0.0", b.Url("s3://bucket/b.nc"));
  auto m = std::move(b).Finish();
  ASSERT_TRUE(m.ok());
  const Manifest& man = *m.value();
  EXPECT_EQ(man.size(), 3u);
  EXPECT_EQ(man.urls().size(), 2u);
  Manifest::Entry e = man.Find("t/0.1");
  EXPECT_EQ(e.kind, Manifest::Kind::kRange);
  EXPECT_EQ(man.urls()[e.url], "s3://bucket/a.nc");
  EXPECT_EQ(e.offset, 100u);
  EXPECT_EQ(e.length, 20u);
  EXPECT_EQ(man.Find("t/.zarray").kind, Manifest::Kind::kInline);
  EXPECT_EQ(man.Find("t/.zarray").bytes, "{}");
  EXPECT_EQ(man.Find("t/0.0").kind, Manifest::Kind::kWhole);
  EXPECT_EQ(man.Find("t/0.2").kind, Manifest::Kind::kMissing);
  EXPECT_EQ(man.Find("t").kind, Manifest::Kind::kMissing);
  EXPECT_EQ(man.Find("").kind, Manifest::Kind::kMissing);
}

TEST(ManifestTest, RefusesAKeyGivenTwice) {
  Manifest::Builder b;
  b.AddInline("a", "1");
  b.AddInline("a", "2");
  auto m = std::move(b).Finish();
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kInvalidFormat);
}

TEST(ManifestTest, ChildrenAreTheNamesOneLevelDown) {
  Manifest::Builder b;
  for (const char* k : {".zgroup", "a/.zarray", "a/0", "a/1", "b/c/.zarray", "b/c/0", "b/.zgroup", "ab/.zarray"}) {
    b.AddInline(k, "x");
  }
  auto m = std::move(b).Finish().value();
  EXPECT_EQ(m->Children(""), (std::vector<std::string>{"a", "ab", "b"}));
  EXPECT_EQ(m->Children("b"), (std::vector<std::string>{"c"}));
  EXPECT_EQ(m->Children("b/"), (std::vector<std::string>{"c"}));
  EXPECT_TRUE(m->Children("a").empty());
  EXPECT_TRUE(m->Children("zz").empty());
}

TEST(ManifestTest, AMillionReferencesCostTensOfMegabytes) {
  Manifest::Builder b;
  const uint32_t u = b.Url("s3://bucket/era5/2020.nc");
  constexpr int kN = 1000000;
  for (int i = 0; i < kN; ++i) {
    b.AddRange("t2m/" + std::to_string(i / 10000) + "." + std::to_string(i % 100) + "." + std::to_string(i % 10000 / 100),
               u, static_cast<uint64_t>(i) * 4096, 4000);
  }
  auto m = std::move(b).Finish().value();
  EXPECT_EQ(m->size(), static_cast<size_t>(kN));
  const uint64_t bytes = m->memory_bytes();
  EXPECT_LT(bytes, 50ull << 20) << bytes;  // ~24 bytes + the key per reference
  const Manifest::Entry e = m->Find("t2m/12.34.56");
  ASSERT_EQ(e.kind, Manifest::Kind::kRange);
  EXPECT_EQ(e.offset, (12 * 10000 + 56 * 100 + 34) * 4096ull);
}

TEST(KerchunkTest, ReadsVersion0AndVersion1WithTemplates) {
  auto m0 = Parse(R"({".zgroup": "{\"zarr_format\": 2}", "x/0": ["/data/a.h5", 10, 5], "x/1": ["/data/b.h5"],
                      "x/.zattrs": {"units": "K"}, "x/2": null})");
  ASSERT_NE(m0, nullptr);
  EXPECT_EQ(m0->Find(".zgroup").bytes, R"({"zarr_format": 2})");
  EXPECT_EQ(m0->Find("x/.zattrs").bytes, R"({"units":"K"})");  // an object, written back as JSON
  EXPECT_EQ(m0->Find("x/0").kind, Manifest::Kind::kRange);
  EXPECT_EQ(m0->Find("x/1").kind, Manifest::Kind::kWhole);
  EXPECT_EQ(m0->Find("x/2").kind, Manifest::Kind::kMissing);  // null: no data
  auto m1 = Parse(R"({"version": 1, "templates": {"u": "s3://bucket/era5", "v": "2020"},
                      "refs": {"t/0": ["{{u}}/{{ v }}.nc", 0, 8], "t/1": "base64:AAECAw==", "t/2": "plain"}})");
  ASSERT_NE(m1, nullptr);
  EXPECT_EQ(m1->urls(), (std::vector<std::string>{"s3://bucket/era5/2020.nc"}));
  EXPECT_EQ(m1->Find("t/1").bytes, std::string("\x00\x01\x02\x03", 4));
  EXPECT_EQ(m1->Find("t/2").bytes, "plain");
}

TEST(KerchunkTest, MalformedReferencesAreTypedErrorsNamingTheKey) {
  struct Case {
    const char* json;
    StatusCode code;
    const char* says;
  };
  const Case cases[] = {
      {"{", StatusCode::kInvalidFormat, "not valid JSON"},
      {"[1, 2]", StatusCode::kInvalidFormat, "expected a JSON object"},
      {R"({"version": 2, "refs": {}})", StatusCode::kUnimplemented, "version 2"},
      {R"({"version": 1})", StatusCode::kInvalidFormat, "\"refs\""},
      {R"({"version": 1, "refs": {}, "gen": [{"key": "x/{{i}}"}]})", StatusCode::kUnimplemented, "gen"},
      {R"({"a/0": "base64:@@@"})", StatusCode::kInvalidFormat, "\"a/0\": invalid base64"},
      {R"({"../etc/passwd": "x"})", StatusCode::kInvalidFormat, "\"../etc/passwd\""},
      {R"({"/abs": "x"})", StatusCode::kInvalidFormat, "\"/abs\""},
      {R"({"a/0": ["u", -1, 5]})", StatusCode::kInvalidFormat, "non-negative"},
      {R"({"a/0": ["u", 1]})", StatusCode::kInvalidFormat, "expected a string"},
      {R"({"a/0": [3, 1, 2]})", StatusCode::kInvalidFormat, "expected a string"},
      {R"({"a/0": 7})", StatusCode::kInvalidFormat, "expected a string"},
      {R"({"version": 1, "refs": {"a/0": ["{{nope}}/x", 0, 1]}})", StatusCode::kInvalidFormat, "template \"nope\""},
      {R"({"a/0": ["", 0, 1]})", StatusCode::kInvalidFormat, "empty URL"},
      {R"({"a/0": ["u", 18446744073709551615, 2]})", StatusCode::kInvalidFormat, "overflows"},
  };
  for (const Case& c : cases) {
    auto m = ParseKerchunkJson(c.json);
    ASSERT_FALSE(m.ok()) << c.json;
    EXPECT_EQ(m.status().code(), c.code) << c.json << ": " << m.status().ToString();
    EXPECT_NE(m.status().message().find(c.says), std::string::npos) << c.json << ": " << m.status().ToString();
  }
}

class ManifestStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int i = 0; i < 1000; ++i) data_.push_back(static_cast<char>(i * 7 + 3));
    path_ = dir_.Write("files/a.bin", data_);
    auto m = Parse(R"({"version": 1, "refs": {
        ".zgroup": "{\"zarr_format\": 2}",
        "v/x": ["file:a.bin", 100, 50], "v/whole": ["file:a.bin"], "v/inline": "base64:AQID",
        "v/broken": ["file:nope.bin", 0, 4], "v/past": ["file:a.bin", 990, 20]}})");
    ASSERT_NE(m, nullptr);
    std::vector<std::string> keys;
    for (const std::string& u : m->urls()) keys.push_back("files/" + u.substr(5));
    store_ = std::make_shared<ManifestStore>(m, "", std::make_shared<LocalStore>(dir_.path()), keys, "refs.json");
  }

  TempDir dir_;
  std::string data_, path_;
  std::shared_ptr<ManifestStore> store_;
};

TEST_F(ManifestStoreTest, ReadAllServesInlineValuesRangesAndWholeObjects) {
  EXPECT_EQ(*store_->ReadAll(".zgroup", 1 << 20).value(), R"({"zarr_format": 2})");
  EXPECT_EQ(*store_->ReadAll("v/x", 1 << 20).value(), data_.substr(100, 50));
  EXPECT_EQ(*store_->ReadAll("v/whole", 1 << 20).value(), data_);
  EXPECT_EQ(*store_->ReadAll("v/inline", 1 << 20).value(), "\x01\x02\x03");
  EXPECT_FALSE(store_->ReadAll("v/none", 1 << 20).value().has_value());
  auto big = store_->ReadAll("v/x", 10);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().code(), StatusCode::kInvalidFormat);
  auto sub = store_->Sub("v");
  EXPECT_EQ(*sub->ReadAll("x", 1 << 20).value(), data_.substr(100, 50));
  EXPECT_EQ(sub->Stat("x").value().size, 50u);
  EXPECT_FALSE(sub->Stat(".zgroup").value().found);  // outside the sub-store's prefix
}

TEST_F(ManifestStoreTest, RangeReadsOfASliceGoToTheTargetAtTheSliceOffset) {
  auto obj = store_->Open("v/x");
  ASSERT_TRUE(obj.ok()) << obj.status().ToString();
  ASSERT_NE(obj.value(), nullptr);
  EXPECT_TRUE(obj.value()->size_known);
  EXPECT_EQ(obj.value()->size, 50u);
  EXPECT_FALSE(obj.value()->version.empty());
  std::vector<uint8_t> a(10), b(8);
  RangeRead reads[3];
  reads[0].object = obj.value().get();
  reads[0].offset = 5;
  reads[0].length = 10;
  reads[0].dst = a.data();
  reads[1].object = obj.value().get();
  reads[1].kind = ReadKind::kSuffix;
  reads[1].length = 8;
  reads[1].dst = b.data();
  reads[2].object = obj.value().get();
  reads[2].offset = 45;
  reads[2].length = 10;  // past the slice's end
  reads[2].dst = a.data();
  std::vector<size_t> done;
  store_->Read(reads, [&](size_t i) { done.push_back(i); });
  std::sort(done.begin(), done.end());
  EXPECT_EQ(done, (std::vector<size_t>{0, 1, 2}));
  ASSERT_TRUE(reads[0].status.ok()) << reads[0].status.ToString();
  EXPECT_EQ(std::string(a.begin(), a.end()), data_.substr(105, 10));
  ASSERT_TRUE(reads[1].status.ok()) << reads[1].status.ToString();
  EXPECT_EQ(reads[1].transferred, 8u);
  EXPECT_EQ(std::string(b.begin(), b.end()), data_.substr(142, 8));
  EXPECT_EQ(reads[2].status.code(), StatusCode::kDataLoss);
  // The stream form, as the executor's workers use it.
  std::vector<uint8_t> c(50);
  RangeRead r;
  r.object = obj.value().get();
  r.length = 50;
  r.dst = c.data();
  bool given = false, finished = false;
  store_->ReadStream([&]() -> RangeRead* { return given ? nullptr : (given = true, &r); },
                     [&](RangeRead& x) { finished = &x == &r; });
  EXPECT_TRUE(finished);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(std::string(c.begin(), c.end()), data_.substr(100, 50));
}

TEST_F(ManifestStoreTest, InlineValuesOpenAsResidentObjects) {
  auto obj = store_->Open("v/inline");
  ASSERT_TRUE(obj.ok());
  ASSERT_NE(obj.value()->resident, nullptr);
  EXPECT_EQ(*obj.value()->resident, "\x01\x02\x03");
  EXPECT_EQ(store_->Open("v/none").value(), nullptr);  // not in the manifest: missing
}

TEST_F(ManifestStoreTest, BrokenReferencesAreErrorsNamingObjectAndReference) {
  auto obj = store_->Open("v/broken");
  ASSERT_FALSE(obj.ok());
  EXPECT_EQ(obj.status().code(), StatusCode::kIoError);
  EXPECT_EQ(obj.status().error_number(), ENOENT);
  EXPECT_NE(obj.status().path().find("nope.bin"), std::string::npos) << obj.status().ToString();
  EXPECT_NE(obj.status().path().find("reference \"v/broken\" of refs.json"), std::string::npos);
  auto past = store_->Open("v/past");
  ASSERT_FALSE(past.ok());
  EXPECT_EQ(past.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(past.status().path().find("bytes [990, 1010)"), std::string::npos) << past.status().ToString();
  EXPECT_EQ(store_->Location("v/x"), path_ + " bytes [100, 150) (reference \"v/x\" of refs.json)");
}

}  // namespace
}  // namespace lsio
