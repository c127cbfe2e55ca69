// ProcessLocal<T>: the one kind of place where lsio keeps state that fork() can break.
//
// A forked child has only the forking thread but inherits every mutex (possibly held by a
// thread that no longer exists), io_uring ring mappings and thread pools whose threads are
// gone. lsio therefore keeps all such state (rings, file descriptors, caches, pools, their
// locks) in ProcessLocal slots and never in plain globals or function-local statics.
//
// Usage:
//   1. Declare a slot, owned by whatever owns the state:
//        ProcessLocal<FdCache> cache_{[] { return new FdCache(256); }};
//   2. Reach the state only through Get():  cache_.Get().Open(path);
//   3. In a forked child, the first Get() sees a newer fork generation, builds a fresh T
//      with the factory and installs it by compare-and-swap. The inherited T is never
//      locked, joined or destroyed: if T has `void OnForkAbandon()`, that is called once
//      (it may close file descriptors, nothing that locks), then the object is leaked.
//
// Thread-safety: Get() is safe from any number of threads. The check is one relaxed atomic
// load of the fork generation plus one acquire load of the slot, so it is cheap enough for
// every call. A pthread_atfork child handler, installed once, only increments the
// generation (async-signal-safe).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <type_traits>
#include <utility>

namespace lsio {

/// Number of fork()s this process descends from (0 in the original process).
uint64_t ForkGeneration();

/// Installs the pthread_atfork child handler; idempotent and thread-safe.
void InstallForkHandler();

template <typename T>
class ProcessLocal {
 public:
  explicit ProcessLocal(std::function<T*()> factory) : factory_(std::move(factory)) {
    InstallForkHandler();
  }
  ProcessLocal(const ProcessLocal&) = delete;
  ProcessLocal& operator=(const ProcessLocal&) = delete;

  ~ProcessLocal() {
    Slot* s = slot_.load(std::memory_order_acquire);
    // A slot from an earlier generation may hold dead threads or held locks: leak it.
    if (s != nullptr && s->gen == ForkGeneration()) {
      delete s->value;
      delete s;
    }
  }

  /// The state of the current process, built on first use.
  T& Get() {
    const uint64_t gen = ForkGeneration();
    Slot* s = slot_.load(std::memory_order_acquire);
    if (s != nullptr && s->gen == gen) return *s->value;
    return Rebuild(s, gen);
  }

  /// The state if it already exists in this process, else nullptr (never builds).
  T* Peek() {
    Slot* s = slot_.load(std::memory_order_acquire);
    return (s != nullptr && s->gen == ForkGeneration()) ? s->value : nullptr;
  }

 private:
  struct Slot {
    uint64_t gen;
    T* value;
  };

  template <typename U, typename = void>
  struct HasAbandon : std::false_type {};
  template <typename U>
  struct HasAbandon<U, std::void_t<decltype(std::declval<U&>().OnForkAbandon())>>
      : std::true_type {};

  T& Rebuild(Slot* expected, uint64_t gen) {
    Slot* fresh = new Slot{gen, factory_()};
    if (slot_.compare_exchange_strong(expected, fresh, std::memory_order_acq_rel)) {
      if (expected != nullptr) {
        if constexpr (HasAbandon<T>::value) expected->value->OnForkAbandon();
        // Leaked on purpose (see header).
      }
      return *fresh->value;
    }
    // Another thread installed a slot first; ours was never visible.
    delete fresh->value;
    delete fresh;
    return Get();
  }

  std::function<T*()> factory_;
  std::atomic<Slot*> slot_{nullptr};
};

}  // namespace lsio
