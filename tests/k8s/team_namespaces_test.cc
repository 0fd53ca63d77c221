// The team -> namespace mapping of API jobs: only explicit entries, checked (DNS-1123, no system or
// scheduler namespace), errors naming the entry.
#include "k8s/team_namespaces.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

const std::vector<std::string> kReserved = {"tessera-system", "gpu-operator"};

std::string ErrorOf(const std::string& text) {
  auto m = ParseTeamNamespaces(text, "teams.yaml", kReserved);
  return m.ok() ? "" : m.error();
}

TEST(TeamNamespaces, ExplicitEntriesOnly) {
  auto m = ParseTeamNamespaces("vision: ml-vision\nnlp_2: ml-nlp\n", "teams.yaml", kReserved);
  ASSERT_TRUE(m.ok()) << m.error();
  EXPECT_EQ(*m, (TeamNamespaces{{"vision", "ml-vision"}, {"nlp_2", "ml-nlp"}}));
  EXPECT_EQ(*NamespaceOfTeam(*m, "vision"), "ml-vision");
  auto none = NamespaceOfTeam(*m, "kube-system");
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().find("team 'kube-system' has no namespace"), std::string::npos) << none.error();
  auto json = ParseTeamNamespaces(R"({"vision": "ml-vision"})", "teams.json", kReserved);
  ASSERT_TRUE(json.ok()) << json.error();
  EXPECT_EQ(json->at("vision"), "ml-vision");
  auto empty = ParseTeamNamespaces("", "teams.yaml", kReserved);
  ASSERT_TRUE(empty.ok()) << empty.error();
  EXPECT_TRUE(empty->empty());
  EXPECT_FALSE(NamespaceOfTeam(*empty, "vision").ok()) << "no mapping: every team's API jobs are refused";
}

TEST(TeamNamespaces, SystemAndSchedulerNamespacesAreRefused) {
  for (const std::string ns : {"kube-system", "kube-public", "kube-node-lease", "kube-anything", "default"}) {
    const std::string e = ErrorOf("ops: " + ns + "\n");
    EXPECT_NE(e.find("teams.yaml:1: team 'ops': namespace '" + ns + "'"), std::string::npos) << e;
    EXPECT_NE(e.find("API jobs may not run there"), std::string::npos) << e;
  }
  EXPECT_NE(ErrorOf("a: ml-a\nops: tessera-system\n").find("teams.yaml:2: team 'ops': namespace 'tessera-system' "
                                                            "is a namespace the scheduler itself uses"),
            std::string::npos)
      << ErrorOf("a: ml-a\nops: tessera-system\n");
  EXPECT_NE(ErrorOf("ops: gpu-operator\n").find("the scheduler itself uses"), std::string::npos);
  EXPECT_EQ(NamespaceRefusal("ml-vision", kReserved), "");
  EXPECT_EQ(SchedulerNamespaces("", "tessera-system", "gpu-operator/mig"), kReserved);
  EXPECT_EQ(SchedulerNamespaces("leases", "tessera-system", ""), std::vector<std::string>{"leases"});
  EXPECT_NE(NamespaceRefusal("kube-system", {}), "");
}

TEST(TeamNamespaces, NamesAreDns1123Labels) {
  for (const std::string& ns :
       std::vector<std::string>{"ML", "ml_vision", "-ml", "ml-", "ml.vision", std::string(64, 'a'), "\"\""}) {
    const std::string e = ErrorOf("vision: " + ns + "\n");
    EXPECT_NE(e.find("team 'vision'"), std::string::npos) << ns << ": " << e;
    EXPECT_NE(e.find("DNS-1123"), std::string::npos) << ns << ": " << e;
  }
  EXPECT_EQ(ErrorOf("vision: " + std::string(63, 'a') + "\n"), "");
  EXPECT_NE(ErrorOf("vision:\n").find("teams.yaml:1: team 'vision': expected a namespace name"), std::string::npos)
      << ErrorOf("vision:\n");
  EXPECT_NE(ErrorOf("vision: [a, b]\n").find("expected a namespace name"), std::string::npos);
  EXPECT_NE(ErrorOf("Vision: ml\n").find("team 'Vision': not a team name"), std::string::npos);
  EXPECT_NE(ErrorOf("- vision\n").find("expected a mapping of team: namespace"), std::string::npos);
  EXPECT_NE(ErrorOf("vision: a\nvision: b\n").find("team 'vision'"), std::string::npos) << "a team given twice";
  EXPECT_NE(ErrorOf("vision: [\n").find("YAML syntax error"), std::string::npos);
  EXPECT_FALSE(LoadTeamNamespaces("/nonexistent/teams.yaml", kReserved).ok());
}

}  // namespace
}  // namespace tessera
