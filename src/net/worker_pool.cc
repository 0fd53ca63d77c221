// WorkerPool (worker_pool.h).
#include "net/worker_pool.h"

#include <algorithm>
#include <chrono>
#include <system_error>
#include <utility>

#include "base/allocator.h"
#include "base/thread_priority.h"

namespace tessera {
namespace {

thread_local double queued_at = 0;  // the running task's enqueue time (steady seconds)

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

WorkerPool::WorkerPool(size_t max_threads, int nice)
    : max_threads_(std::max<size_t>(1, max_threads)), nice_(nice) {}

double WorkerPool::QueuedAt() { return queued_at; }

void WorkerPool::enqueue(std::function<void()> fn) {
  Task t{std::move(fn), Now()};
  std::lock_guard<std::mutex> lock(mu_);
  if (!idle_.empty()) {  // the worker idle the shortest time: its stack and caches are warm
    Worker* w = idle_.back();
    idle_.pop_back();
    w->task = std::move(t);
    w->cv.notify_one();
    return;
  }
  if (workers_.size() < max_threads_ && !shutdown_) {
    auto w = std::make_unique<Worker>();
    try {
      w->thread = std::thread([this, w = w.get(), first = t]() mutable { Run(w, std::move(first)); });
      workers_.push_back(std::move(w));
      return;
    } catch (const std::system_error&) {
      // No thread to be had (a process or memory limit): the task waits for a running worker.
    }
  }
  queue_.push_back(std::move(t));
}

void WorkerPool::Run(Worker* self, Task task) {
  if (nice_ > 0) LowerThreadPriority(nice_);
  for (;;) {
    queued_at = task.queued_s;
    task.fn();
    queued_at = 0;
    task.fn = nullptr;
    // A task is a connection's life: what its thread cached for it goes back for every thread to use, so
    // that each worker's cache does not grow on its own toward the allocator's total (32 MiB by default).
    AllocatorThreadIdle();
    std::unique_lock<std::mutex> lock(mu_);
    if (!queue_.empty()) {
      task = std::move(queue_.front());
      queue_.pop_front();
      continue;
    }
    if (shutdown_) return;
    idle_.push_back(self);
    self->cv.wait(lock, [&] { return self->task.fn != nullptr || shutdown_; });
    if (self->task.fn == nullptr) return;  // shut down while idle (shutdown took it off idle_)
    task = std::move(self->task);
    self->task.fn = nullptr;
  }
}

void WorkerPool::shutdown() {
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(mu_);
    shutdown_ = true;
    for (Worker* w : idle_) w->cv.notify_one();
    idle_.clear();
    for (auto& w : workers_)
      if (w->thread.joinable()) threads.push_back(std::move(w->thread));
  }
  for (std::thread& t : threads) t.join();
}

size_t WorkerPool::threads_idle() const {
  std::lock_guard<std::mutex> lock(mu_);
  return idle_.size();
}

size_t WorkerPool::threads_started() const {
  std::lock_guard<std::mutex> lock(mu_);
  return workers_.size();
}

}  // namespace tessera
