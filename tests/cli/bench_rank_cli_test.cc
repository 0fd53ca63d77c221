// `tessera bench rank-nodes`: the extender's question from the loop's view on a small synthetic cluster.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli_runner.h"

namespace tessera {
namespace {

using testing::Tessera;

TEST(BenchRankCli, JudgesEveryNodeAndReportsTheCallsTimes) {
  // 16 nodes of 8 GPUs; fillers of 1-8 GPUs take at least 100 % of them: the cycle places what fits, and
  // the nodes left with a free GPU are those that fit a 1-GPU task.
  const testing::CliRun none = Tessera("bench rank-nodes --nodes 16 --fill 100 --calls 3 --json", true);
  ASSERT_EQ(none.code, 0) << none.out;
  const nlohmann::json full = nlohmann::json::parse(none.out);
  EXPECT_EQ(full["nodes"], 16);
  EXPECT_EQ(full["calls"], 3);
  EXPECT_GE(full["gpus_taken"].get<int>(), 128);
  EXPECT_LT(full["nodes_fitting"].get<int>(), 16);
  EXPECT_GE(full["median_ms"].get<double>(), 0.0);
  EXPECT_GE(full["max_ms"].get<double>(), full["median_ms"].get<double>());

  const testing::CliRun empty = Tessera("bench rank-nodes --nodes 16 --fill 0 --calls 1 --json", true);
  ASSERT_EQ(empty.code, 0) << empty.out;
  EXPECT_EQ(nlohmann::json::parse(empty.out)["nodes_fitting"], 16)
      << "an idle cluster fits a 1-GPU task anywhere";

  EXPECT_NE(Tessera("bench rank-nodes --nodes 0").code, 0);
}

}  // namespace
}  // namespace tessera
