#include "base/thread_priority.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <thread>

namespace tessera {
namespace {

int ThreadNice() { return getpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid))); }

// Only the calling thread moves, by the amount asked, never past 19; a non-positive amount does nothing.
TEST(ThreadPriority, LowersOnlyTheCallingThread) {
  const int mine = ThreadNice();
  int lowered = -100, unchanged = -100, capped = -100;
  std::thread([&] {
    LowerThreadPriority(0);
    unchanged = ThreadNice();
    LowerThreadPriority(3);
    lowered = ThreadNice();
    LowerThreadPriority(40);
    capped = ThreadNice();
  }).join();
  EXPECT_EQ(unchanged, mine);
  EXPECT_EQ(lowered, std::min(19, mine + 3));
  EXPECT_EQ(capped, 19);
  EXPECT_EQ(ThreadNice(), mine);
}

}  // namespace
}  // namespace tessera
