// DecodeBase64: standard alphabet with optional padding (Zarr fill values, kerchunk's
// "base64:" inline chunks), refusing what Python's b64decode refuses there: a last group of
// one character (a cut string) and padding that does not complete the last group.
#include "util/base64.h"

#include <string>

#include <gtest/gtest.h>

namespace lsio {
namespace {

TEST(DecodeBase64Test, DecodesPaddedAndUnpaddedGroups) {
  const std::pair<const char*, std::string> good[] = {
      {"", ""},          {"AQID", "\x01\x02\x03"}, {"AQI=", "\x01\x02"}, {"AQI", "\x01\x02"},
      {"AQ==", "\x01"},  {"AQ", "\x01"},           {"AQIDBA==", std::string("\x01\x02\x03\x04")},
      {"//8=", "\xff\xff"},
  };
  for (const auto& [in, want] : good) {
    std::string out;
    EXPECT_TRUE(DecodeBase64(in, &out)) << in;
    EXPECT_EQ(out, want) << in;
  }
}

TEST(DecodeBase64Test, RefusesCutAndMispaddedStrings) {
  for (const char* in : {"AQIDB", "A", "A===", "AQ=", "AQIDBA=", "AQI==", "AQ==AQ==", "AQ*D", "AQ ID", "====", "A=QI"}) {
    std::string out;
    EXPECT_FALSE(DecodeBase64(in, &out)) << in;
  }
}

}  // namespace
}  // namespace lsio
