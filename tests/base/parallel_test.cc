#include "base/parallel.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <set>
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

}  // namespace
}  // namespace tessera
