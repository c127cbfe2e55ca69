// ThreadPool and RunOnWorkers: every work item is done exactly once, the caller always works,
// a busy pool delays but never deadlocks a call, and helpers that start after the call has
// returned do nothing (the body they would run may be gone), and exceptions from the body
// (on the caller or on a helper) reach the caller only after every copy has finished.
// LeaveCallerCpu keeps a thread off the caller's CPU while it lives, then restores its mask
// unless someone else changed it.
#include "util/thread_pool.h"

#include <sched.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace lsio {
namespace {

// A one-shot gate a pool task can wait on.
class Gate {
 public:
  void Open() {
    std::lock_guard<std::mutex> l(mu_);
    open_ = true;
    cv_.notify_all();
  }
  void Wait() {
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait(l, [this] { return open_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

TEST(ThreadPoolTest, NullPoolRunsTheBodyOnceOnTheCaller) {
  int calls = 0;
  const auto caller = std::this_thread::get_id();
  bool on_caller = false;
  RunOnWorkers(nullptr, 3, [&] {
    ++calls;
    on_caller = std::this_thread::get_id() == caller;
  });
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(on_caller);

  ThreadPool pool;
  calls = 0;
  RunOnWorkers(&pool, 0, [&] { ++calls; });
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(pool.size(), 0) << "extra == 0 must not create threads";
}

TEST(ThreadPoolTest, EnsureThreadsGrowsAndNeverShrinks) {
  ThreadPool pool;
  EXPECT_EQ(pool.size(), 0);
  pool.EnsureThreads(3);
  EXPECT_EQ(pool.size(), 3);
  pool.EnsureThreads(1);
  EXPECT_EQ(pool.size(), 3);
  pool.EnsureThreads(5);
  EXPECT_EQ(pool.size(), 5);
}

TEST(ThreadPoolTest, AllWorkIsDoneExactlyOnce) {
  ThreadPool pool;
  pool.EnsureThreads(4);
  constexpr size_t kItems = 20000;
  std::vector<std::atomic<int>> done(kItems);
  std::atomic<size_t> next{0};
  std::mutex mu;
  std::set<std::thread::id> workers;
  RunOnWorkers(&pool, 4, [&] {
    {
      std::lock_guard<std::mutex> l(mu);
      workers.insert(std::this_thread::get_id());
    }
    for (;;) {
      const size_t i = next.fetch_add(1);
      if (i >= kItems) return;
      done[i].fetch_add(1);
    }
  });
  for (size_t i = 0; i < kItems; ++i) ASSERT_EQ(done[i].load(), 1) << "item " << i;
  EXPECT_TRUE(workers.count(std::this_thread::get_id())) << "the calling thread always works";
  EXPECT_LE(workers.size(), 5u);
}

TEST(ThreadPoolTest, ReturnsOnlyAfterStartedHelpersFinish) {
  ThreadPool pool;
  pool.EnsureThreads(2);
  std::atomic<int> running{0};
  std::atomic<int> finished{0};
  std::atomic<int> started{0};
  RunOnWorkers(&pool, 2, [&] {
    started.fetch_add(1);
    running.fetch_add(1);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    running.fetch_sub(1);
    finished.fetch_add(1);
  });
  EXPECT_EQ(running.load(), 0) << "a helper was still running after RunOnWorkers returned";
  EXPECT_EQ(finished.load(), started.load());
}

TEST(ThreadPoolTest, BusyPoolDoesNotDeadlockAndLateHelpersDoNothing) {
  ThreadPool pool;
  pool.EnsureThreads(1);
  Gate gate;
  std::promise<void> blocker_running;
  pool.Submit([&] {
    blocker_running.set_value();
    gate.Wait();
  });
  blocker_running.get_future().wait();  // the only pool thread is now busy

  int body_calls = 0;
  {
    // The body and its captures die when this scope ends, before the helper can start.
    std::vector<int> work(100, 0);
    RunOnWorkers(&pool, 1, [&] {
      ++body_calls;
      for (int& w : work) ++w;
    });
    EXPECT_EQ(body_calls, 1);
    for (int w : work) EXPECT_EQ(w, 1);
  }

  // Now let the queued (late) helper run; it must see the call closed and return.
  gate.Open();
  std::promise<void> drained;
  pool.Submit([&] { drained.set_value(); });
  ASSERT_EQ(drained.get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_EQ(body_calls, 1) << "a late helper ran the body of a finished call";
}

TEST(ThreadPoolTest, ConcurrentCallsShareOnePool) {
  ThreadPool pool;
  pool.EnsureThreads(3);
  constexpr int kCallers = 4;
  constexpr int kItems = 5000;
  std::vector<int> totals(kCallers, 0);
  std::vector<std::thread> callers;
  for (int c = 0; c < kCallers; ++c) {
    callers.emplace_back([&, c] {
      for (int rep = 0; rep < 5; ++rep) {
        std::atomic<int> next{0};
        std::atomic<int> sum{0};
        RunOnWorkers(&pool, 3, [&] {
          for (;;) {
            const int i = next.fetch_add(1);
            if (i >= kItems) return;
            sum.fetch_add(1);
          }
        });
        totals[static_cast<size_t>(c)] += sum.load();
      }
    });
  }
  for (auto& t : callers) t.join();
  for (int c = 0; c < kCallers; ++c) EXPECT_EQ(totals[static_cast<size_t>(c)], 5 * kItems);
}

TEST(ThreadPoolTest, DestructorRunsQueuedTasksAndJoins) {
  std::atomic<int> ran{0};
  {
    ThreadPool pool;
    pool.EnsureThreads(2);
    for (int i = 0; i < 200; ++i) pool.Submit([&] { ran.fetch_add(1); });
  }
  EXPECT_EQ(ran.load(), 200);
}

struct BodyError {
  int from;
};

TEST(ThreadPoolTest, BodyThrowingOnTheCallerWaitsForHelpersBeforeUnwinding) {
  // The caller's copy throws at once while the helpers still work on state that lives in
  // the caller's frame: RunOnWorkers must not unwind (freeing that state) before they end.
  ThreadPool pool;
  pool.EnsureThreads(2);
  std::atomic<int> running{0};
  bool caught = false;
  const auto caller = std::this_thread::get_id();
  try {
    std::vector<int> on_stack(1000, 1);
    std::atomic<int> helpers_started{0};
    RunOnWorkers(&pool, 2, [&] {
      if (std::this_thread::get_id() == caller) {
        // Give the helpers time to start, then fail.
        for (int i = 0; i < 200 && helpers_started.load() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        throw BodyError{0};
      }
      helpers_started.fetch_add(1);
      running.fetch_add(1);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      long sum = 0;
      for (int v : on_stack) sum += v;  // the caller's frame must still exist
      EXPECT_EQ(sum, 1000);
      running.fetch_sub(1);
    });
  } catch (const BodyError& e) {
    caught = true;
    EXPECT_EQ(e.from, 0);
    EXPECT_EQ(running.load(), 0) << "RunOnWorkers unwound while a helper was still running";
  }
  EXPECT_TRUE(caught);
}

TEST(ThreadPoolTest, BodyThrowingOnAHelperIsRethrownOnTheCaller) {
  // A helper's exception must not terminate the process: it is rethrown on the caller
  // after every copy has finished, and the pool keeps working.
  ThreadPool pool;
  pool.EnsureThreads(2);
  const auto caller = std::this_thread::get_id();
  for (int rep = 0; rep < 20; ++rep) {
    std::atomic<int> helper_ran{0};
    bool caught = false;
    try {
      RunOnWorkers(&pool, 2, [&] {
        if (std::this_thread::get_id() == caller) {
          // Wait for a helper so that one surely throws.
          for (int i = 0; i < 2000 && helper_ran.load() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
          return;
        }
        helper_ran.fetch_add(1);
        throw std::bad_alloc();
      });
    } catch (const std::bad_alloc&) {
      caught = true;
    }
    EXPECT_TRUE(caught) << "rep " << rep;
  }
  std::atomic<int> calls{0};
  RunOnWorkers(&pool, 2, [&] { calls.fetch_add(1); });
  EXPECT_GE(calls.load(), 1);
}

TEST(ThreadPoolTest, ThrowingSubmittedTaskDoesNotKillThePoolThread) {
  ThreadPool pool;
  pool.EnsureThreads(1);
  pool.Submit([] { throw BodyError{1}; });
  std::promise<void> ran;
  pool.Submit([&] { ran.set_value(); });
  ASSERT_EQ(ran.get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_EQ(pool.size(), 1);
}

TEST(ThreadPoolTest, EnsureThreadsReturnsHowManyThreadsExist) {
  ThreadPool pool;
  EXPECT_EQ(pool.EnsureThreads(2), 2);
  EXPECT_EQ(pool.EnsureThreads(1), 2);
}

TEST(ThreadPoolTest, AvailableCpusMatchesAffinity) {
  const int n = AvailableCpus();
  EXPECT_GE(n, 1);
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  EXPECT_EQ(n, CPU_COUNT(&set));
}

cpu_set_t CurrentMask() {
  cpu_set_t set;
  CPU_ZERO(&set);
  EXPECT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  return set;
}

// Runs fn on a fresh thread, so that affinity changes never reach the test's own thread.
template <typename F>
void OnOwnThread(F fn) {
  std::thread t(fn);
  t.join();
}

// Whether this sandbox lets a thread set its own affinity (seccomp profiles may refuse).
bool CanSetOwnAffinity() {
  bool ok = false;
  OnOwnThread([&] {
    const cpu_set_t mine = CurrentMask();
    ok = sched_getcpu() >= 0 && sched_setaffinity(0, sizeof(mine), &mine) == 0;
  });
  return ok;
}

// Calls during(cpu) while a LeaveCallerCpu for the CPU this thread runs on has moved it off
// that CPU. The thread may migrate between reading its CPU and the constructor's own check,
// so it retries; false if it never found itself where it had just looked.
template <typename F>
bool WhileMovedOffItsCpu(F during) {
  for (int attempt = 0; attempt < 200; ++attempt) {
    const int cpu = sched_getcpu();
    LeaveCallerCpu apart(cpu);
    if (!apart.moved()) continue;
    during(cpu);
    return true;
  }
  return false;
}

TEST(LeaveCallerCpuTest, MovesOffTheCallersCpuWhileItLivesThenRestoresTheMask) {
  if (AvailableCpus() < 2) GTEST_SKIP() << "needs two CPUs to move between; this process may use one";
  if (!CanSetOwnAffinity()) GTEST_SKIP() << "sched_setaffinity or sched_getcpu refused here";
  OnOwnThread([] {
    const cpu_set_t before = CurrentMask();
    const bool seen = WhileMovedOffItsCpu([&](int cpu) {
      cpu_set_t want = before;
      CPU_CLR(cpu, &want);
      const cpu_set_t during = CurrentMask();
      EXPECT_TRUE(CPU_EQUAL(&during, &want));
      EXPECT_NE(sched_getcpu(), cpu);  // sched_setaffinity moved it before returning
    });
    EXPECT_TRUE(seen) << "never found itself on the CPU it had just read";
    const cpu_set_t after = CurrentMask();
    EXPECT_TRUE(CPU_EQUAL(&after, &before));
  });
}

TEST(LeaveCallerCpuTest, AMaskSetByOthersDuringTheCallIsKept) {
  if (AvailableCpus() < 2) GTEST_SKIP() << "needs two CPUs to move between; this process may use one";
  if (!CanSetOwnAffinity()) GTEST_SKIP() << "sched_setaffinity or sched_getcpu refused here";
  OnOwnThread([] {
    const cpu_set_t before = CurrentMask();
    cpu_set_t theirs;
    const bool seen = WhileMovedOffItsCpu([&](int cpu) {
      // Someone (taskset, a cpuset update) pins the thread to the caller's CPU meanwhile.
      CPU_ZERO(&theirs);
      CPU_SET(cpu, &theirs);
      ASSERT_EQ(sched_setaffinity(0, sizeof(theirs), &theirs), 0);
    });
    ASSERT_TRUE(seen) << "never found itself on the CPU it had just read";
    const cpu_set_t after = CurrentMask();
    EXPECT_TRUE(CPU_EQUAL(&after, &theirs)) << "the destructor must not overwrite a mask it did not set";
    ASSERT_EQ(sched_setaffinity(0, sizeof(before), &before), 0);
  });
}

TEST(LeaveCallerCpuTest, DoesNothingElsewhereOrWhenPinnedToOneCpu) {
  if (!CanSetOwnAffinity()) GTEST_SKIP() << "sched_setaffinity or sched_getcpu refused here";
  OnOwnThread([] {
    const cpu_set_t before = CurrentMask();
    {
      LeaveCallerCpu none(-1);
      EXPECT_FALSE(none.moved());
      LeaveCallerCpu beyond(CPU_SETSIZE);
      EXPECT_FALSE(beyond.moved());
    }
    const cpu_set_t unchanged = CurrentMask();
    EXPECT_TRUE(CPU_EQUAL(&unchanged, &before));
    // Pinned to one CPU (a DataLoader worker under taskset): it stays.
    const int cpu = sched_getcpu();
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
    {
      LeaveCallerCpu pinned(cpu);
      EXPECT_FALSE(pinned.moved());
      EXPECT_EQ(sched_getcpu(), cpu);
    }
    const cpu_set_t still = CurrentMask();
    EXPECT_TRUE(CPU_EQUAL(&still, &one));
  });
}

TEST(ThreadPoolTest, HelpersKeepTheirAffinityAcrossCalls) {
  // Each call waits (bounded) until its helper copy has started, so every helper copy runs
  // its placement check; whether it starts on the caller's CPU is the scheduler's choice,
  // and either way the pool thread ends with its own mask.
  ThreadPool pool;
  ASSERT_EQ(pool.EnsureThreads(1), 1);
  std::promise<cpu_set_t> first;
  pool.Submit([&] { first.set_value(CurrentMask()); });
  const cpu_set_t want = first.get_future().get();
  for (int call = 0; call < 50; ++call) {
    std::atomic<int> entered{0};
    RunOnWorkers(&pool, 1, [&] {
      entered.fetch_add(1);
      const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
      while (entered.load() < 2 && std::chrono::steady_clock::now() < until) std::this_thread::yield();
    });
  }
  std::promise<cpu_set_t> last;
  pool.Submit([&] { last.set_value(CurrentMask()); });
  const cpu_set_t got = last.get_future().get();
  EXPECT_TRUE(CPU_EQUAL(&got, &want));
}

}  // namespace
}  // namespace lsio
