#include "base/parallel.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace tessera {
namespace {

TEST(ParallelFor, CallsEveryIndexExactlyOnce) {
  for (int threads : {0, 1, 2, 3, 8}) {
    for (size_t count : {size_t{0}, size_t{1}, size_t{2}, size_t{7}, size_t{100}}) {
      std::vector<std::atomic<int>> calls(count);
      ParallelFor(count, threads, [&](size_t i) { calls[i].fetch_add(1); });
      for (size_t i = 0; i < count; ++i)
        EXPECT_EQ(calls[i].load(), 1) << "threads " << threads << " count " << count << " index " << i;
    }
  }
}

TEST(ParallelFor, OneThreadRunsInOrderOnTheCaller) {
  std::vector<size_t> seen;
  const std::thread::id caller = std::this_thread::get_id();
  bool all_on_caller = true;
  ParallelFor(5, 1, [&](size_t i) {
    seen.push_back(i);
    all_on_caller = all_on_caller && std::this_thread::get_id() == caller;
  });
  EXPECT_EQ(seen, (std::vector<size_t>{0, 1, 2, 3, 4}));
  EXPECT_TRUE(all_on_caller);
}

TEST(ParallelFor, UsesNoMoreThreadsThanAsked) {
  std::mutex m;
  std::set<std::thread::id> ids;
  ParallelFor(64, 3, [&](size_t) {
    std::lock_guard<std::mutex> lock(m);
    ids.insert(std::this_thread::get_id());
  });
  EXPECT_GE(ids.size(), 1u);
  EXPECT_LE(ids.size(), 3u);
}

TEST(ParallelFor, ExceptionOnTheCallerStopsFurtherItemsAndReachesTheCaller) {
  std::vector<size_t> seen;
  EXPECT_THROW(ParallelFor(10, 1,
                           [&](size_t i) {
                             seen.push_back(i);
                             if (i == 2) throw std::runtime_error("item 2");
                           }),
               std::runtime_error);
  EXPECT_EQ(seen, (std::vector<size_t>{0, 1, 2}));
}

TEST(ParallelFor, ExceptionOnAWorkerThreadIsRethrownAfterEveryThreadFinished) {
  const std::thread::id caller = std::this_thread::get_id();
  std::atomic<bool> worker_threw{false};
  std::atomic<int> running{0};
  std::atomic<int> started{0};
  std::atomic<int> finished{0};
  std::string message;
  try {
    ParallelFor(1000, 4, [&](size_t) {
      started.fetch_add(1);
      running.fetch_add(1);
      if (std::this_thread::get_id() != caller) {
        running.fetch_sub(1);
        finished.fetch_add(1);
        worker_threw = true;
        throw std::runtime_error("from a worker");
      }
      // The caller's items wait (bounded) until a worker has thrown, so the exception comes from a worker.
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (!worker_threw && std::chrono::steady_clock::now() < until) std::this_thread::yield();
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      running.fetch_sub(1);
      finished.fetch_add(1);
    });
  } catch (const std::runtime_error& e) {
    message = e.what();
  }
  EXPECT_EQ(message, "from a worker");
  EXPECT_TRUE(worker_threw);
  EXPECT_EQ(running.load(), 0);  // every item that started had finished when the exception arrived
  EXPECT_EQ(started.load(), finished.load());
  EXPECT_LT(started.load(), 1000);  // items after the failure were not started
}

TEST(ParallelFor, FirstOfSeveralExceptionsIsRethrownOnce) {
  int caught = 0;
  try {
    ParallelFor(50, 3, [](size_t i) { throw std::out_of_range("item " + std::to_string(i)); });
  } catch (const std::out_of_range& e) {
    ++caught;
    EXPECT_EQ(std::string(e.what()).rfind("item ", 0), 0u) << e.what();
  }
  EXPECT_EQ(caught, 1);
}

}  // namespace
}  // namespace tessera
