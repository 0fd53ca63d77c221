// WorkerPool: the worker idle the shortest time takes the next task, threads start only when none is idle
// (up to the cap, then tasks wait in order), a task knows when it was queued, shutdown runs what is queued.
#include "net/worker_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <set>
#include <thread>

namespace tessera {
namespace {

// Waits (up to 5 s) until `pool` has `n` idle workers.
bool IdleWithin(const WorkerPool& pool, size_t n) {
  for (int i = 0; i < 5000 && pool.threads_idle() != n; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return pool.threads_idle() == n;
}

TEST(WorkerPool, OneTaskAtATimeRunsOnOneThread) {
  WorkerPool pool(64, 0);
  std::set<std::thread::id> ran_on;
  for (int i = 0; i < 200; ++i) {
    std::promise<std::thread::id> done;
    pool.enqueue([&] { done.set_value(std::this_thread::get_id()); });
    ran_on.insert(done.get_future().get());
    ASSERT_TRUE(IdleWithin(pool, 1));
  }
  EXPECT_EQ(ran_on.size(), 1u);
  EXPECT_EQ(pool.threads_started(), 1u);
}

TEST(WorkerPool, ThreadsFollowThePeakAndTheLastIdleWorkerGoesFirst) {
  WorkerPool pool(64, 0);
  std::promise<void> release;
  std::shared_future<void> go = release.get_future().share();
  std::atomic<int> started{0};
  std::mutex mu;
  std::vector<std::thread::id> order;
  for (int i = 0; i < 8; ++i)
    pool.enqueue([&] {
      ++started;
      go.wait();
      std::lock_guard<std::mutex> l(mu);
      order.push_back(std::this_thread::get_id());
    });
  for (int i = 0; i < 5000 && started < 8; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(pool.threads_started(), 8u);
  release.set_value();
  ASSERT_TRUE(IdleWithin(pool, 8));
  // The next tasks, one at a time, all go to the worker that went idle last.
  std::set<std::thread::id> next;
  for (int i = 0; i < 50; ++i) {
    std::promise<std::thread::id> done;
    pool.enqueue([&] { done.set_value(std::this_thread::get_id()); });
    next.insert(done.get_future().get());
    ASSERT_TRUE(IdleWithin(pool, 8));
  }
  EXPECT_EQ(next.size(), 1u);
  EXPECT_EQ(pool.threads_started(), 8u);
}

TEST(WorkerPool, BeyondTheCapTasksWaitInOrderAndShutdownRunsThem) {
  auto pool = std::make_unique<WorkerPool>(1, 0);
  std::promise<void> release;
  std::shared_future<void> go = release.get_future().share();
  std::vector<int> ran;  // one worker: no two tasks at once
  for (int i = 0; i < 6; ++i)
    pool->enqueue([&, i] {
      if (i == 0) go.wait();
      ran.push_back(i);
    });
  EXPECT_EQ(pool->threads_started(), 1u);
  release.set_value();
  pool->shutdown();  // runs what is queued, then joins
  EXPECT_EQ(ran, (std::vector<int>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(pool->threads_started(), 1u);
}

TEST(WorkerPool, ATaskKnowsWhenItWasQueued) {
  WorkerPool pool(4, 0);
  const double before =
      std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  std::promise<double> got;
  pool.enqueue([&] { got.set_value(WorkerPool::QueuedAt()); });
  const double at = got.get_future().get();
  EXPECT_GE(at, before);
  EXPECT_LE(at, before + 5);
  EXPECT_EQ(WorkerPool::QueuedAt(), 0);  // not in a task
}

}  // namespace
}  // namespace tessera
