// `tessera simulate fgd-harness` end to end on small synthetic openb CSVs written to a temp dir: JSON
// keys, the --curves CSV, and bad input (exit code 2, messages naming file:line:field).
#include <gtest/gtest.h>

#include "cli_runner.h"
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <algorithm>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

using tessera::testing::CliRun;
using tessera::testing::Tessera;

// A fresh temp dir with nodes.csv and pods.csv, removed at the end of the test.
class FgdCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("tessera-fgd-cli-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    Write("nodes.csv",
          "sn,cpu_milli,memory_mib,gpu,model\n"
          "a,32000,131072,4,T4\n"
          "b,32000,131072,4,T4\n"
          "c,64000,262144,8,G2\n"
          "d,16000,65536,2,P100\n");
    Write("pods.csv",
          "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\n"
          "p0,4000,16384,1,1000,\n"
          "p1,2000,8192,1,500,\n"
          "p2,2000,8192,1,300,T4\n"
          "p3,8000,16384,0,0,\n"
          "p4,6000,12288,1,810,\n"
          "p5,16000,65536,2,1000,G2\n"
          "p6,2000,8192,1,230,\n"
          "p7,4000,16384,1,1000,P100|T4\n");
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
    return Path(name);
  }
  std::string Path(const std::string& name) const { return "'" + (dir_ / name).string() + "'"; }
  std::string Harness(const std::string& nodes, const std::string& pods) const {
    return "simulate fgd-harness --nodes " + Path(nodes) + " --pods " + Path(pods);
  }

  fs::path dir_;
};

