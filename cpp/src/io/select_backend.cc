// Backend selection and the once-per-process io_uring probe.
#include "io/select_backend.h"

#include <cerrno>
#include <cstring>

#include "util/process_local.h"

namespace lsio {
namespace {

UringSupportInfo* Probe() {
  auto* info = new UringSupportInfo();
  const int r = ProbeUringSetup();
  if (r == 0) {
    info->available = true;
  } else {
    info->error = -r;
    info->reason = std::string("io_uring setup failed: ") + std::strerror(-r);
    if (-r == EPERM) info->reason += " (blocked by seccomp or kernel.io_uring_disabled)";
    if (-r == ENOSYS) info->reason += " (kernel without io_uring)";
  }
  return info;
}

ProcessLocal<UringSupportInfo>* const g_uring_support = new ProcessLocal<UringSupportInfo>(Probe);

}  // namespace

Result<IoMode> ParseIoMode(const std::string& name) {
  if (name == "auto") return IoMode::kAuto;
  if (name == "uring" || name == "io_uring") return IoMode::kUring;
  if (name == "pread") return IoMode::kPread;
  return Status::InvalidArgument("unknown io mode '" + name + "' (expected auto, uring or pread)");
}

const char* IoModeName(IoMode mode) {
  switch (mode) {
    case IoMode::kAuto: return "auto";
    case IoMode::kUring: return "uring";
    case IoMode::kPread: return "pread";
  }
  return "?";
}

UringSupportInfo UringSupport() { return g_uring_support->Get(); }

Result<std::unique_ptr<IoBackend>> MakeBackend(IoMode mode, unsigned queue_depth, bool direct) {
  switch (mode) {
    case IoMode::kPread:
      return MakePreadBackend();
    case IoMode::kUring: {
      const UringSupportInfo info = UringSupport();
      if (!info.available) {
        std::string why = "io=\"uring\" was requested but io_uring cannot be used here";
        if (info.error == EPERM) why += " (blocked by seccomp or kernel.io_uring_disabled)";
        if (info.error == ENOSYS) why += " (kernel without io_uring)";
        return Status::Unavailable(why, info.error);
      }
      return MakeUringBackend(queue_depth, /*nowait_first=*/false);
    }
    case IoMode::kAuto: {
      if (!UringSupport().available) return MakePreadBackend();
      return MakeUringBackend(queue_depth, /*nowait_first=*/!direct);
    }
  }
  return Status::Internal("bad io mode");
}

}  // namespace lsio
