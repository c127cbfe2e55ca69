// Thread pool used by the executor. Late-starting helper copies must not touch a finished
// call's state, so each call shares a small ref-counted block with its helpers.
#include "util/thread_pool.h"

#include <cxxabi.h>
#include <sched.h>

#include <exception>
#include <memory>
#include <new>
#include <system_error>

namespace lsio {

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

int ThreadPool::EnsureThreads(int n) {
  std::lock_guard<std::mutex> lock(mu_);
  while (static_cast<int>(threads_.size()) < n) {
    // emplace_back leaves the vector as it was when either the vector or the thread throws.
    try {
      threads_.emplace_back([this] { WorkerLoop(); });
    } catch (const std::system_error&) {  // pthread_create: EAGAIN (no room for a stack)
      break;
    } catch (const std::bad_alloc&) {
      break;
    }
  }
  return static_cast<int>(threads_.size());
}

int ThreadPool::size() {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(threads_.size());
}

void ThreadPool::Submit(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    tasks_.push_back(std::move(task));
  }
  cv_.notify_one();
}

void ThreadPool::WorkerLoop() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stop_ || !tasks_.empty(); });
      if (tasks_.empty()) return;  // stop_ and drained
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    // An exception leaving a thread's function terminates the process. RunOnWorkers' tasks
    // catch their own; anything else is dropped here. A forced unwind (pthread_exit,
    // pthread_cancel) must go on, or the C++ runtime aborts.
    try {
      task();
    } catch (abi::__forced_unwind&) {
      throw;
    } catch (...) {
    }
  }
}

namespace {
struct CallState {
  std::mutex mu;
  std::condition_variable cv;
  int active = 0;
  bool closed = false;
  const std::function<void()>* body = nullptr;
  std::exception_ptr error;  // first exception of a helper copy
  int caller_cpu = -1;       // where the caller was when it woke the helpers
};

// Closes the call and waits for the helper copies that started, on return and on unwind
// alike: body and everything it captures live in the caller's frame.
class JoinHelpers {
 public:
  explicit JoinHelpers(CallState* s) : s_(s) {}
  ~JoinHelpers() {
    std::unique_lock<std::mutex> lock(s_->mu);
    s_->closed = true;
    s_->cv.wait(lock, [&] { return s_->active == 0; });
  }
  JoinHelpers(const JoinHelpers&) = delete;
  JoinHelpers& operator=(const JoinHelpers&) = delete;

 private:
  CallState* s_;
};

// One helper copy, run by a pool thread.
void RunHelper(CallState& s) {
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.closed) return;  // the call already finished: body may be gone
    ++s.active;
  }
  // Decrements `active` however the body ends, forced unwinds included, so the caller's
  // join never waits forever.
  struct Leave {
    CallState& s;
    ~Leave() {
      {
        std::lock_guard<std::mutex> lock(s.mu);
        --s.active;
      }
      s.cv.notify_all();
    }
  } leave{s};
  const LeaveCallerCpu apart(s.caller_cpu);
  try {
    (*s.body)();
  } catch (abi::__forced_unwind&) {
    throw;
  } catch (...) {
    std::lock_guard<std::mutex> lock(s.mu);
    if (!s.error) s.error = std::current_exception();
  }
}
}  // namespace

void RunOnWorkers(ThreadPool* pool, int extra, const std::function<void()>& body) {
  if (pool == nullptr || extra <= 0) {
    body();
    return;
  }
  std::shared_ptr<CallState> state;
  try {
    state = std::make_shared<CallState>();
  } catch (const std::bad_alloc&) {
    body();  // no helpers, the caller alone
    return;
  }
  state->body = &body;
  state->caller_cpu = sched_getcpu();
  {
    JoinHelpers join(state.get());
    for (int i = 0; i < extra; ++i) {
      try {
        pool->Submit([state] { RunHelper(*state); });
      } catch (const std::bad_alloc&) {
        break;  // fewer helpers; the caller still works
      }
    }
    body();
  }
  // Every helper has finished: rethrow the first failure of one (after the join, so no
  // helper is left running with the caller's state).
  if (state->error) std::rethrow_exception(state->error);
}

LeaveCallerCpu::LeaveCallerCpu(int caller_cpu) {
  if (caller_cpu < 0 || caller_cpu >= CPU_SETSIZE || sched_getcpu() != caller_cpu) return;
  if (sched_getaffinity(0, sizeof(own_), &own_) != 0) return;
  if (CPU_COUNT(&own_) < 2 || !CPU_ISSET(caller_cpu, &own_)) return;
  away_ = own_;
  CPU_CLR(caller_cpu, &away_);
  moved_ = sched_setaffinity(0, sizeof(away_), &away_) == 0;
}

LeaveCallerCpu::~LeaveCallerCpu() {
  if (!moved_) return;
  cpu_set_t now;
  if (sched_getaffinity(0, sizeof(now), &now) != 0 || !CPU_EQUAL(&now, &away_)) return;  // changed by someone else
  // A second try if the kernel could not allocate for the first: never left narrowed.
  if (sched_setaffinity(0, sizeof(own_), &own_) != 0) sched_setaffinity(0, sizeof(own_), &own_);
}

int AvailableCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  unsigned hc = std::thread::hardware_concurrency();
  return hc > 0 ? static_cast<int>(hc) : 1;
}

}  // namespace lsio
