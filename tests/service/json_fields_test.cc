#include "service/json_fields.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <random>
#include <nlohmann/json.hpp>

#include "control/job_table.h"
#include "model/workload_fields.h"
#include "service/workload_json.h"

namespace tessera {
namespace {

// The JSON body as a YAML document (numbers in JSON's spelling), read by the workload file's reader: what
// the API did before it read JSON directly. Both must agree on every body whose values have JSON types.
YAML::Node ToYaml(const nlohmann::json& v) {
  if (v.is_object()) {
    YAML::Node map(YAML::NodeType::Map);
    for (const auto& [k, e] : v.items()) map[k] = ToYaml(e);
    return map;
  }
  if (v.is_array()) {
    YAML::Node seq(YAML::NodeType::Sequence);
    for (const auto& e : v) seq.push_back(ToYaml(e));
    return seq;
  }
  if (v.is_null()) return YAML::Node(YAML::NodeType::Null);
  return YAML::Node(v.is_string() ? v.get<std::string>() : v.dump());
}

Result<Workload> ViaJson(const nlohmann::json& body) {
  JsonFieldReader r(&body, "request", "workloads[0]");
  return ReadWorkloadFields(r);
}

void ExpectSame(const Workload& a, const Workload& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.cls, b.cls);
  EXPECT_EQ(a.team, b.team);
  EXPECT_EQ(a.project, b.project);
  EXPECT_EQ(a.priority_class, b.priority_class);
  EXPECT_EQ(a.replicas, b.replicas);
  EXPECT_EQ(a.workers, b.workers);
  EXPECT_EQ(a.gpus_per_worker, b.gpus_per_worker);
  EXPECT_EQ(a.gpu_milli, b.gpu_milli);
  EXPECT_EQ(a.memory_mib, b.memory_mib);
  ASSERT_EQ(a.memory.has_value(), b.memory.has_value());
  if (a.memory) {
    EXPECT_EQ(a.memory->overhead_pct, b.memory->overhead_pct);
    EXPECT_EQ(a.memory->params_billion, b.memory->params_billion);
    EXPECT_EQ(a.memory->precision, b.memory->precision);
    EXPECT_EQ(a.memory->training, b.memory->training);
    EXPECT_EQ(a.memory->zero_stage, b.memory->zero_stage);
    EXPECT_EQ(a.memory->tensor_parallel, b.memory->tensor_parallel);
    EXPECT_EQ(a.memory->kv_cache_mib, b.memory->kv_cache_mib);
  }
  EXPECT_EQ(a.cpu_milli, b.cpu_milli);
  EXPECT_EQ(a.host_memory_mib, b.host_memory_mib);
  EXPECT_EQ(a.gpu_kinds, b.gpu_kinds);
  EXPECT_EQ(a.checkpoint_interval_s, b.checkpoint_interval_s);
  EXPECT_EQ(a.duration_s, b.duration_s);
  EXPECT_EQ(a.latency_sensitive, b.latency_sensitive);
  EXPECT_EQ(a.checkpointable, b.checkpointable);
}

// A random body: each field present or not, values mostly in range, sometimes out of it, sometimes of the
// wrong JSON type, sometimes an unknown key.
nlohmann::json RandomBody(std::mt19937_64& rng) {
  auto coin = [&](double p) { return std::uniform_real_distribution<double>(0, 1)(rng) < p; };
  auto pick = [&](std::initializer_list<nlohmann::json> v) {
    return *(v.begin() + std::uniform_int_distribution<size_t>(0, v.size() - 1)(rng));
  };
  nlohmann::json b = nlohmann::json::object();
  if (coin(0.95)) b["name"] = pick({"a", "", "job-1"});
  if (coin(0.5)) b["class"] = pick({"inference", "training", "batch-inference", "gpu"});
  if (coin(0.3)) b["team"] = "vision";
  if (coin(0.3)) b["project"] = "p";
  if (coin(0.3)) b["priority_class"] = "production-inference";
  if (coin(0.4)) b["replicas"] = pick({1, 3, 0, 100001, 2.5, "2"});
  if (coin(0.4)) b["workers"] = pick({1, 4, 0});
  if (coin(0.4)) b["gpus_per_worker"] = pick({0, 1, 8, 65, -1});
  if (coin(0.3)) b["gpu_fraction"] = pick({0.5, 1, 0.0001, 2, 0.25});
  if (coin(0.2)) b["gpu_milli"] = pick({250, 1000, 0, 1001});
  if (coin(0.3)) b["memory_gib"] = pick({40, 0.5, -1, 1e7});
  if (coin(0.3)) b["memory_mib"] = pick({1024, 0, -5});
  if (coin(0.3)) {
    nlohmann::json m = nlohmann::json::object();
    if (coin(0.9)) m["params_billion"] = pick({7, 0.5, 0, 70.6});
    if (coin(0.5)) m["precision"] = pick({"bf16", "fp8", "int4", "fp64", 3});
    if (coin(0.3)) m["training"] = pick({true, false, 1});
    if (coin(0.3)) m["zero_stage"] = pick({0, 3, 4});
    if (coin(0.3)) m["tensor_parallel"] = pick({1, 2, 0});
    if (coin(0.3)) m["kv_cache_gib"] = pick({2, 0.25, -1});
    if (coin(0.1)) m["colour"] = "blue";
    b["memory"] = coin(0.95) ? m : nlohmann::json(5);
  }
  if (coin(0.2)) b["cpu"] = pick({4, 0.5, -1});
  if (coin(0.2)) b["host_memory_gib"] = pick({64, 1e9});
  if (coin(0.2))
    b["gpu_kinds"] = pick({nlohmann::json::array({"h100-80gb"}), nlohmann::json::array(), "h100"});
  if (coin(0.2)) b["checkpoint_interval_s"] = pick({600, 0, -1});
  if (coin(0.3)) b["duration_s"] = pick({3600, 0, int64_t{1} << 41});
  if (coin(0.2)) b["latency_sensitive"] = pick({true, false, "yes"});
  if (coin(0.1)) b["checkpointable"] = pick({true, false});
  if (coin(0.05)) b["colour"] = "red";
  return b;
}

// Values whose JSON type the YAML path cannot see (a string "2" reads as an integer in YAML, a list element
// 3 as a string) are outside the equivalence; the API rejects them by type before either reader runs.
bool YamlSeesTheSameTypes(const nlohmann::json& b) {
  if (b.contains("replicas") && b["replicas"].is_string()) return false;
  if (b.contains("latency_sensitive") && b["latency_sensitive"].is_string()) return false;
  if (b.contains("gpu_kinds") && b["gpu_kinds"].is_string()) return false;
  if (b.contains("memory") && b["memory"].is_object()) {
    const nlohmann::json& m = b["memory"];
    if (m.contains("precision") && !m["precision"].is_string()) return false;
    if (m.contains("training") && !m["training"].is_boolean()) return false;
  }
  return true;
}

TEST(JsonFieldReader, ReadsEveryBodyAsTheYamlReaderDoes) {
  std::mt19937_64 rng(20261202);
  int compared = 0, accepted = 0;
  for (int i = 0; i < 5000; ++i) {
    const nlohmann::json b = RandomBody(rng);
    if (!YamlSeesTheSameTypes(b)) continue;
    ++compared;
    auto j = ViaJson(b);
    auto y = ParseWorkload(ToYaml(b), "request", "workloads[0]");
    ASSERT_EQ(j.ok(), y.ok()) << b.dump() << "\njson: " << (j.ok() ? "ok" : j.error())
                              << "\nyaml: " << (y.ok() ? "ok" : y.error());
    if (j.ok()) {
      ++accepted;
      ExpectSame(*j, *y);
    } else {
      EXPECT_EQ(j.error(), y.error()) << b.dump();
    }
  }
  EXPECT_GT(compared, 3000);
  EXPECT_GT(accepted, 200);  // both outcomes are exercised
  EXPECT_LT(accepted, compared - 200);
}

TEST(JsonFieldReader, StrictTypesAndMessages) {
  auto r = ViaJson({{"name", "x"}, {"memory", {{"params_billion", 7}, {"precision", 8}}}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error(), "request: workloads[0].memory.precision: expected a string, got \"8\"");
  r = ViaJson({{"name", "x"}, {"replicas", 1.5}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error(), "request: workloads[0].replicas: expected an integer in [1, 100000], got \"1.5\"");
  r = ViaJson({{"name", "x"}, {"replicas", uint64_t{1} << 63}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("replicas: expected an integer"), std::string::npos);
  r = ViaJson({{"name", "x"}, {"gpu_kinds", {"h100-80gb", 3}}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error(), "request: workloads[0].gpu_kinds[1]: expected a string, got \"3\"");
  r = ViaJson({{"name", "x"}, {"memory", nlohmann::json::array()}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error(), "request: workloads[0].memory: expected a map, got a list");
  r = ViaJson({{"class", "training"}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error(), "request: workloads[0].name: required");
}

TEST(JsonFieldReader, JobSpecKeepsTheBodyAndNamesTheField) {
  auto ok = ParseJobSpec({{"name", "x"}, {"mig_profile", "1g.10gb"}, {"gpu_fraction", 0.1}, {"replicas", 2}});
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok.value().mig_profile, "1g.10gb");
  EXPECT_EQ(ok.value().workload.replicas, 2);
  EXPECT_EQ(ok.value().workload.gpus_per_worker, 0);
  EXPECT_EQ(ok.value().body["mig_profile"], "1g.10gb");
  auto bad = ParseJobSpec({{"name", "x"}, {"gpus_per_worker", 65}});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().field, "gpus_per_worker");
  auto unknown = ParseJobSpec({{"name", "x"}, {"memory", {{"params_billion", 7}, {"colour", "red"}}}});
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.error().message.find("unknown field"), std::string::npos) << unknown.error().message;
  // A name that would reorder what `tessera job list` prints ("evil<RLO>txt.exe") is refused, naming it.
  for (const char* name : {"evil\xe2\x80\xaetxt.exe", "a\xe2\x81\xa7" "b\xe2\x81\xa9", "a\xe2\x80\x8f"}) {
    auto bidi = ParseJobSpec({{"name", name}});
    ASSERT_FALSE(bidi.ok()) << name;
    EXPECT_EQ(bidi.error().field, "name");
  }
}

// A time limit is the user's estimate beside the duration; the cycle plans with their ratio.
TEST(JobSpec, ATimeLimitIsTheUsersEstimate) {
  auto ok = ParseJobSpec({{"name", "t"}, {"duration_s", 1000}, {"time_limit_s", 2500}});
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  EXPECT_EQ(ok->workload.time_limit_s, 2500);
  EXPECT_DOUBLE_EQ(TimeLimitFactor(ok->workload.duration_s, ok->workload.time_limit_s), 2.5);
  EXPECT_DOUBLE_EQ(TimeLimitFactor(1000, 0), 1.0) << "no limit: the duration";
  auto bad = ParseJobSpec({{"name", "t"}, {"time_limit_s", -5}});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().field, "time_limit_s");
  auto text = ParseJobSpec({{"name", "t"}, {"time_limit_s", "1h"}});
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.error().field, "time_limit_s");
}

TEST(JobSpec, AContainerIsCheckedFieldByField) {
  auto ok = ParseJobSpec({{"name", "t"},
                          {"class", "training"},
                          {"container",
                           {{"image", "registry.example/trainer:1.2"},
                            {"command", {"python", "train.py"}},
                            {"args", {"--epochs=3"}},
                            {"env", {{"WANDB_MODE", "offline"}}}}}});
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  EXPECT_EQ(ok->body["container"]["image"], "registry.example/trainer:1.2");
  struct Bad {
    nlohmann::json container;
    std::string field;
  };
  const std::vector<Bad> bad = {
      {{{"command", {"x"}}}, "container.image"},
      {{{"image", ""}}, "container.image"},
      {{{"image", 7}}, "container.image"},
      {{{"image", "a\x1b[31m"}}, "container.image"},
      {{{"image", "a"}, {"command", "python"}}, "container.command"},
      {{{"image", "a"}, {"args", {1}}}, "container.args"},
      {{{"image", "a"}, {"env", {{"A=B", "x"}}}}, "container.env"},
      {{{"image", "a"}, {"env", {{"A", 1}}}}, "container.env.A"},
      {{{"image", "a"}, {"ports", {80}}}, "container.ports"},
  };
  for (const Bad& b : bad) {
    auto r = ParseJobSpec({{"name", "t"}, {"container", b.container}});
    ASSERT_FALSE(r.ok()) << b.container.dump();
    EXPECT_EQ(r.error().field, b.field) << b.container.dump() << ": " << r.error().message;
  }
  auto not_object = ParseJobSpec({{"name", "t"}, {"container", "trainer"}});
  ASSERT_FALSE(not_object.ok());
  EXPECT_EQ(not_object.error().field, "container");
}

}  // namespace
}  // namespace tessera
