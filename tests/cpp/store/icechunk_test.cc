// Icechunk metadata files (store/icechunk.h): object ids, the header and zstd payload, and
// Icechunk's own spec-version-2 test repository (tests/data/icechunk/test-repo-v2, copied from
// earth-mover/icechunk: tests/data/icechunk/SOURCE.md) parsed down to the chunk references.
#include "store/icechunk.h"

#include <zstd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace lsio {
namespace {

const std::string kRepo = std::string(LSIO_SOURCE_DIR) + "/tests/data/icechunk/test-repo-v2/";

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  EXPECT_TRUE(f.good()) << path;
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::string Header(uint8_t version, uint8_t type, uint8_t compression) {
  std::string h = "ICE\xF0\x9F\xA7\x8A" "CHUNK";
  h += std::string(24, ' ');
  h += static_cast<char>(version);
  h += static_cast<char>(type);
  h += static_cast<char>(compression);
  return h;
}

TEST(IcechunkTest, ObjectIdsAreCrockfordBase32AsTheSpecSays) {
  // The spec's example: the initial snapshot's id.
  const uint8_t id[12] = {0x0b, 0x1c, 0xc8, 0xd6, 0x78, 0x75, 0x80, 0xf0, 0xe3, 0x3a, 0x65, 0x34};
  EXPECT_EQ(CrockfordBase32(id, 12), "1CECHNKREP0F1RSTCMT0");
  const uint8_t node[8] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
  EXPECT_EQ(CrockfordBase32(node, 8), "ZZZZZZZZZZZZY");  // 64 bits: 13 digits, zero bits appended
}

TEST(IcechunkTest, HeaderAndCompressionAreChecked) {
  EXPECT_EQ(IcechunkPayload("not an icechunk file at all, really not one", IcechunkFileType::kSnapshot).status().code(),
            StatusCode::kInvalidFormat);
  EXPECT_EQ(IcechunkPayload(Header(2, 2, 0) + "x", IcechunkFileType::kSnapshot).status().code(),
            StatusCode::kInvalidFormat);  // a manifest where a snapshot was expected
  EXPECT_EQ(IcechunkPayload(Header(3, 1, 0) + "x", IcechunkFileType::kSnapshot).status().code(),
            StatusCode::kUnimplemented);
  EXPECT_EQ(IcechunkPayload(Header(2, 1, 7) + "x", IcechunkFileType::kSnapshot).status().code(),
            StatusCode::kInvalidFormat);
  int version = 0;
  auto plain = IcechunkPayload(Header(1, 1, 0) + "payload", IcechunkFileType::kSnapshot, &version);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain.value(), "payload");
  EXPECT_EQ(version, 1);
  // zstd: whole, and cut short.
  const std::string body(5000, 'z');
  std::string frame(ZSTD_compressBound(body.size()), '\0');
  frame.resize(ZSTD_compress(frame.data(), frame.size(), body.data(), body.size(), 3));
  auto whole = IcechunkPayload(Header(2, 1, 1) + frame, IcechunkFileType::kSnapshot);
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  EXPECT_EQ(whole.value(), body);
  auto cut = IcechunkPayload(Header(2, 1, 1) + frame.substr(0, frame.size() - 3), IcechunkFileType::kSnapshot);
  EXPECT_EQ(cut.status().code(), StatusCode::kInvalidFormat);
  // Not a FlatBuffer after the header: the verifier refuses it.
  EXPECT_EQ(ParseIcechunkSnapshot(Header(2, 1, 0) + std::string(64, '\xff')).status().code(),
            StatusCode::kInvalidFormat);
}

