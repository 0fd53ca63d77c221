#pragma once
// WorkerPool: the connection workers of a GuardedServer (cpp-httplib's TaskQueue). A task goes to the worker
// that went idle last (a stack, not a queue), and a worker thread is started only when none is idle, up to
// `max_threads`; beyond, tasks wait in arrival order. So the threads that ever run, and the memory their
// stacks and allocator caches hold, follow the peak of concurrent connections, not how many connections
// came over a process's life: with cpp-httplib's pool every waiting thread took its turn (a condition
// variable wakes the longest waiter), so a replica that had served a few thousand short connections held
// every one of its hundreds of workers' memory (docs/high-availability.md).
//
// A worker hands its allocator cache back after each task (tcmalloc's MarkThreadIdle, where linked), so
// that the caches of workers that served connections do not each grow toward the allocator's total.
// Each worker lowers its own CPU priority by `nice` before its first task (Linux: per thread). A task can
// ask when it was enqueued (QueuedAt: a connection's wait for a worker counts toward its deadline).
// Thread safety: enqueue and shutdown from any thread.

#include <httplib.h>

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace tessera {

class WorkerPool final : public httplib::TaskQueue {
 public:
  WorkerPool(size_t max_threads, int nice);
  ~WorkerPool() override { shutdown(); }
  void enqueue(std::function<void()> fn) override;
  // Runs the tasks still queued, then stops and joins every worker.
  void shutdown() override;

  size_t threads_started() const;
  size_t threads_idle() const;
  // In a task: the steady-clock seconds when it was enqueued; 0 outside a pool's task.
  static double QueuedAt();

 private:
  struct Task {
    std::function<void()> fn;
    double queued_s = 0;
  };
  struct Worker {
    std::condition_variable cv;
    Task task;  // handed over by enqueue while the worker is idle (fn set)
    std::thread thread;
  };
  void Run(Worker* self, Task first);

  const size_t max_threads_;
  const int nice_;
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::vector<Worker*> idle_;  // the last one went idle last
  std::deque<Task> queue_;
  bool shutdown_ = false;
};

}  // namespace tessera
