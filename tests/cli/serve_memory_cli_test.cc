// `tessera serve`'s memory allocator, end to end on the built binary (TESSERA_BINARY): linked with
// tcmalloc, the threads' caches are capped at kThreadCacheBytes unless the environment names a cap, and
// /metrics reports the allocator's figures; without it (sanitizer builds), /metrics claims none.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <regex>
#include <string>

#include "cli/process.h"
#include "testing/serve_process.h"

namespace tessera::testing {
namespace {

// The value of tessera_allocator_bytes{kind="<kind>"} in the server's /metrics, or -1 when absent.
long long AllocatorBytes(const ServeProcess& s, const std::string& kind) {
  auto r = s.Get("/metrics", "");
  if (!r || r->status != 200) return -2;
  std::smatch m;
  const std::regex line("tessera_allocator_bytes\\{kind=\"" + kind + "\"\\} (\\d+)");
  return std::regex_search(r->body, m, line) ? std::stoll(m[1]) : -1;
}

class ServeMemoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("tessera-mem-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    unsetenv("TCMALLOC_MAX_TOTAL_THREAD_CACHE_BYTES");
    std::filesystem::remove_all(dir_);
  }
  std::filesystem::path dir_;
};

#if TESSERA_TCMALLOC_LINKED
TEST_F(ServeMemoryTest, ThreadCachesAreCappedAndReported) {
  ServeProcess s(dir_);
  ASSERT_TRUE(s.Start());
  EXPECT_EQ(AllocatorBytes(s, "thread_cache_limit"), static_cast<long long>(cli::kThreadCacheBytes));
  EXPECT_GT(AllocatorBytes(s, "in_use"), 0);
  EXPECT_GE(AllocatorBytes(s, "thread_caches"), 0);
  EXPECT_LE(AllocatorBytes(s, "thread_caches"), static_cast<long long>(cli::kThreadCacheBytes) * 2);
}

TEST_F(ServeMemoryTest, TheEnvironmentsCapWins) {
  setenv("TCMALLOC_MAX_TOTAL_THREAD_CACHE_BYTES", "16777216", 1);
  ServeProcess s(dir_);
  ASSERT_TRUE(s.Start());
  EXPECT_EQ(AllocatorBytes(s, "thread_cache_limit"), 16777216);
}
#else
// Without tcmalloc (the sanitizer builds) the allocator reports nothing, and /metrics says nothing of it.
TEST_F(ServeMemoryTest, WithoutTcmallocNoAllocatorFiguresAreClaimed) {
  ServeProcess s(dir_);
  ASSERT_TRUE(s.Start());
  EXPECT_EQ(AllocatorBytes(s, "thread_cache_limit"), -1);
  EXPECT_EQ(AllocatorBytes(s, "in_use"), -1);
}
#endif

}  // namespace
}  // namespace tessera::testing
