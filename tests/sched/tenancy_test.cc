// Tenancy files: every error names the file, the line and the field path; no value crashes the reader.
#include "sched/tenancy.h"

#include <gtest/gtest.h>

#include <string>

#include "base/yaml_reader.h"

namespace tessera {
namespace {

TEST(TenancyYaml, BadInputNamesFileLineAndField) {
  struct Case {
    const char* yaml;
    const char* expect;
  } cases[] = {
      {"teams:\n  - {name: a, guaranteed_gpus: -1}\n",
       "t.yaml:2: teams[0].guaranteed_gpus: expected a number in [0, 1000000]"},
      {"teams:\n  - {name: a, guaranteed_gpus: 1e30}\n",
       "t.yaml:2: teams[0].guaranteed_gpus: expected a number"},
      {"teams:\n  - {name: a, limit_gpus: .nan}\n", "t.yaml:2: teams[0].limit_gpus: expected a number"},
      {"teams:\n  - {name: a, weight: 9223372036854775808}\n",
       "t.yaml:2: teams[0].weight: expected an integer"},
      {"teams:\n  - {name: a, weight: [x, [y]]}\n",
       "t.yaml:2: teams[0].weight: expected an integer in [0, 1000000], got a list"},
      {"teams:\n  - {name: [a]}\n", "t.yaml:2: teams[0].name: expected text, got a list"},
      {"teams:\n  - {guaranteed_gpus: 1}\n", "t.yaml:2: teams[0].name: required"},
      {"teams:\n  - name: a\n    queues:\n      - {name: q, weight: {k: v}}\n",
       "t.yaml:4: teams[0].queues[0].weight: expected an integer"},
      {"teams:\n  - name: a\n    queues: {name: q}\n",
       "t.yaml:3: teams[0].queues: expected a list, got a map"},
      {"teams:\n  - name: a\n    projects:\n      - name: p\n        projects: [{name: x}]\n",
       "t.yaml:5: teams[0].projects[0].projects: projects belong to teams"},
      {"teams:\n  - {name: a, gpu_kinds: {z100: {limit_gpus: 1}}}\n",
       "t.yaml:2: teams[0].gpu_kinds.z100: unknown GPU kind 'z100'"},
      {"teams:\n  - {name: a, gpu_kinds: {h100-80gb: {limit_gpus: x}}}\n",
       "t.yaml:2: teams[0].gpu_kinds.h100-80gb.limit_gpus: expected a number"},
      {"teams:\n  - {name: a, gpu_kinds: [h100]}\n",
       "t.yaml:2: teams[0].gpu_kinds: expected a map, got a list"},
      {"teams: []\n", "t.yaml:1: teams: expected a non-empty list"},
      {"teams: 3\n", "t.yaml:1: teams: expected a list"},
      {"organisation: acme\n", "t.yaml:1: teams: required"},
      {"slice_units: bytes\nteams: [{name: a}]\n",
       "t.yaml:1: slice_units: expected one of compute, memory, got \"bytes\""},
      {"fair_share: {half_life_hours: .inf}\nteams: [{name: a}]\n",
       "t.yaml:1: fair_share.half_life_hours: expected a number"},
      {"fair_share: {history_weight: 2}\nteams: [{name: a}]\n",
       "t.yaml:1: fair_share.history_weight: expected a number in [0, 1]"},
      {"fair_share: [1]\nteams: [{name: a}]\n", "t.yaml:1: fair_share: expected a map, got a list"},
      {"preemption: {grace_s: -5}\nteams: [{name: a}]\n",
       "t.yaml:1: preemption.grace_s: expected an integer in [0,"},
      {"preemption: {enabled: perhaps}\nteams: [{name: a}]\n",
       "t.yaml:1: preemption.enabled: expected true or false"},
      {"backfill: {reservations: 0x7fffffff}\nteams: [{name: a}]\n",
       "t.yaml:1: backfill.reservations: expected an integer in [0, 100000]"},
      {"backfill: {typo: 1}\nteams: [{name: a}]\n", "t.yaml:1: backfill.typo: unknown field"},
      {"teams: [{name: a}]\npriority_classes: [{name: x}]\n",
       "t.yaml:2: priority_classes[0].value: required"},
      {"teams: [{name: a}]\npriority_classes: [{name: x, value: 1, preemption: sometimes}]\n",
       "t.yaml:2: priority_classes[0].preemption: expected one of never, lower-priority, allowed"},
      {"teams: [{name: a}]\npriority_classes: [{name: x, value: 1, preempts: never}]\n",
       "t.yaml:2: priority_classes[0].preempts: expected true or false"},
      {"teams: [{name: a}]\npriority_classes: {name: x}\n",
       "t.yaml:2: priority_classes: expected a list, got a map"},
      {"teams: [{name: a}]\ncolour: red\n", "t.yaml:2: colour: unknown field"},
      {"teams: &a [*a]\n", "t.yaml:1: teams[0]: expected a map, got a list"},
      {"teams: [{name: a\n", "t.yaml:2: YAML syntax error"},
      {"- a\n- b\n", "t.yaml:1: expected a map, got a list"},
  };
  for (const Case& c : cases) {
    auto r = ParseTenancyYaml(c.yaml, "t.yaml", Catalog::Default());
    ASSERT_FALSE(r.ok()) << c.yaml;
    EXPECT_NE(r.error().find(c.expect), std::string::npos) << c.yaml << "\n got: " << r.error();
  }
}

// A class's `preempts: false` (never a preemptor) reads on a new class and on a default one, leaving the
// other classes and the rules of being a victim as they were.
TEST(TenancyYaml, ClassesThatNeverPreempt) {
  auto r = ParseTenancyYaml(
      "teams: [{name: a}]\npriority_classes:\n  - {name: eval, value: 500, preempts: false}\n"
      "  - {name: training, preempts: false}\n",
      "t.yaml", Catalog::Default());
  ASSERT_TRUE(r.ok()) << r.error();
  const PriorityClass* eval = r->FindClass("eval");
  ASSERT_NE(eval, nullptr);
  EXPECT_FALSE(eval->preempts);
  EXPECT_TRUE(eval->preemptible);
  EXPECT_EQ(eval->value, 500);
  EXPECT_FALSE(r->FindClass("training")->preempts);
  EXPECT_EQ(r->FindClass("training")->value, 400);
  EXPECT_TRUE(r->FindClass("inference")->preempts);
}

TEST(TenancyYaml, SectionOfAnotherFileKeepsItsLinesAndPrefix) {
  auto root = ParseYaml("name: s\ntenancy:\n  teams:\n    - {name: a, weight: -1}\n", "s.yaml");
  ASSERT_TRUE(root.ok());
  auto r = ParseTenancyNode((*root)["tenancy"], "s.yaml", "tenancy", Catalog::Default());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("s.yaml:4: tenancy.teams[0].weight: expected an integer in [0, 1000000]"), std::string::npos)
      << r.error();
}

}  // namespace
}  // namespace tessera