TEST_F(FgdCliTest, JsonHasEveryKeyForEveryPolicy) {
  CliRun r = Tessera(Harness("nodes.csv", "pods.csv") +
                  " --policy fgd,tessera,bestfit,random,dotprod,gpuclustering,gpupacking --seeds 1-3 --json");
  ASSERT_EQ(r.code, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  for (const char* key : {"nodes", "pods", "seeds", "inflation", "typical_shapes", "threads", "wall_seconds", "results"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_EQ(j["seeds"], nlohmann::json({1, 2, 3}));
  EXPECT_DOUBLE_EQ(j["inflation"].get<double>(), 1.3);
  ASSERT_EQ(j["results"].size(), 7u);
  std::vector<std::string> names;
  for (const auto& res : j["results"]) {
    names.push_back(res["policy"].get<std::string>());
    for (const char* key : {"unallocated_gpu_pct_at_100", "fragmentation_pct_at_100", "fragmentation_pct_of_idle_at_100"}) {
      ASSERT_TRUE(res.contains(key)) << key;
      const auto& spread = res[key];
      for (const char* k : {"median", "min", "max", "seeds"}) EXPECT_TRUE(spread.contains(k)) << key << "." << k;
      EXPECT_EQ(spread["seeds"].size(), 3u);
      EXPECT_LE(spread["min"].get<double>(), spread["median"].get<double>());
      EXPECT_LE(spread["median"].get<double>(), spread["max"].get<double>());
    }
    for (const char* key : {"pods_per_run_mean", "failed_per_run_mean", "seconds", "seconds_per_run_max"})
      EXPECT_TRUE(res.contains(key)) << key;
    const double u = res["unallocated_gpu_pct_at_100"]["median"].get<double>();
    EXPECT_GE(u, 0.0);
    EXPECT_LE(u, 100.0);
    EXPECT_GT(res["pods_per_run_mean"].get<double>(), 8.0);  // inflated past the 8 originals
  }
  EXPECT_EQ(names, (std::vector<std::string>{"fgd", "tessera", "bestfit", "random", "dotprod", "gpuclustering",
                                             "gpupacking"}));
}

TEST_F(FgdCliTest, CurvesWritesOneRowPerPodPerRun) {
  CliRun r = Tessera(Harness("nodes.csv", "pods.csv") + " --policy fgd,gpupacking --seeds 4-5 --json --curves " +
                  Path("curves.csv"));
  ASSERT_EQ(r.code, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  std::ifstream in(dir_ / "curves.csv");
  ASSERT_TRUE(in) << "no curves file";
  std::string line;
  ASSERT_TRUE(std::getline(in, line));
  EXPECT_EQ(line, "policy,seed,pod_index,arrived_pct,allocated_pct,frag_pct_of_capacity,frag_pct_of_idle");
  int rows = 0, fgd_rows = 0;
  while (std::getline(in, line)) {
    ++rows;
    if (line.rfind("fgd,", 0) == 0) ++fgd_rows;
    EXPECT_EQ(std::count(line.begin(), line.end(), ','), 6) << line;
  }
  double expected = 0;
  for (const auto& res : j["results"]) expected += 2 * res["pods_per_run_mean"].get<double>();
  EXPECT_EQ(rows, static_cast<int>(expected));
  EXPECT_GT(fgd_rows, 0);
  EXPECT_LT(fgd_rows, rows);
}

std::vector<std::string> SplitOn(const std::string& line, char sep) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream in(line);
  while (std::getline(in, cur, sep)) out.push_back(cur);
  if (!line.empty() && line.back() == sep) out.push_back("");
  return out;
}

// Rows of a CSV file as column -> value maps.
std::vector<std::map<std::string, std::string>> ReadCsv(const fs::path& p) {
  std::ifstream in(p);
  std::string line;
  std::vector<std::map<std::string, std::string>> rows;
  if (!std::getline(in, line)) return rows;
  const std::vector<std::string> header = SplitOn(line, ',');
  while (std::getline(in, line)) {
    const std::vector<std::string> f = SplitOn(line, ',');
    EXPECT_EQ(f.size(), header.size()) << line;
    std::map<std::string, std::string> row;
    for (size_t i = 0; i < header.size() && i < f.size(); ++i) row[header[i]] = f[i];
    rows.push_back(std::move(row));
  }
  return rows;
}

// The --placements file replayed against nodes.csv and pods.csv by this test alone: every pod of every
// (policy, seed) has one row in arrival order; placed pods fit their node's CPU, memory and GPUs at
// that moment, on a GPU model they allow, with the GPUs they asked for; failed rows name nothing.
TEST_F(FgdCliTest, PlacementsReplayAgainstTheTrace) {
  CliRun r = Tessera(Harness("nodes.csv", "pods.csv") +
                     " --policy tessera,fgd,bestfit,random,dotprod,gpuclustering,gpupacking,k8s-default,static-mig"
                     " --seeds 3-4 --json --placements " + Path("placements.csv"));
  ASSERT_EQ(r.code, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  {
    std::ifstream in(dir_ / "placements.csv");
    std::string header;
    ASSERT_TRUE(std::getline(in, header)) << "no placements file";
    EXPECT_EQ(header, "policy,seed,pod_index,pod_row,status,node,gpus");
  }
  const auto nodes = ReadCsv(dir_ / "nodes.csv");
  const auto pods = ReadCsv(dir_ / "pods.csv");
  const auto rows = ReadCsv(dir_ / "placements.csv");
  ASSERT_EQ(pods.size(), 8u);
  struct NodeLeft {
    long cpu, mem;
    std::vector<int> gpu;
    std::string model;
  };
  std::map<std::string, std::map<std::string, NodeLeft>> runs;  // "policy/seed" -> sn -> what is left
  std::map<std::string, long> next_index, failed;
  for (const auto& row : rows) {
    const std::string run = row.at("policy") + "/" + row.at("seed");
    if (!runs.count(run)) {
      for (const auto& n : nodes)
        runs[run][n.at("sn")] = NodeLeft{std::stol(n.at("cpu_milli")), std::stol(n.at("memory_mib")),
                                         std::vector<int>(std::stoul(n.at("gpu")), 1000), n.at("model")};
    }
    ASSERT_EQ(std::stol(row.at("pod_index")), next_index[run]++) << run << ": rows in arrival order";
    const auto& pod = pods.at(std::stoul(row.at("pod_row")));
    if (row.at("status") == "failed") {
      ++failed[run];
      EXPECT_EQ(row.at("node"), "");
      EXPECT_EQ(row.at("gpus"), "");
      continue;
    }
    ASSERT_EQ(row.at("status"), "placed");
    ASSERT_TRUE(runs[run].count(row.at("node"))) << "unknown node " << row.at("node");
    NodeLeft& left = runs[run][row.at("node")];
    left.cpu -= std::stol(pod.at("cpu_milli"));
    left.mem -= std::stol(pod.at("memory_mib"));
    EXPECT_GE(left.cpu, 0) << run << " pod " << row.at("pod_index") << ": CPU over capacity";
    EXPECT_GE(left.mem, 0) << run << " pod " << row.at("pod_index") << ": memory over capacity";
    const int num_gpu = std::stoi(pod.at("num_gpu"));
    const int milli = std::stoi(pod.at("gpu_milli"));
    const std::vector<std::string> grants = row.at("gpus").empty() ? std::vector<std::string>{} : SplitOn(row.at("gpus"), '|');
    ASSERT_EQ(static_cast<int>(grants.size()), num_gpu) << run << " pod " << row.at("pod_index");
    const std::string spec = pod.at("gpu_spec");
    if (num_gpu > 0 && !spec.empty()) {
      const auto allowed = SplitOn(spec, '|');
      EXPECT_NE(std::find(allowed.begin(), allowed.end(), left.model), allowed.end()) << run << ": model not allowed";
    }
    for (const std::string& g : grants) {
      const auto parts = SplitOn(g, ':');
      ASSERT_EQ(parts.size(), 2u) << g;
      const size_t idx = std::stoul(parts[0]);
      const int granted = std::stoi(parts[1]);
      ASSERT_LT(idx, left.gpu.size()) << g;
      EXPECT_GE(granted, milli) << run << ": granted less than asked";
      left.gpu[idx] -= granted;
      EXPECT_GE(left.gpu[idx], 0) << run << " pod " << row.at("pod_index") << ": GPU " << idx << " over capacity";
    }
  }
  EXPECT_EQ(runs.size(), 18u) << "9 policies x 2 seeds";
  for (const auto& res : j["results"]) {
    const std::string p = res["policy"].get<std::string>();
    EXPECT_DOUBLE_EQ(static_cast<double>(next_index[p + "/3"] + next_index[p + "/4"]) / 2,
                     res["pods_per_run_mean"].get<double>()) << p << ": one row per pod";
    EXPECT_DOUBLE_EQ(static_cast<double>(failed[p + "/3"] + failed[p + "/4"]) / 2,
                     res["failed_per_run_mean"].get<double>()) << p;
  }
  // An unwritable path is bad input, found before any run.
  CliRun bad = Tessera(Harness("nodes.csv", "pods.csv") + " --placements " + Path("no-such-dir/p.csv"), true);
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.out.find("p.csv"), std::string::npos) << bad.out;
}

TEST_F(FgdCliTest, BadInputNamesFileLineAndField) {
  Write("bad_nodes.csv",
        "sn,cpu_milli,memory_mib,gpu,model\n"
        "a,32000,131072,4,T4\n"
        "b,lots,131072,4,T4\n");
  CliRun r = Tessera(Harness("bad_nodes.csv", "pods.csv"), true);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("bad_nodes.csv:3: field 'cpu_milli'"), std::string::npos) << r.out;

  Write("bad_pods.csv",
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n"
        "p0,4000,16384,1,1000\n"
        "p1,2000,8192,1,1500\n");
  r = Tessera(Harness("nodes.csv", "bad_pods.csv"), true);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("bad_pods.csv:3: field 'gpu_milli'"), std::string::npos) << r.out;

  r = Tessera(Harness("nodes.csv", "missing.csv"), true);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("missing.csv"), std::string::npos) << r.out;

  r = Tessera(Harness("nodes.csv", "pods.csv") + " --policy fgd,nope", true);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("unknown policy 'nope'"), std::string::npos) << r.out;

  r = Tessera(Harness("nodes.csv", "pods.csv") + " --seeds 9-3", true);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("--seeds"), std::string::npos) << r.out;

  r = Tessera(Harness("nodes.csv", "pods.csv") + " --curves " + Path("no/such/dir/c.csv"), true);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("cannot write"), std::string::npos) << r.out;
}

