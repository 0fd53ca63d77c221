// Bad files through the `tessera` command: exit status 2 and one line naming the file, the line and the field;
// never a signal or an uncaught exception.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "testing/paths.h"

namespace tessera {
namespace {

using testing::Tessera;

std::string Write(const std::string& name, const std::string& text) {
  const auto dir = std::filesystem::temp_directory_path() / ("tessera-bad-cli-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / name).string();
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

TEST(BadInputCli, ClusterAndWorkloadErrorsNameFileLineAndField) {
  const std::string src = ::tessera::testing::SourceDir();
  const std::string cluster = src + "/examples/clusters/hgx-h100-32.yaml";
  const std::string workload = src + "/examples/workloads/mixed.yaml";
  struct Case {
    std::string file, text, expect;
    bool is_cluster;
  } cases[] = {
      {"c1.yaml", "nodes:\n  - name: a\n    gpu: h100-80gb\n    gpus: three\n",
       "c1.yaml:4: nodes[0].gpus: expected an integer in [0, 64], got \"three\"", true},
      {"c2.yaml", "nodes:\n  - name: a\n    cpu: 1e30\n", "c2.yaml:3: nodes[0].cpu: expected a number", true},
      {"c3.yaml", "nodes:\n  - name: a\n    labels: {zone: [x, [y]]}\n", "c3.yaml:3: nodes[0].labels.zone: expected text",
       true},
      {"c4.yaml", std::string("\x00\x01\x02\xff\xfe", 5), "c4.yaml", true},
      {"w1.yaml", "- name: a\n  replicas: 9223372036854775808\n", "w1.yaml:2: workloads[0].replicas: expected an integer",
       false},
      {"w2.yaml", "- name: a\n  gpu_kinds: {k: v}\n", "w2.yaml:2: workloads[0].gpu_kinds: expected a list, got a map", false},
      {"w3.yaml", "[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]\n", "w3.yaml:1: workloads[0]: expected a map", false},
  };
  for (const Case& c : cases) {
    const std::string path = Write(c.file, c.text);
    const std::string args = c.is_cluster ? "place --cluster '" + path + "' --workload '" + workload + "'"
                                          : "place --cluster '" + cluster + "' --workload '" + path + "'";
    auto r = Tessera(args + " --policy tessera", /*with_stderr=*/true);
    EXPECT_EQ(r.code, 2) << r.out;
    EXPECT_NE(r.out.find(c.expect), std::string::npos) << "want '" << c.expect << "' in: " << r.out;
    EXPECT_EQ(r.out.find("terminate"), std::string::npos) << r.out;
  }
}

TEST(BadInputCli, ScenarioAndBreakEvenErrorsNameFileLineAndField) {
  const std::string src = ::tessera::testing::SourceDir();
  const std::string scen = Write("s.yaml", "name: x\ncluster: " + src +
                                               "/examples/clusters/hgx-h100-32.yaml\nhorizon_h: 1\n"
                                               "workload: {inference_share: .nan}\n");
  auto r = Tessera("simulate run --scenario '" + scen + "' --seeds 1 --json", true);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("s.yaml:4: workload.inference_share: expected a number in [0, 1], got \".nan\""),
            std::string::npos)
      << r.out;
  const std::string be = Write("b.yaml", "owned: {gpus: 8, capex_usd: 1, life_months: [x, [y]]}\nalternatives: []\n");
  r = Tessera("cost breakeven --config '" + be + "'", true);
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("b.yaml:1: owned.life_months: expected a number"), std::string::npos) << r.out;
}

// A multi-tenant scenario goes through the one scenario reader: `simulate bound` bounds its job streams, and
// run flags that only the other runner uses are refused rather than ignored.
TEST(BadInputCli, MultiTenantScenarioBoundsAndRefusesFlagsItCannotUse) {
  const std::string scen = std::string(::tessera::testing::SourceDir()) + "/examples/scenarios/multi-tenant.yaml";
  auto r = Tessera("simulate bound --scenario '" + scen + "' --seeds 1 --json", true);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("\"bound\""), std::string::npos) << r.out;
  r = Tessera("simulate run --scenario '" + scen + "' --seeds 1 --cycle greedy --json", true);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--cycle, --price-book and --csv do not apply to a multi-tenant scenario"), std::string::npos)
      << r.out;
}

TEST(BadInputCli, UnreadableCurvesFileIsAnError) {
  const std::string out = (std::filesystem::temp_directory_path() / "tessera-bad-cli-report").string();
  auto r = Tessera("simulate report --out '" + out + "' --fgd-curves /nonexistent/curves.csv --fgd-trace /nonexistent", true);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("cannot read FGD curves from /nonexistent/curves.csv"), std::string::npos) << r.out;
}

TEST(BadInputCli, ServeRefusesAMalformedTrustedProxyNamingTheFlag) {
  const std::string db = (std::filesystem::temp_directory_path() / "tessera-bad-cli-proxy.db").string();
  for (const char* cidr : {"10.0.0.0/33", "proxy.example", "2001:db8::/129"}) {
    auto r = Tessera("serve --db '" + db + "' --listen 127.0.0.1:0 --trusted-proxy 127.0.0.1 --trusted-proxy '" +
                         cidr + "'",
                     true);
    EXPECT_EQ(r.code, 2) << r.out;
    EXPECT_NE(r.out.find(std::string("--trusted-proxy '") + cidr + "'"), std::string::npos) << r.out;
  }
  EXPECT_FALSE(std::filesystem::exists(db));  // refused before anything was opened
  auto help = Tessera("serve --help", true);
  EXPECT_NE(help.out.find("--trusted-proxy"), std::string::npos) << help.out;
}

}  // namespace
}  // namespace tessera
