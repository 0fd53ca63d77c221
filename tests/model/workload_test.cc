#include "model/workload.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

constexpr double kGiB = 1024.0;

TEST(MemoryProfile, InferenceWeightsFollowBytesPerParameter) {
  MemoryDescription d;
  d.params_billion = 7;
  d.precision = Precision::kBf16;
  d.overhead_pct = 0;
  // 7e9 x 2 bytes = 13.04 GiB.
  EXPECT_NEAR(EstimateMemoryMib(d) / kGiB, 7e9 * 2 / (1 << 30), 0.01);
  d.precision = Precision::kFp8;
  EXPECT_NEAR(EstimateMemoryMib(d) / kGiB, 7e9 / (1 << 30), 0.01);
  d.precision = Precision::kInt4;  // 0.5 bytes + 3% scales
  EXPECT_NEAR(EstimateMemoryMib(d) / kGiB, 7e9 * 0.515 / (1 << 30), 0.01);
}

TEST(MemoryProfile, KvCacheAndOverheadAreAdded) {
  MemoryDescription d;
  d.params_billion = 8;
  d.precision = Precision::kFp8;
  d.kv_cache_mib = 4096;
  d.overhead_pct = 15;
  const double expect = (8e9 / (1 << 20) + 4096) * 1.15;
  EXPECT_NEAR(static_cast<double>(EstimateMemoryMib(d)), expect, 1.0);
}

TEST(MemoryProfile, TrainingUsesSixteenBytesPerParameterAndZeroSharding) {
  MemoryDescription d;
  d.params_billion = 7;
  d.training = true;
  d.overhead_pct = 0;
  EXPECT_NEAR(EstimateMemoryMib(d) / kGiB, 7e9 * 16 / (1 << 30), 0.01);  // ~104 GiB: never one GPU
  d.zero_stage = 3;
  d.data_parallel = 8;  // 16/8 = 2 bytes per parameter per GPU
  EXPECT_NEAR(EstimateMemoryMib(d) / kGiB, 7e9 * 2 / (1 << 30), 0.01);
  d.zero_stage = 2;  // 2 + 14/8
  EXPECT_NEAR(EstimateMemoryMib(d) / kGiB, 7e9 * (2 + 14.0 / 8) / (1 << 30), 0.01);
}

TEST(MemoryProfile, SmallestCoveringMigProfile) {
  const Catalog& cat = Catalog::Default();
  const GpuKind& h100 = cat.kind(cat.Find("h100-80gb"));
  auto name = [&](int64_t mib, int milli) {
    int p = SmallestCoveringProfile(h100, mib, milli);
    return p < 0 ? std::string("none") : h100.profiles[p].name;
  };
  EXPECT_EQ(name(8000, 100), "1g.10gb");
  EXPECT_EQ(name(15000, 100), "1g.20gb");   // memory, not compute, sizes light inference
  EXPECT_EQ(name(15000, 200), "2g.20gb");   // 0.2 of 132 SMs needs more than 16 SMs
  EXPECT_EQ(name(30000, 100), "3g.40gb");
  EXPECT_EQ(name(30000, 470), "4g.40gb");   // 60 SMs < 0.47 x 132; 64 SMs cover it
  EXPECT_EQ(name(60000, 100), "7g.80gb");
  EXPECT_EQ(name(90000, 100), "none");
}

TEST(WorkloadYaml, ParsesAndResolvesMemory) {
  auto w = LoadWorkloadsYaml(R"(
workloads:
  - name: chat
    class: inference
    replicas: 3
    gpu_fraction: 0.1
    memory: {params_billion: 8, precision: fp8, kv_cache_gib: 4}
  - name: train
    class: training
    workers: 4
    gpus_per_worker: 8
    memory_gib: 60
    checkpoint_interval_s: 600
)", "w.yaml");
  ASSERT_TRUE(w.ok()) << w.error();
  ASSERT_EQ(w->size(), 2u);
  EXPECT_EQ((*w)[0].gpus_per_worker, 0);
  EXPECT_EQ((*w)[0].gpu_milli, 100);
  EXPECT_GT((*w)[0].memory_mib, 8000);
  EXPECT_EQ((*w)[1].memory_mib, 60 * 1024);
  EXPECT_EQ((*w)[1].workers, 4);
}

