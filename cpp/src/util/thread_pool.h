// ThreadPool and RunOnWorkers: the engine's only source of background threads.
//
// Usage:
//   1. Keep the pool in a ProcessLocal slot (read/executor.cc does), so a forked child builds
//      its own and never joins the parent's threads.
//   2. RunOnWorkers(pool, extra, body): runs `body` on the calling thread and on up to
//      `extra` pool threads at once, and returns when every started copy has returned. The
//      body is expected to pull work from a shared atomic counter, so copies that start late
//      (pool busy with another call) simply find nothing left to do.
//
// Thread-safety: Submit and RunOnWorkers may be called from many threads at once; several
// calls share the pool. The calling thread always works, so a busy pool delays a call but
// never deadlocks it.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace lsio {

class ThreadPool {
 public:
  ThreadPool() = default;
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  /// Grows the pool to at least n threads (never shrinks).
  void EnsureThreads(int n);
  int size();
  void Submit(std::function<void()> task);

  /// Called on the inherited pool in a forked child: its threads do not exist there, so it
  /// must never be joined or locked again. Nothing to do; the object is leaked.
  void OnForkAbandon() {}

 private:
  void WorkerLoop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  std::vector<std::thread> threads_;
  bool stop_ = false;
};

/// Runs body() on the caller and on up to `extra` threads of `pool` (pool may be null when
/// extra is 0). Returns after all copies that started have finished.
void RunOnWorkers(ThreadPool* pool, int extra, const std::function<void()>& body);

/// Number of CPUs this process may run on (sched_getaffinity), at least 1.
int AvailableCpus();

}  // namespace lsio