// `simulate report` without --fgd-curves runs the harness on the trace folder and plots our curves.
TEST_F(FgdCliTest, ReportRunsTheHarnessOnTheTraceFolder) {
  fs::copy_file(dir_ / "nodes.csv", dir_ / "openb_node_list_gpu_node.csv");
  fs::copy_file(dir_ / "pods.csv", dir_ / "openb_pod_list_default.csv");
  Write("c.yaml",
        "name: c16\ndefaults: {gpus: 8, cpu: 192, memory_gib: 2048, interconnect: nvswitch}\n"
        "nodes:\n  - {name: h, count: 2, gpu: h100-80gb, leaf: leaf-0}\n");
  Write("s.yaml",
        "name: tiny\ncluster: c.yaml\nseeds: 1\nthreads: 1\npolicies: [tessera, k8s-default]\nhorizon_h: 24\n"
        "warmup_h: 2\narrivals: {process: backlog, depth: 8}\nworkload: {inference_share: 0.5}\n");
  const fs::path out = dir_ / "report";
  CliRun r = Tessera("simulate report --out '" + out.string() + "' --scenario " + Path("s.yaml") + " --fgd-trace '" +
                         dir_.string() + "'",
                     true);
  ASSERT_EQ(r.code, 0) << r.out;
  ASSERT_TRUE(fs::exists(out / "fgd-curves.csv"));
  std::ifstream in(out / "index.html");
  std::stringstream html;
  html << in.rdbuf();
  for (const char* s : {"\"ours fgd\"", "\"ours bestfit\"", "\"ours random\"", "\"ours dotprod\"",
                        "\"ours gpuclustering\"", "\"ours gpupacking\"", "\"ours tessera\""})
    EXPECT_NE(html.str().find(s), std::string::npos) << s;
  // One row per 1% bin per run at most: 7 policies x 10 seeds x (up to 131 bins).
  std::ifstream curves(out / "fgd-curves.csv");
  const auto rows = std::count(std::istreambuf_iterator<char>(curves), std::istreambuf_iterator<char>(), '\n');
  EXPECT_GT(rows, 40);
  EXPECT_LE(rows, 1 + 7 * 10 * 131);
}

