#pragma once
// The evaluation report: `tessera simulate report --out DIR` writes DIR/index.html (charts drawn by
// Chart.js, copied from Debian's libjs-chart.js into DIR so the page works offline), DIR/results.json and
// DIR/runs.csv. Charts: allocation and utilisation over time (first seed), queueing-delay CDFs per policy,
// and, when a curves CSV from `simulate fgd-harness --curves` is given, unallocated GPU versus arrived
// load of every policy against the authors' FGD curves
// (../shared/traces/alibaba-gpu-2023/fgd-baseline-results/analysis_allo_discrete.csv).

#include <string>
#include <vector>

#include "base/status.h"
#include "sim/scenario.h"

namespace tessera {

struct ReportScenario {
  std::string path;
  bool is_sweep = false;
  ScenarioOutcome outcome;
};

struct ReportInput {
  std::string out_dir;
  std::vector<ReportScenario> outcomes;
  std::string fgd_curves_csv;       // optional: our harness curves; when set, it must be readable
  std::string authors_curves_csv;   // optional: the FGD authors' curves; when set, it must be readable
  std::string chartjs_path = "/usr/share/javascript/chart.js/chart.min.js";
};

Status WriteReport(const ReportInput& in);

// A plain-text table of an outcome (what `simulate run` prints without --json).
std::string TextSummary(const ScenarioOutcome& o, bool is_sweep);

}  // namespace tessera
