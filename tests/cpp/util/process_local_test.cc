// ProcessLocal<T> and the fork generation (architecture.md §3): a forked child sees a fresh
// T built by the factory, the inherited T gets OnForkAbandon() once and is leaked (never
// destroyed or locked), and the parent's T is untouched.
#include "util/process_local.h"

#include <atomic>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "test_util.h"

namespace lsio {
namespace {

using lsio_test::RunInChild;

struct Counted {
  static std::atomic<int> constructed;
  static std::atomic<int> destroyed;
  int value = 0;
  int abandoned = 0;
  std::mutex mu;  // stands in for state a dead parent thread may hold
  Counted() { constructed.fetch_add(1); }
  ~Counted() { destroyed.fetch_add(1); }
  void OnForkAbandon() { ++abandoned; }
};
std::atomic<int> Counted::constructed{0};
std::atomic<int> Counted::destroyed{0};

struct NoAbandonHook {
  int value = 0;
};

TEST(ProcessLocalTest, PeekIsNullBeforeFirstGet) {
  ProcessLocal<NoAbandonHook> slot([] { return new NoAbandonHook(); });
  EXPECT_EQ(slot.Peek(), nullptr);
  NoAbandonHook& v = slot.Get();
  EXPECT_EQ(slot.Peek(), &v);
}

TEST(ProcessLocalTest, GetBuildsOnceAndReturnsTheSameObject) {
  int calls = 0;
  ProcessLocal<NoAbandonHook> slot([&calls] {
    ++calls;
    return new NoAbandonHook();
  });
  NoAbandonHook* a = &slot.Get();
  a->value = 7;
  NoAbandonHook* b = &slot.Get();
  EXPECT_EQ(a, b);
  EXPECT_EQ(b->value, 7);
  EXPECT_EQ(calls, 1);
}

TEST(ProcessLocalTest, ConcurrentFirstGetInstallsExactlyOneObject) {
  for (int round = 0; round < 20; ++round) {
    std::atomic<int> built{0};
    ProcessLocal<NoAbandonHook> slot([&built] {
      built.fetch_add(1);
      return new NoAbandonHook();
    });
    std::atomic<bool> go{false};
    std::vector<NoAbandonHook*> seen(8, nullptr);
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t) {
      threads.emplace_back([&, t] {
        while (!go.load()) {
        }
        seen[static_cast<size_t>(t)] = &slot.Get();
      });
    }
    go.store(true);
    for (auto& th : threads) th.join();
    std::set<NoAbandonHook*> distinct(seen.begin(), seen.end());
    EXPECT_EQ(distinct.size(), 1u) << "round " << round;
    EXPECT_GE(built.load(), 1);  // losers of the race build and delete theirs
    EXPECT_EQ(slot.Peek(), seen[0]);
  }
}

TEST(ProcessLocalTest, DestructorDeletesTheCurrentGenerationsObject) {
  const int before = Counted::destroyed.load();
  {
    ProcessLocal<Counted> slot([] { return new Counted(); });
    slot.Get().value = 1;
  }
  EXPECT_EQ(Counted::destroyed.load(), before + 1);
}

TEST(ProcessLocalTest, ForkGenerationIsZeroInTheOriginalProcessAndCountsForks) {
  InstallForkHandler();
  const uint64_t parent_gen = ForkGeneration();
  const int rc = RunInChild([parent_gen] {
    if (ForkGeneration() != parent_gen + 1) return 1;
    // A grandchild descends from two forks.
    const int grc = RunInChild([parent_gen] { return ForkGeneration() == parent_gen + 2 ? 0 : 1; });
    return grc == 0 ? 0 : 2;
  });
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(ForkGeneration(), parent_gen) << "fork must not change the parent's generation";
}

TEST(ProcessLocalTest, ForkedChildSeesFreshObjectAndAbandonsTheInheritedOne) {
  int factory_calls = 0;
  ProcessLocal<Counted> slot([&factory_calls] {
    ++factory_calls;
    return new Counted();
  });
  Counted& parent_obj = slot.Get();
  parent_obj.value = 42;
  parent_obj.mu.lock();  // held across fork, as by a parent thread that does not exist in the child
  Counted* const inherited = &parent_obj;
  const int destroyed_before = Counted::destroyed.load();

  const int rc = RunInChild([&] {
    if (slot.Peek() != nullptr) return 1;             // stale slot is not this process's
    Counted& fresh = slot.Get();
    if (&fresh == inherited) return 2;                // a new object, not the parent's
    if (fresh.value != 0) return 3;                   // built by the factory
    if (inherited->abandoned != 1) return 4;          // OnForkAbandon called once
    if (inherited->value != 42) return 5;             // leaked, not destroyed
    if (Counted::destroyed.load() != destroyed_before) return 6;
    if (!fresh.mu.try_lock()) return 7;               // no inherited lock is taken
    fresh.mu.unlock();
    if (&slot.Get() != &fresh) return 8;              // stable afterwards
    if (inherited->abandoned != 1) return 9;          // only once
    if (factory_calls != 2) return 10;
    return 0;
  });
  EXPECT_EQ(rc, 0) << "child check failed (see the numbered returns)";

  // The parent's object is untouched by the child.
  EXPECT_EQ(&slot.Get(), inherited);
  EXPECT_EQ(inherited->value, 42);
  EXPECT_EQ(inherited->abandoned, 0);
  EXPECT_EQ(factory_calls, 1);
  parent_obj.mu.unlock();
}

TEST(ProcessLocalTest, ChildThatNeverCalledGetInParentBuildsOnFirstUse) {
  int factory_calls = 0;
  ProcessLocal<Counted> slot([&factory_calls] {
    ++factory_calls;
    return new Counted();
  });
  const int rc = RunInChild([&] {
    Counted& c = slot.Get();
    if (factory_calls != 1) return 1;
    if (c.abandoned != 0) return 2;
    return 0;
  });
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(slot.Peek(), nullptr) << "the child's Get must not build in the parent";
}

TEST(ProcessLocalTest, TypeWithoutAbandonHookIsRebuiltAcrossFork) {
  ProcessLocal<NoAbandonHook> slot([] { return new NoAbandonHook(); });
  slot.Get().value = 5;
  const int rc = RunInChild([&] { return slot.Get().value == 0 ? 0 : 1; });
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(slot.Get().value, 5);
}

TEST(ProcessLocalTest, GrandchildRebuildsAgain) {
  ProcessLocal<Counted> slot([] { return new Counted(); });
  slot.Get().value = 1;
  const int rc = RunInChild([&] {
    Counted* child_obj = &slot.Get();
    child_obj->value = 2;
    const int grc = RunInChild([&] {
      Counted& g = slot.Get();
      if (&g == child_obj || g.value != 0) return 1;
      return child_obj->abandoned == 1 ? 0 : 2;
    });
    if (grc != 0) return 10 + grc;
    return slot.Get().value == 2 ? 0 : 3;
  });
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(slot.Get().value, 1);
}

}  // namespace
}  // namespace lsio