// `simulate run --json` carries the bound and each result's cycle; `simulate bound` prints the same bound.
TEST_F(FgdCliTest, RunCarriesTheBoundAndTheCycle) {
  Write("c.yaml",
        "name: c16\ndefaults: {gpus: 8, cpu: 192, memory_gib: 2048, interconnect: nvswitch}\n"
        "nodes:\n  - {name: h, count: 2, gpu: h100-80gb, leaf: leaf-0}\n");
  Write("s.yaml",
        "name: tiny\ncluster: c.yaml\nseeds: 2\nthreads: 1\npolicies: [tessera, k8s-default]\nhorizon_h: 24\n"
        "warmup_h: 2\narrivals: {process: backlog, depth: 8}\nworkload: {inference_share: 0.9, traffic: light}\n");
  CliRun r = Tessera("simulate run --json --scenario " + Path("s.yaml"), false);
  ASSERT_EQ(r.code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out.substr(r.out.find('{')));
  const double bound = j["bound"]["gpu_utilization"]["mean"].get<double>();
  EXPECT_GT(bound, 0.0);
  EXPECT_LE(bound, 1.0);
  ASSERT_EQ(j["results"].size(), 2u);
  EXPECT_TRUE(j["same_cycle"].get<bool>());
  for (const auto& res : j["results"]) {
    EXPECT_EQ(res["cycle"], j["results"][0]["cycle"]);
    EXPECT_LE(res["gpu_utilization"]["mean"].get<double>(), bound + 1e-9);
    EXPECT_NEAR(res["distance_to_bound"]["mean"].get<double>(), bound - res["gpu_utilization"]["mean"].get<double>(),
                2e-4);
  }
  r = Tessera("simulate bound --json --scenario " + Path("s.yaml"), false);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(nlohmann::json::parse(r.out.substr(r.out.find('{')))["bound"], j["bound"]);
  r = Tessera("simulate run --json --cycle greedy --seeds 1 --scenario " + Path("s.yaml"), false);
  ASSERT_EQ(r.code, 0) << r.out;
  const auto greedy = nlohmann::json::parse(r.out.substr(r.out.find('{')));  // outlives the loop
  for (const auto& res : greedy["results"])
    EXPECT_EQ(res["cycle"]["name"], "greedy");
  r = Tessera("simulate run --cycle fast --scenario " + Path("s.yaml"), true);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("--cycle: expected backfill or greedy"), std::string::npos) << r.out;
  r = Tessera("simulate bound --scenario " + Path("nope.yaml"), true);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("nope.yaml"), std::string::npos) << r.out;
}

}  // namespace
