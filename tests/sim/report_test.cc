// The report's curves files: unreadable or malformed files are errors naming the file (and line), never
// silently dropped from the charts.
#include "sim/report.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace tessera {
namespace {

std::filesystem::path Dir() {
  auto d = std::filesystem::temp_directory_path() / ("tessera-report-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(d);
  return d;
}

ReportInput Input(const std::string& curves, const std::string& authors = "") {
  ReportInput in;
  in.out_dir = (Dir() / "out").string();
  in.chartjs_path = (Dir() / "chart.js").string();
  std::ofstream(in.chartjs_path) << "// stand-in\n";
  in.fgd_curves_csv = curves;
  in.authors_curves_csv = authors;
  return in;
}

std::string Write(const std::string& name, const std::string& text) {
  const std::string p = (Dir() / name).string();
  std::ofstream(p) << text;
  return p;
}

TEST(ReportCurves, UnreadableOrMalformedCurvesAreErrors) {
  const std::string good = Write("good.csv", "policy,seed,pod,load,alloc\nfgd,42,1,10.5,99\nfgd,42,2,11.2,98\n");
  EXPECT_TRUE(WriteReport(Input(good)).ok());
  Status st = WriteReport(Input((Dir() / "missing.csv").string()));
  EXPECT_NE(st.message().find("cannot read FGD curves: cannot open " + (Dir() / "missing.csv").string() + ": No such file"), std::string::npos) << st.message();
  st = WriteReport(Input(Write("bad.csv", "policy,seed,pod,load,alloc\nfgd,42,1,10.5,99\nfgd,42,2,ten,98\n")));
  EXPECT_NE(st.message().find("bad.csv:3: column 4: expected a number, got 'ten'"), std::string::npos) << st.message();
  st = WriteReport(Input(Write("short.csv", "policy,seed,pod,load,alloc\nfgd,42\n")));
  EXPECT_NE(st.message().find("short.csv:2: expected at least 5 columns"), std::string::npos) << st.message();
  st = WriteReport(Input(Write("empty.csv", "policy,seed,pod,load,alloc\n")));
  EXPECT_NE(st.message().find("no FGD curves in"), std::string::npos) << st.message();
  st = WriteReport(Input(good, (Dir() / "no-authors.csv").string()));
  EXPECT_NE(st.message().find("cannot read the FGD authors' curves: cannot open " + (Dir() / "no-authors.csv").string() + ": No such file"), std::string::npos) << st.message();
  st = WriteReport(Input(good, Write("authors.csv", "a,b,c,d,e,1\nopenb_pod_list_default,fgd,x,y,z,1e999\n")));
  EXPECT_NE(st.message().find("authors.csv:2: column 6: expected a number"), std::string::npos) << st.message();
}

// A curves path that opens but cannot be read as a file (a directory) is an error too, not an empty chart.
TEST(ReportCurves, DirectoryInsteadOfAFileIsAnError) {
  const std::string good = Write("good2.csv", "policy,seed,pod,load,alloc\nfgd,42,1,10.5,99\n");
  const std::string dir = (Dir() / "a-directory").string();
  std::filesystem::create_directories(dir);
  Status st = WriteReport(Input(dir));
  EXPECT_NE(st.message().find("cannot read FGD curves: cannot read " + dir + ": Is a directory"), std::string::npos)
      << st.message();
  st = WriteReport(Input(good, dir));
  EXPECT_NE(st.message().find("cannot read the FGD authors' curves: cannot read " + dir + ": Is a directory"),
            std::string::npos)
      << st.message();
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

RunResult PolicyRun(const std::string& policy, double util, double violation_s) {
  RunResult r;
  r.policy = policy;
  r.gpu_utilization = util;
  r.slo_replica_s["inference"] = 1000;
  r.slo_violation_s["inference"] = violation_s;
  return r;
}

// The strongest baseline is the best utilisation among the policies with no more SLO violation time than
// tessera's; one that buys utilisation with violations is not it.
TEST(ReportHeadline, NamesTheStrongestBaselineAtEqualOrFewerViolations) {
  ScenarioOutcome o;
  o.name = "s";
  o.policies = {"tessera", "hami", "bestfit", "k8s-default"};
  o.bases = o.policies;
  o.cycles.assign(4, CycleSpec{});
  VariantOutcome v;
  v.runs = {{PolicyRun("tessera", 0.70, 30)},
            {PolicyRun("hami", 0.74, 600)},
            {PolicyRun("bestfit", 0.66, 0)},
            {PolicyRun("k8s-default", 0.57, 0)}};
  o.variants = {v};
  const std::string text = TextSummary(o, false);
  EXPECT_NE(text.find("strongest baseline at equal or fewer SLO violations: bestfit 0.660 (SLO 0.00 %); tessera "
                      "0.700 (SLO 3.00 %) = 1.06x, +0.040"),
            std::string::npos)
      << text;
  // Now within tessera's violations: it is the strongest.
  o.variants[0].runs[1] = {PolicyRun("hami", 0.74, 10)};
  EXPECT_NE(TextSummary(o, false).find("baseline at equal or fewer SLO violations: hami 0.740"), std::string::npos);
}

}  // namespace
}  // namespace tessera
