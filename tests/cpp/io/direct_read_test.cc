// O_DIRECT support in the I/O layer: ReadRequest::min_length (an aligned read may run past the
// end of the file) on every backend, and FdCache's direct descriptors read with widened,
// aligned requests into aligned buffers.
#include <unistd.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "io/fd_cache.h"
#include "io/io_backend.h"
#include "io/select_backend.h"
#include "io/all_backends.h"
#include "test_util.h"
#include "util/aligned_buffer.h"

namespace lsio {
namespace {

using lsio_test::Bytes;
using lsio_test::TempDir;

using Named = lsio_test::NamedBackend;
using lsio_test::AllBackends;

Status ReadOne(IoBackend& b, ReadRequest* r) {
  std::span<ReadRequest> one(r, 1);
  bool called = false;
  b.Read(one, [&](size_t) { called = true; });
  EXPECT_TRUE(called);
  return r->status;
}

TEST(DirectReadTest, MinLengthAllowsEndOfFileOnlyAfterTheWantedBytes) {
  TempDir dir;
  const Bytes data = lsio_test::PatternBytes(10000, 7);
  const std::string path = dir.Write("f", data);
  FdCache files(8);
  auto f = files.Open(path);
  ASSERT_TRUE(f.ok() && f.value());
  for (Named& nb : AllBackends()) {
    SCOPED_TRACE(nb.name);
    std::vector<uint8_t> buf(4096 + 64, 0xAB);
    ReadRequest r;
    r.fd = f.value()->fd;
    r.offset = 8192;
    r.length = 4096;           // runs 2288 bytes past the end of the file
    r.dst = buf.data();
    r.min_length = 10000 - 8192;  // exactly the bytes that exist
    ASSERT_TRUE(ReadOne(*nb.backend, &r).ok()) << r.status.ToString();
    EXPECT_EQ(r.transferred, 1808u);
    EXPECT_EQ(0, std::memcmp(buf.data(), data.data() + 8192, 1808));
    EXPECT_EQ(buf[4096], 0xAB);  // nothing past the request

    r.min_length = 1809;  // one byte more than the file holds
    r.status = Status::Ok();
    const Status st = ReadOne(*nb.backend, &r);
    EXPECT_EQ(st.code(), StatusCode::kDataLoss) << st.ToString();
    EXPECT_NE(st.message().find("end of file after 1808 of 4096"), std::string::npos) << st.ToString();

    r.min_length = 0;  // the default: every byte is required
    const Status st0 = ReadOne(*nb.backend, &r);
    EXPECT_EQ(st0.code(), StatusCode::kDataLoss) << st0.ToString();
  }
}

TEST(DirectReadTest, DirectDescriptorsReadAlignedWidenedRanges) {
  TempDir dir;
  const Bytes data = lsio_test::PatternBytes(3 * 4096 + 1234, 3);
  const std::string path = dir.Write("f", data);
  FdCache files(8);
  auto f = files.Open(path, /*direct=*/true);
  ASSERT_TRUE(f.ok() && f.value()) << f.status().ToString();
  if (!f.value()->direct) GTEST_SKIP() << "the file system under " << dir.path() << " refuses O_DIRECT";
  FdCache buffered(8);
  auto fb = buffered.Open(path);
  ASSERT_TRUE(fb.ok() && fb.value());
  EXPECT_FALSE(fb.value()->direct);

  for (Named& nb : AllBackends()) {
    SCOPED_TRACE(nb.name);
    // An unaligned range, widened the way the executor does it, ending past EOF.
    const uint64_t want_off = 5000;
    const uint64_t want_end = data.size();
    ReadRequest r;
    r.fd = f.value()->fd;
    r.offset = want_off & ~(kDirectAlignment - 1);
    r.length = ((want_end + kDirectAlignment - 1) & ~(kDirectAlignment - 1)) - r.offset;
    r.min_length = want_end - r.offset;
    AlignedBuffer buf;
    ASSERT_TRUE(buf.Reserve(r.length));
    r.dst = buf.data();
    ASSERT_TRUE(ReadOne(*nb.backend, &r).ok()) << r.status.ToString();
    EXPECT_EQ(0, std::memcmp(buf.data() + (want_off - r.offset), data.data() + want_off, want_end - want_off));

    // The kernel enforces the alignment: an unaligned O_DIRECT read is an error, not data.
    std::vector<uint8_t> odd(100);
    ReadRequest bad;
    bad.fd = f.value()->fd;
    bad.offset = 7;
    bad.length = 100;
    bad.dst = odd.data();
    EXPECT_FALSE(ReadOne(*nb.backend, &bad).ok());
  }
}

}  // namespace
}  // namespace lsio
