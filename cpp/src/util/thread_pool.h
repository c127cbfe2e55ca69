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
// Exceptions: an exception from body() on the caller propagates only after every helper
// copy that started has returned (a guard joins them while the stack unwinds, so helpers
// never use a dead frame); the first exception from a helper copy is rethrown on the caller
// after that join. A task given to Submit that throws is dropped: pool threads never let an
// exception end the process. Thread creation can fail (EAGAIN when no stack can be mapped):
// EnsureThreads then returns how many threads the pool has, and callers work with those.
//
// Thread-safety: Submit and RunOnWorkers may be called from many threads at once; several
// calls share the pool. The calling thread always works, so a busy pool delays a call but
// never deadlocks it.
//
// Placement: a helper copy that starts on the CPU the caller was on when it woke the
// helpers moves off that CPU for its copy of the call (LeaveCallerCpu).
#pragma once

#include <sched.h>

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

  /// Grows the pool to at least n threads (never shrinks) and returns the number of threads
  /// it has, which is below n when a thread could not be created (std::system_error, or
  /// std::bad_alloc for its state). Never throws.
  int EnsureThreads(int n);
  int size();
  /// Queues a task for a pool thread. Throws std::bad_alloc if the queue cannot grow. The
  /// task should not throw; if it does, the exception is dropped.
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
/// extra is 0). Returns, or rethrows the caller's or else the first helper's exception,
/// after all copies that started have finished. Helpers that cannot be queued (bad_alloc)
/// are simply not started.
void RunOnWorkers(ThreadPool* pool, int extra, const std::function<void()>& body);

/// Keeps the current thread off `caller_cpu` while the object lives, if it is running
/// there. Linux may wake a pool thread onto the waker's CPU instead of an idle one: in KVM
/// guests an idle vCPU the host has descheduled looks preempted (vcpu_is_preempted), and
/// wakeups avoid it. Caller and helper then share one CPU in time slices until load
/// balancing separates them, several milliseconds later: on the 2-core dev VM, read_crops
/// calls made after a 30 ms pause ran at 1-thread speed (perf sched showed the helper
/// migrated onto the caller's CPU). The thread narrows its affinity to its own mask minus
/// that CPU, which migrates it before sched_setaffinity returns, for one helper copy of a
/// call; the destructor gives the mask back unless someone changed it meanwhile (then
/// theirs stays). Moving once and restoring the mask at once measured no better (W8 suite:
/// 2,114-2,266 crops/s, against 2,096-2,348 for holding it). Nothing happens
/// when the thread is elsewhere, may run on one CPU only, or the kernel refuses the mask
/// (cpusets, sandboxes). On Linux 6.2+ any sched_setaffinity marks the mask as requested by
/// the thread, so a pool thread that moved keeps its own earlier mask as a ceiling if a
/// cpuset later grows.
class LeaveCallerCpu {
 public:
  explicit LeaveCallerCpu(int caller_cpu);
  ~LeaveCallerCpu();
  LeaveCallerCpu(const LeaveCallerCpu&) = delete;
  LeaveCallerCpu& operator=(const LeaveCallerCpu&) = delete;
  bool moved() const { return moved_; }

 private:
  cpu_set_t own_{};
  cpu_set_t away_{};
  bool moved_ = false;
};

/// Number of CPUs this process may run on (sched_getaffinity), at least 1.
int AvailableCpus();

}  // namespace lsio
