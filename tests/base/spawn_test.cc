// SpawnLogged: the child's stdout and stderr go to the log, appended; a program that is not there is -1.
#include "base/spawn.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace tessera {
namespace {

TEST(SpawnLogged, AppendsBothStreamsToTheLog) {
  const std::string log =
      (std::filesystem::temp_directory_path() / ("spawn-" + std::to_string(getpid()))).string();
  std::ofstream(log) << "before\n";
  const pid_t pid = SpawnLogged({"sh", "-c", "echo out; echo err >&2; exit 3"}, log);
  ASSERT_GT(pid, 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 3);
  std::stringstream text;
  text << std::ifstream(log).rdbuf();
  EXPECT_EQ(text.str(), "before\nout\nerr\n");
  std::filesystem::remove(log);
  EXPECT_EQ(SpawnLogged({"/nonexistent/tessera-no-such-program"}, "/dev/null"), -1);
  EXPECT_EQ(SpawnLogged({}, "/dev/null"), -1);
}

}  // namespace
}  // namespace tessera
