// The read backends every I/O test runs against: pread, and where io_uring works plain
// io_uring and io_uring with inline page-cache hits (header-only, for lsio_io_test's files).
#pragma once

#include <memory>
#include <vector>

#include "io/io_backend.h"
#include "io/select_backend.h"

namespace lsio_test {

struct NamedBackend {
  const char* name;
  std::unique_ptr<lsio::IoBackend> backend;
};

inline std::vector<NamedBackend> AllBackends() {
  std::vector<NamedBackend> out;
  out.push_back({"pread", lsio::MakePreadBackend()});
  if (lsio::UringSupport().available) {
    out.push_back({"uring", std::move(lsio::MakeUringBackend(8, false)).value()});
    out.push_back({"uring+nowait", std::move(lsio::MakeUringBackend(8, true)).value()});
  }
  return out;
}

}  // namespace lsio_test