// Every error names the file, the line and the field path.
TEST(WorkloadYaml, BadInputNamesFileLineAndField) {
  const std::pair<const char*, const char*> cases[] = {
      {"[{name: a, class: magic}]", "bad.yaml:1: workloads[0].class: 'magic' is not one of"},
      {"[{name: a, gpu_fraction: 1.5}]", "bad.yaml:1: workloads[0].gpu_fraction: expected a number in [0.001, 1]"},
      {"[{name: a, replicas: 0}]", "bad.yaml:1: workloads[0].replicas: expected an integer in [1, 100000], got \"0\""},
      {"- name: a\n- name: b\n  replicas: three\n", "bad.yaml:3: workloads[1].replicas: expected an integer"},
      {"- name: a\n  cpu: 1e30\n", "bad.yaml:2: workloads[0].cpu: expected a number in [0, 1000000], got \"1e30\""},
      {"- name: a\n  memory_mib: 9223372036854775808\n", "bad.yaml:2: workloads[0].memory_mib: expected an integer"},
      {"- name: a\n  duration_s: .inf\n", "bad.yaml:2: workloads[0].duration_s: expected an integer"},
      {"- name: a\n  host_memory_gib: .nan\n", "bad.yaml:2: workloads[0].host_memory_gib: expected a number"},
      {"[{name: a, memory: {params_billion: 7, precision: fp3}}]", "bad.yaml:1: workloads[0].memory.precision: 'fp3'"},
      {"[{name: a, memory: {params_billion: -7}}]", "bad.yaml:1: workloads[0].memory.params_billion: expected a number"},
      {"[{name: a, memory: {params_billion: 7, zero_stage: 4}}]", "workloads[0].memory.zero_stage: expected an integer in [0, 3]"},
      {"[{name: a, memory: [1]}]", "bad.yaml:1: workloads[0].memory: expected a map, got a list"},
      {"[{name: a, class: training, workers: 2, gpus_per_worker: 0}]",
       "workloads[0].workers: a gang (workers > 1) needs whole GPUs"},
      {"[{name: a}, {name: a}]", "bad.yaml:1: workloads[1].name: duplicate workload name 'a'"},
      {"- name: a\n  gpus: 3\n", "bad.yaml:2: workloads[0].gpus: unknown field"},
      {"[{name: a, gpu_kinds: h100}]", "bad.yaml:1: workloads[0].gpu_kinds: expected a list, got \"h100\""},
      {"[{name: a, gpu_kinds: [[h100]]}]", "bad.yaml:1: workloads[0].gpu_kinds[0]: expected text, got a list"},
      {"[{name: a, checkpointable: {k: v}}]", "bad.yaml:1: workloads[0].checkpointable: expected true or false"},
      {"[{name: {k: v}}]", "bad.yaml:1: workloads[0].name: expected text, got a map"},
      {"[3]", "bad.yaml:1: workloads[0]: expected a map"},
      {"{foo: 1}", "bad.yaml:1: expected a list of workloads"},
      {"workloads: 3", "bad.yaml:1: workloads: expected a list"},
      {"workloads: []\nextra: 1\n", "bad.yaml:2: extra: unknown field"},
      {"just a string", "bad.yaml:1: expected a list of workloads"},
      {"[{name: a", "bad.yaml:1: YAML syntax error"},
  };
  for (const auto& [yaml, expect] : cases) {
    auto w = LoadWorkloadsYaml(yaml, "bad.yaml");
    ASSERT_FALSE(w.ok()) << yaml;
    EXPECT_NE(w.error().find(expect), std::string::npos) << yaml << "\n got: " << w.error();
  }
}

}  // namespace
}  // namespace tessera