TEST(IcechunkTest, ReadsIcechunksOwnVersion2Repository) {
  auto repo = ParseIcechunkRepo(ReadFile(kRepo + "repo"));
  ASSERT_TRUE(repo.ok()) << repo.status().ToString();
  EXPECT_EQ(repo.value().spec_version, 2);
  ASSERT_EQ(repo.value().branches.size(), 2u);
  EXPECT_EQ(repo.value().branches[0], (std::pair<std::string, std::string>("main", "2768FV3XW5ZXYM84XNNG")));
  EXPECT_EQ(repo.value().branches[1].first, "my-branch");
  ASSERT_EQ(repo.value().tags.size(), 2u);
  EXPECT_EQ(repo.value().deleted_tags, std::vector<std::string>{"deleted"});
  EXPECT_NE(repo.value().config_json.find("\"virtual_chunk_containers\""), std::string::npos);

  auto snap = ParseIcechunkSnapshot(ReadFile(kRepo + "snapshots/2768FV3XW5ZXYM84XNNG"));
  ASSERT_TRUE(snap.ok()) << snap.status().ToString();
  EXPECT_EQ(snap.value().id, "2768FV3XW5ZXYM84XNNG");
  ASSERT_EQ(snap.value().nodes.size(), 4u);
  const IcechunkNode& small = snap.value().nodes[3];
  EXPECT_EQ(small.path, "/group1/small_chunks");
  ASSERT_TRUE(small.is_array);
  ASSERT_EQ(small.manifests.size(), 1u);
  EXPECT_EQ(small.manifests[0].extents, (std::vector<std::pair<uint32_t, uint32_t>>{{0, 5}}));
  EXPECT_NE(small.user_data.find("\"zarr_format\""), std::string::npos);
  EXPECT_FALSE(snap.value().nodes[0].is_array);

  const std::string manifest = ReadFile(kRepo + "manifests/" + small.manifests[0].id);
  IcechunkArrayKeys keys{small.node_id, "g/s", '/', false, 1};
  Manifest::Builder b;
  std::vector<IcechunkCheck> checks;
  ASSERT_TRUE(AddIcechunkManifest(manifest, keys, small.manifests[0].extents, &b, &checks).ok());
  auto m = std::move(b).Finish();
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m.value()->size(), 5u);  // five inline chunks
  EXPECT_EQ(m.value()->Find("g/s/c/4").kind, Manifest::Kind::kInline);
  EXPECT_EQ(m.value()->Find("g/s/c/5").kind, Manifest::Kind::kMissing);

  // Only what the extents take; the rank must agree.
  Manifest::Builder part;
  ASSERT_TRUE(AddIcechunkManifest(manifest, keys, {{1, 3}}, &part, &checks).ok());
  auto pm = std::move(part).Finish();
  ASSERT_TRUE(pm.ok());
  EXPECT_EQ(pm.value()->size(), 2u);
  Manifest::Builder wrong;
  keys.ndim = 2;
  EXPECT_EQ(AddIcechunkManifest(manifest, keys, {{0, 5}, {0, 1}}, &wrong, &checks).code(), StatusCode::kInvalidFormat);

  // big_chunks: native chunk objects and one virtual chunk with a last-modified checksum.
  const IcechunkNode& big = snap.value().nodes[2];
  Manifest::Builder bb;
  std::vector<IcechunkCheck> bchecks;
  ASSERT_TRUE(AddIcechunkManifest(ReadFile(kRepo + "manifests/" + big.manifests[0].id),
                                  IcechunkArrayKeys{big.node_id, "b", '/', false, 2}, big.manifests[0].extents, &bb,
                                  &bchecks)
                  .ok());
  auto bm = std::move(bb).Finish();
  ASSERT_TRUE(bm.ok());
  ASSERT_EQ(bm.value()->urls().size(), 4u);
  int virtual_refs = 0, native = 0;
  for (size_t i = 0; i < bm.value()->urls().size(); ++i) {
    const std::string& u = bm.value()->urls()[i];
    if (u.rfind("chunks/", 0) == 0) {
      ++native;
    } else {
      ++virtual_refs;
      EXPECT_EQ(u, "s3://testbucket/can_read_old/chunk-1");
      ASSERT_LT(i, bchecks.size());
      EXPECT_NE(bchecks[i].last_modified, 0u);
    }
  }
  EXPECT_EQ(native, 3);
  EXPECT_EQ(virtual_refs, 1);
}

}  // namespace
}  // namespace lsio
