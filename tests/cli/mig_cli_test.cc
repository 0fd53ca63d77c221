// `tessera mig ...` end to end: runs the built binary (TESSERA_BINARY) and reads its output and exit code.
#include <gtest/gtest.h>

#include "cli_runner.h"
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

namespace {

using tessera::testing::CliRun;
using tessera::testing::Tessera;

TEST(MigCliTest, CheckValidAndInvalid) {
  CliRun r = Tessera("mig check --gpu h100-80gb 3g.40gb@0 3g.40gb@4");
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.out, "valid\n");
  r = Tessera("mig check --gpu NVIDIA-H100-80GB-HBM3 4g.40gb@0 3g.40gb@4");  // GFD product name
  EXPECT_EQ(r.code, 0) << r.out;
  r = Tessera("mig check --gpu h100-80gb 1g.10gb@7");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("allowed starts: 0, 1, 2, 3, 4, 5, 6"), std::string::npos) << r.out;
  r = Tessera("mig check --gpu h100-80gb 2g.20gb@2 3g.40gb@0");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("overlap on memory slice 2"), std::string::npos) << r.out;
  r = Tessera("mig check --gpu h100-80gb 3g.20gb@0");  // an A100-40GB name
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("unknown profile '3g.20gb'"), std::string::npos) << r.out;
}

TEST(MigCliTest, UnknownGpuListsKnownIds) {
  CliRun r = Tessera("mig check --gpu z100 7g.80gb@0", true);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("unknown GPU kind 'z100'"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("h100-80gb"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("alibaba-g1"), std::string::npos) << r.out;
}

TEST(MigCliTest, LayoutsJson) {
  CliRun r = Tessera("mig layouts --gpu h200-141gb --json");
  ASSERT_EQ(r.code, 0);
  const nlohmann::json layouts = nlohmann::json::parse(r.out);
  ASSERT_TRUE(layouts.is_array());
  EXPECT_EQ(layouts.size(), 78u);
  for (const auto& l : layouts)
    for (const auto& i : l) {
      EXPECT_TRUE(i.contains("profile") && i.contains("start")) << i.dump();
      EXPECT_EQ(i["profile"].get<std::string>().find("+me"), std::string::npos);
    }
  r = Tessera("mig layouts --gpu a30-24gb");
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("2g.12gb@0 + 2g.12gb@2\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("5 maximal layouts"), std::string::npos) << r.out;
  EXPECT_EQ(Tessera("mig layouts --gpu l4-24gb --json").code, 1);  // not MIG-capable
}

TEST(MigCliTest, ProfilesJsonCarriesEveryField) {
  CliRun r = Tessera("mig profiles --gpu h200-141gb --json");
  ASSERT_EQ(r.code, 0);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["gpu"], "h200-141gb");
  EXPECT_EQ(j["memory_slices"], 8);
  ASSERT_EQ(j["profiles"].size(), 7u);
  const auto& p = j["profiles"][2];
  EXPECT_EQ(p["name"], "1g.35gb");
  EXPECT_EQ(p["profile_id"], 15);
  EXPECT_EQ(p["compute_slices"], 1);
  EXPECT_EQ(p["memory_slices"], 2);
  EXPECT_EQ(p["max_count"], 4);
  EXPECT_EQ(p["starts"], nlohmann::json::array({0, 2, 4, 6}));
  EXPECT_EQ(p["media"], false);
  EXPECT_EQ(p["unverified"], true);
  EXPECT_TRUE(p.contains("usable_mib") && p.contains("sms") && p.contains("compute_milli"));
  r = Tessera("mig profiles --gpu h100-80gb");
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("1g.10gb+me"), std::string::npos) << r.out;
}

TEST(MigCliTest, UserCatalogFiles) {
  const std::string path = testing::TempDir() + "/mig_cli_test_catalog.yaml";
  {
    std::ofstream f(path);
    f << "kinds:\n"
         "  - id: mini-4slice\n"
         "    family: test\n"
         "    memory_mib: 40960\n"
         "    mig:\n"
         "      memory_slices: 4\n"
         "      compute_slices: 4\n"
         "      max_instances: 4\n"
         "      profiles:\n"
         "        - {name: 1g.10gb, compute_slices: 1, memory_slices: 1, usable_mib: 10000, max_count: 4, starts: [0, 1, 2, 3]}\n"
         "        - {name: 4g.40gb, compute_slices: 4, memory_slices: 4, usable_mib: 40000, max_count: 1, starts: [0]}\n";
  }
  CliRun r = Tessera("mig check --gpu mini-4slice --catalog '" + path + "' 1g.10gb@3 1g.10gb@0");
  EXPECT_EQ(r.code, 0) << r.out;
  r = Tessera("mig layouts --catalog '" + path + "' --gpu mini-4slice --json");
  ASSERT_EQ(r.code, 0);
  EXPECT_EQ(nlohmann::json::parse(r.out).size(), 2u);
  // The same file twice replaces the kind with itself.
  EXPECT_EQ(Tessera("mig profiles --gpu mini-4slice --catalog '" + path + "' --catalog '" + path + "'").code, 0);

  const std::string bad = testing::TempDir() + "/mig_cli_test_bad.yaml";
  {
    std::ofstream f(bad);
    f << "kinds:\n  - id: broken\n    family: test\n";
  }
  r = Tessera("mig profiles --gpu h100-80gb --catalog '" + bad + "'", true);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find(bad), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("mig_cli_test_bad.yaml:2: kinds[0].memory_mib: required"), std::string::npos) << r.out;
  r = Tessera("mig profiles --gpu h100-80gb --catalog /nonexistent/catalog.yaml", true);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("/nonexistent/catalog.yaml"), std::string::npos) << r.out;
}

}  // namespace
