// Tessera trace format: round trip and bad-input table; DLRM reader: bad-input table and the real trace.
#include "sim/trace.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <nlohmann/json.hpp>

#include "sim/dlrm.h"
#include "sim/generator.h"
#include "testing/paths.h"

namespace tessera {
namespace {

TEST(TraceTest, RoundTrip) {
  GeneratorConfig g;
  ArrivalConfig a;
  a.process = "poisson";
  const auto jobs = GenerateJobs(g, a, 64, 48 * 3600, 3);
  ASSERT_GT(jobs.size(), 10u);
  auto back = ReadTrace(WriteTrace(jobs, R"({"seed": 3})"), "t.jsonl");
  ASSERT_TRUE(back.ok()) << back.error();
  ASSERT_EQ(back->size(), jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) EXPECT_EQ(TraceJobToJson((*back)[i]), TraceJobToJson(jobs[i]));
}

// cancel_s (seconds after arrival) is read and written back; a job without one writes none.
TEST(TraceTest, CancelAfterArrivalRoundTrips) {
  const std::string text = "{\"format\": \"tessera-trace\", \"version\": 1}\n"
                           "{\"id\": 1, \"duration_s\": 600, \"cancel_s\": 120}\n"
                           "{\"id\": 2, \"duration_s\": 600, \"cancel_s\": 0}\n"
                           "{\"id\": 3, \"duration_s\": 600}\n";
  auto jobs = ReadTrace(text, "t.jsonl");
  ASSERT_TRUE(jobs.ok()) << jobs.error();
  ASSERT_EQ(jobs->size(), 3u);
  EXPECT_EQ((*jobs)[0].cancel_s, 120);
  EXPECT_EQ((*jobs)[1].cancel_s, 0);
  EXPECT_EQ((*jobs)[2].cancel_s, -1);
  EXPECT_EQ(nlohmann::json::parse(TraceJobToJson((*jobs)[0])).value("cancel_s", -7), 120);
  EXPECT_FALSE(nlohmann::json::parse(TraceJobToJson((*jobs)[2])).contains("cancel_s"));
  auto back = ReadTrace(WriteTrace(*jobs, "{}"), "t.jsonl");
  ASSERT_TRUE(back.ok()) << back.error();
  for (size_t i = 0; i < jobs->size(); ++i) EXPECT_EQ((*back)[i].cancel_s, (*jobs)[i].cancel_s);
}

TEST(TraceTest, BadInputTable) {
  const std::string h = "{\"format\": \"tessera-trace\", \"version\": 1}\n";
  struct Case {
    std::string text, expect;
  } cases[] = {
      {"", "t.jsonl:1: field 'format'"},
      {"{\"format\": \"other\", \"version\": 1}\n", "t.jsonl:1: field 'format'"},
      {"{\"format\": \"tessera-trace\", \"version\": 9}\n", "t.jsonl:1: field 'version'"},
      {h + "not json\n", "t.jsonl:2:2: not a JSON object"},
      {h + "{\"submit_s\": 1}\n", "t.jsonl:2: field 'id': required"},
      {h + "{\"id\": 1, \"colour\": 1}\n", "t.jsonl:2: unknown field 'colour'"},
      {h + "{\"id\": 1, \"duration_s\": 5}\n{\"id\": \"x\"}\n", "t.jsonl:3: field 'id': wrong type"},
      {h + "{\"id\": 1, \"class\": \"gaming\", \"duration_s\": 5}\n", "t.jsonl:2: field 'class'"},
      {h + "{\"id\": 1, \"tasks\": 0, \"duration_s\": 5}\n", "t.jsonl:2: field 'tasks'"},
      {h + "{\"id\": 1, \"tasks\": 2, \"gpus_per_task\": 0, \"duration_s\": 5}\n", "t.jsonl:2: field 'tasks'"},
      {h + "{\"id\": 1, \"compute_milli\": 1200, \"duration_s\": 5}\n", "t.jsonl:2: field 'compute_milli'"},
      {h + "{\"id\": 1, \"memory_mib\": -1, \"duration_s\": 5}\n", "t.jsonl:2: field 'memory_mib'"},
      {h + "{\"id\": 1, \"duration_s\": 0}\n", "t.jsonl:2: field 'duration_s'"},
      {h + "{\"id\": 1, \"submit_s\": -5, \"duration_s\": 5}\n", "t.jsonl:2: field 'submit_s'"},
      // Numbers are range-checked before any cast: huge, fractional, float-typed and wrong-typed values.
      {h + "{\"id\": 1, \"submit_s\": 1e308, \"duration_s\": 5}\n",
       "t.jsonl:2: field 'submit_s': must be an integer in 0..3153600000, got 1e+308"},
      {h + "{\"id\": 1, \"tasks\": 99999999999999999999999, \"duration_s\": 5}\n", "t.jsonl:2: field 'tasks': must be an integer"},
      {h + "{\"id\": 18446744073709551615, \"duration_s\": 5}\n", "t.jsonl:2: field 'id': must be an integer"},
      {h + "{\"id\": 9.3e18, \"duration_s\": 5}\n", "t.jsonl:2: field 'id': must be an integer"},
      {h + "{\"id\": 1, \"priority\": 4294967297, \"duration_s\": 5}\n", "t.jsonl:2: field 'priority': must be an integer"},
      {h + "{\"id\": 1, \"duration_s\": 0.5}\n", "t.jsonl:2: field 'duration_s': must be an integer"},
      {h + "{\"id\": 1, \"duration_s\": -2}\n", "t.jsonl:2: field 'duration_s': must be an integer in -1.."},
      {h + "{\"id\": 1, \"gpus_per_task\": 65, \"duration_s\": 5}\n", "t.jsonl:2: field 'gpus_per_task'"},
      {h + "{\"id\": 1, \"memory_mib\": \"x\", \"duration_s\": 5}\n", "t.jsonl:2: field 'memory_mib': wrong type (\"x\")"},
      {h + "{\"id\": 1, \"cpu_milli\": null, \"duration_s\": 5}\n", "t.jsonl:2: field 'cpu_milli': wrong type (null)"},
      {h + "{\"id\": 1, \"grad_bytes\": 1e400, \"duration_s\": 5}\n", "t.jsonl:2: not a JSON object: number overflow parsing '1e400'"},
      {h + "{\"id\": 1, \"grad_bytes\": 2e15, \"duration_s\": 5}\n", "t.jsonl:2: field 'grad_bytes': must be in 0..1000000000000000, got 2e+15"},
      {h + "{\"id\": 1, \"step_compute_s\": [], \"duration_s\": 5}\n", "t.jsonl:2: field 'step_compute_s': wrong type"},
      {h + "{\"id\": 1, \"team\": 5, \"duration_s\": 5}\n", "t.jsonl:2: field 'team': wrong type (5)"},
      {h + "{\"id\": 1, \"checkpointable\": 1, \"duration_s\": 5}\n", "t.jsonl:2: field 'checkpointable': wrong type"},
      {h + "{\"id\": 1, \"gpu_kinds\": [1], \"duration_s\": 5}\n", "t.jsonl:2: field 'gpu_kinds': wrong type"},
      {h + "{\"id\": 1, \"cancel_s\": -1, \"duration_s\": 5}\n", "t.jsonl:2: field 'cancel_s': must be an integer in 0.."},
      {h + "{\"id\": 1, \"cancel_s\": \"1h\", \"duration_s\": 5}\n", "t.jsonl:2: field 'cancel_s': wrong type"},
      {h + "{\"id\": 1, \"cancel_s\": 2.5, \"duration_s\": 5}\n", "t.jsonl:2: field 'cancel_s': must be an integer"},
      // Syntax errors give the column; the header's fields are checked for type too.
      {h + "{\"id\": 1, \"duration_s\": nan}\n", "t.jsonl:2:26: not a JSON object: syntax error"},
      {h + "{\"a\": }\n", "t.jsonl:2:"},
      {h + "[]\n", "t.jsonl:2: not a JSON object (a array)"},
      {h + "null\n", "t.jsonl:2: not a JSON object (a null)"},
      {"{\"format\": 1, \"version\": 1}\n", "t.jsonl:1: field 'format'"},
      {"{\"format\": \"tessera-trace\", \"version\": 4294967297}\n", "t.jsonl:1: field 'version'"},
      {"{\"format\": \"tessera-trace\", \"version\": \"1\"}\n", "t.jsonl:1: field 'version'"},
      {"{", "t.jsonl:1:2: not a JSON object"},
  };
  for (const Case& c : cases) {
    auto r = ReadTrace(c.text, "t.jsonl");
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_NE(r.error().find(c.expect), std::string::npos) << r.error() << " / expected " << c.expect;
  }
}

TEST(DlrmTest, ParsesRows) {
  const std::string csv =
      "instance_sn,role,app_name,cpu_request,cpu_limit,gpu_request,gpu_limit,rdma_request,rdma_limit,"
      "memory_request,memory_limit,disk_request,disk_limit,max_instance_per_node,creation_time,scheduled_time,"
      "deletion_time\n"
      "instance_0,HN,app_0,12,12,1,1,25,25,120.0,120.0,640.0,800.0,8,,,\n"
      "instance_1,CN,app_1,96,96,0,0,0,0,400,400,100,100,-1,10,12,500\n"
      "instance_2,HN,app_2,8,8,1,1,25,25,64,64,100,100,2,100,101,400\n";
  auto r = ParseDlrmTrace(csv, "d.csv");
  ASSERT_TRUE(r.ok()) << r.error();
  ASSERT_EQ(r->jobs.size(), 2u);
  EXPECT_EQ(r->cpu_rows, 1);
  EXPECT_EQ(r->jobs[0].submit_s, 0);
  EXPECT_EQ(r->jobs[0].duration_s, -1);
  EXPECT_EQ(r->jobs[0].cpu_milli, 12000);
  EXPECT_EQ(r->jobs[0].host_memory_mib, 120 * 1024);
  EXPECT_EQ(r->jobs[1].submit_s, 100);
  EXPECT_EQ(r->jobs[1].duration_s, 300);
  EXPECT_EQ(r->jobs[1].team, "app_2");
  EXPECT_EQ(r->jobs[1].gpus_per_task, 1);
}

TEST(DlrmTest, BadInputTable) {
  const std::string h =
      "instance_sn,role,app_name,cpu_request,gpu_request,memory_request,creation_time,deletion_time\n";
  struct Case {
    std::string text, expect;
  } cases[] = {
      {"", "d.csv:1: field 'instance_sn'"},
      {"instance_sn,role\n", "d.csv:1: field 'app_name': missing from the header"},
      {h + "i,HN,a,8,1,64,0\n", "d.csv:2: field '(row too short)'"},
      {h + "i,XX,a,8,1,64,0,10\n", "d.csv:2: field 'role'"},
      {h + "i,HN,a,eight,1,64,0,10\n", "d.csv:2: field 'cpu_request'"},
      {h + "i,HN,a,8,2,64,0,10\n", "d.csv:2: field 'gpu_request'"},
      {h + "i,HN,a,8,1,-4,0,10\n", "d.csv:2: field 'memory_request'"},
      {h + "i,HN,a,8,1,64,50,10\n", "d.csv:2: field 'deletion_time'"},
      {h + "i,HN,a,8,1,64,x,10\n", "d.csv:2: field 'creation_time'"},
      {h + "i,HN,\"a\",8,1,64,0,10\n", "d.csv:2: quoted"},
  };
  for (const Case& c : cases) {
    auto r = ParseDlrmTrace(c.text, "d.csv");
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_NE(r.error().find(c.expect), std::string::npos) << r.error() << " / expected " << c.expect;
  }
}

TEST(DlrmTest, RealTrace) {
  const std::string path = ::tessera::testing::SharedDir() + "/traces/alibaba-dlrm-2025/disaggregated_DLRM_trace.csv";
  std::ifstream f(path);
  if (!f) {
    const char* ci = std::getenv("CI");
    if (ci && std::string(ci) == "true") FAIL() << "missing " << path << " (CI=true)";
    GTEST_SKIP() << "missing ../shared/traces/alibaba-dlrm-2025/disaggregated_DLRM_trace.csv";
  }
  std::stringstream ss;
  ss << f.rdbuf();
  auto r = ParseDlrmTrace(ss.str(), path);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->jobs.size(), 7386u);  // HN rows (README)
  EXPECT_EQ(r->cpu_rows, 16485);
}

}  // namespace
}  // namespace tessera
