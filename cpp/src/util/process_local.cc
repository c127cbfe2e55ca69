// Fork generation counter and its pthread_atfork child handler.
#include "util/process_local.h"

#include <pthread.h>

namespace lsio {
namespace {

// Plain namespace-scope atomics with constant initialisation: no static-init-order issues.
std::atomic<uint64_t> g_fork_generation{0};
std::atomic<bool> g_handler_installed{false};

void OnForkChild() { g_fork_generation.fetch_add(1, std::memory_order_relaxed); }

}  // namespace

uint64_t ForkGeneration() { return g_fork_generation.load(std::memory_order_relaxed); }

void InstallForkHandler() {
  bool expected = false;
  if (g_handler_installed.compare_exchange_strong(expected, true)) {
    pthread_atfork(nullptr, nullptr, &OnForkChild);
  }
}

}  // namespace lsio
