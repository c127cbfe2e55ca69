// Thread pool used by the executor. Late-starting helper copies must not touch a finished
// call's state, so each call shares a small ref-counted block with its helpers.
#include "util/thread_pool.h"

#include <sched.h>

#include <memory>

namespace lsio {

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void ThreadPool::EnsureThreads(int n) {
  std::lock_guard<std::mutex> lock(mu_);
  while (static_cast<int>(threads_.size()) < n) {
    threads_.emplace_back([this] { WorkerLoop(); });
  }
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
    task();
  }
}

namespace {
struct CallState {
  std::mutex mu;
  std::condition_variable cv;
  int active = 0;
  bool closed = false;
  const std::function<void()>* body = nullptr;
};
}  // namespace

void RunOnWorkers(ThreadPool* pool, int extra, const std::function<void()>& body) {
  if (pool == nullptr || extra <= 0) {
    body();
    return;
  }
  auto state = std::make_shared<CallState>();
  state->body = &body;
  for (int i = 0; i < extra; ++i) {
    pool->Submit([state] {
      {
        std::lock_guard<std::mutex> lock(state->mu);
        if (state->closed) return;  // the call already finished: body may be gone
        ++state->active;
      }
      (*state->body)();
      {
        std::lock_guard<std::mutex> lock(state->mu);
        --state->active;
      }
      state->cv.notify_all();
    });
  }
  body();
  std::unique_lock<std::mutex> lock(state->mu);
  state->closed = true;
  state->cv.wait(lock, [&] { return state->active == 0; });
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
