#include "sim/report.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "base/file.h"
#include "base/stats.h"
#include "sim/metrics.h"

namespace tessera {
namespace {

using nlohmann::json;

Status WriteText(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
  if (!f) return Status::Error("cannot write " + path);
  return Status::Ok();
}

std::vector<std::string> SplitCsvLine(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream ss(line);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(item);
  return out;
}

// Authors' curves: median over seeds of 100 - allocated% at each arrived-load column, default workload.
// A number of a curves file; an error naming the file, the line and the column otherwise.
Result<double> CurveNumber(const std::string& cell, const std::string& path, int line, size_t column) {
  double v = 0;
  const char* b = cell.data();
  auto [p, ec] = std::from_chars(b, b + cell.size(), v);
  if (ec != std::errc() || p != b + cell.size() || !std::isfinite(v))
    return Status::Error(fmt::format("{}:{}: column {}: expected a number, got '{}'", path, line, column + 1, cell));
  return v;
}

// The FGD authors' published curves (analysis_allo_discrete.csv): one row per policy and seed, allocation
// rates from column 6 on, the arrived load in the header. Empty cells are missing points.
Result<json> AuthorsCurves(const std::string& path) {
  Result<std::string> text = ReadFile(path);
  if (!text.ok()) return Status::Error("cannot read the FGD authors' curves: " + text.error());
  std::istringstream f(*text);
  json out = json::object();
  std::string line;
  std::getline(f, line);
  const std::vector<std::string> header = SplitCsvLine(line);
  std::map<std::string, std::vector<std::vector<double>>> rows;
  for (int n = 2; std::getline(f, line); ++n) {
    auto c = SplitCsvLine(line);
    if (c.size() < 6 || c[0] != "openb_pod_list_default") continue;
    std::vector<double> v;
    for (size_t i = 5; i < c.size(); ++i) {
      if (c[i].empty()) {
        v.push_back(NAN);
        continue;
      }
      auto x = CurveNumber(c[i], path, n, i);
      if (!x.ok()) return x.status();
      v.push_back(*x);
    }
    rows[c[1]].push_back(v);
  }
  for (auto& [policy, runs] : rows) {
    json pts = json::array();
    const size_t n = runs.front().size();
    for (size_t i = 0; i < n && 5 + i < header.size(); ++i) {
      std::vector<double> col;
      for (auto& r : runs)
        if (i < r.size() && !std::isnan(r[i])) col.push_back(r[i]);
      if (col.empty()) continue;
      auto x = CurveNumber(header[5 + i], path, 1, 5 + i);
      if (!x.ok()) return x.status();
      pts.push_back({{"x", *x}, {"y", 100.0 - Median(col)}});
    }
    out["authors " + policy] = pts;
  }
  return out;
}

// Our curves (simulate fgd-harness --curves): policy, seed, ..., arrived load %, allocation %.
Result<json> OurCurves(const std::string& path) {
  Result<std::string> text = ReadFile(path);
  if (!text.ok()) return Status::Error("cannot read FGD curves: " + text.error());
  std::istringstream f(*text);
  json out = json::object();
  std::string line;
  std::getline(f, line);
  std::map<std::string, std::map<int, std::map<std::string, double>>> last;  // policy -> bin -> seed -> value
  for (int n = 2; std::getline(f, line); ++n) {
    if (line.empty()) continue;
    auto c = SplitCsvLine(line);
    if (c.size() < 5)
      return Status::Error(fmt::format("{}:{}: expected at least 5 columns, got {}", path, n, c.size()));
    auto load = CurveNumber(c[3], path, n, 3);
    if (!load.ok()) return load.status();
    auto alloc = CurveNumber(c[4], path, n, 4);
    if (!alloc.ok()) return alloc.status();
    if (*load < -1e9 || *load > 1e9)
      return Status::Error(fmt::format("{}:{}: column 4: load {} is out of range", path, n, *load));
    last[c[0]][static_cast<int>(std::floor(*load))][c[1]] = 100.0 - *alloc;
  }
  if (last.empty()) return Status::Error("no FGD curves in " + path);
  for (auto& [policy, bins] : last) {
    json pts = json::array();
    for (auto& [bin, seeds] : bins) {
      std::vector<double> v;
      for (auto& [s, x] : seeds) v.push_back(x);
      pts.push_back({{"x", bin}, {"y", Median(v)}});
    }
    out["ours " + policy] = pts;
  }
  return out;
}

// "45s", "12m", "10.3h": a wait in the unit that reads best.
std::string Wait(double s) {
  if (s < 60) return fmt::format("{:.0f}s", s);
  if (s < 3600) return fmt::format("{:.0f}m", s / 60);
  return fmt::format("{:.1f}h", s / 3600);
}

// Pooled queue delays (seconds) of one class over seeds: p50 and p99; empty = no jobs.
std::vector<double> ClassDelays(const std::vector<RunResult>& runs, const std::string& cls) {
  std::vector<double> d;
  for (const RunResult& r : runs)
    if (auto it = r.by_class.find(cls); it != r.by_class.end())
      d.insert(d.end(), it->second.queue_delays_s.begin(), it->second.queue_delays_s.end());
  return d;
}

std::vector<std::string> ClassesOf(const VariantOutcome& v) {
  std::set<std::string> names;
  for (const auto& runs : v.runs)
    for (const RunResult& r : runs)
      for (const auto& [n, c] : r.by_class)
        if (c.jobs_arrived > 0) names.insert(n);
  return {names.begin(), names.end()};
}

double MeanUtil(const std::vector<RunResult>& runs) {
  std::vector<double> u;
  for (const RunResult& r : runs) u.push_back(r.gpu_utilization);
  return SpreadOf(u).mean;
}

// Utilisation gains over the baseline (k8s-default, else the first policy) that come with a longer median
// wait of some class, said in words.
std::string WaitNotes(const ScenarioOutcome& o, const VariantOutcome& v, const std::vector<std::string>& classes) {
  size_t base = 0;
  for (size_t p = 0; p < o.policies.size(); ++p)
    if (o.policies[p] == "k8s-default") base = p;
  std::string out;
  for (size_t p = 0; p < v.runs.size(); ++p) {
    if (p == base || v.runs[p].empty() || MeanUtil(v.runs[p]) <= MeanUtil(v.runs[base])) continue;
    for (const std::string& c : classes) {
      const double mine = Percentile(ClassDelays(v.runs[p], c), 0.5);
      const double theirs = Percentile(ClassDelays(v.runs[base], c), 0.5);
      if (mine > 1.5 * theirs && mine - theirs > 300)
        out += fmt::format("  note: {} gains {:+.3f} utilisation over {} with a longer {} wait (p50 {} vs {})\n",
                           o.policies[p], MeanUtil(v.runs[p]) - MeanUtil(v.runs[base]), o.policies[base], c,
                           Wait(mine), Wait(theirs));
    }
  }
  return out;
}

// Runs whose backlog ran out before the horizon, said in words: their utilisation is the stream's length.
std::string DryNotes(const ScenarioOutcome& o, const VariantOutcome& v) {
  std::string out;
  for (size_t p = 0; p < v.runs.size(); ++p) {
    int dry = 0;
    int64_t first = INT64_MAX;
    for (const RunResult& r : v.runs[p])
      if (r.backlog_dry_s >= 0) ++dry, first = std::min(first, r.backlog_dry_s);
    if (dry > 0)
      out += fmt::format("  note: {}'s backlog ran out of jobs on {} of {} seeds (first at hour {:.1f}): its "
                         "utilisation is bounded by the stream, not the policy (raise `overload`)\n",
                         o.policies[p], dry, v.runs[p].size(), static_cast<double>(first) / 3600.0);
  }
  return out;
}

// A policy's SLO figure: the largest, over inference classes, of the mean fraction of replica-hours above
// the class's SLO (0 when no class ran replicas).
double SloFigure(const std::vector<RunResult>& runs) {
  std::map<std::string, std::vector<double>> frac;
  for (const RunResult& r : runs)
    for (const auto& [c, t] : r.slo_replica_s) {
      auto v = r.slo_violation_s.find(c);
      if (t > 0) frac[c].push_back(v == r.slo_violation_s.end() ? 0.0 : v->second / t);
    }
  double worst = 0;
  for (const auto& [c, f] : frac) worst = std::max(worst, SpreadOf(f).mean);
  return worst;
}

// The strongest baseline: among the policies other than tessera whose SLO figure is at most tessera's, the
// one of highest mean utilisation (among all others when none qualifies). SIZE_MAX without tessera or
// without another policy.
size_t Strongest(const ScenarioOutcome& o, const VariantOutcome& v, size_t* tessera) {
  *tessera = SIZE_MAX;
  for (size_t p = 0; p < v.runs.size() && p < o.policies.size(); ++p)
    if (o.policies[p] == "tessera" && !v.runs[p].empty()) *tessera = p;
  if (*tessera == SIZE_MAX) return SIZE_MAX;
  const double t_slo = SloFigure(v.runs[*tessera]);
  size_t best = SIZE_MAX, any = SIZE_MAX;
  for (size_t p = 0; p < v.runs.size(); ++p) {
    if (p == *tessera || v.runs[p].empty()) continue;
    if (any == SIZE_MAX || MeanUtil(v.runs[p]) > MeanUtil(v.runs[any])) any = p;
    if (SloFigure(v.runs[p]) <= t_slo + 1e-12 && (best == SIZE_MAX || MeanUtil(v.runs[p]) > MeanUtil(v.runs[best])))
      best = p;
  }
  return best != SIZE_MAX ? best : any;
}

std::string StrongestLine(const ScenarioOutcome& o, const VariantOutcome& v) {
  size_t t = SIZE_MAX;
  const size_t s = Strongest(o, v, &t);
  if (s == SIZE_MAX) return "";
  const double tu = MeanUtil(v.runs[t]), su = MeanUtil(v.runs[s]);
  // OOM kills are no SLO time (a killed replica serves nothing, and is restarted): said beside the figure.
  double ooms = 0;
  for (const RunResult& r : v.runs[s]) ooms += static_cast<double>(r.oom_events) / v.runs[s].size();
  const std::string oom = ooms > 0 ? fmt::format(", {:.0f} OOM kills per run", ooms) : "";
  return fmt::format("  strongest baseline at equal or fewer SLO violations: {} {:.3f} (SLO {:.2f} %{}); tessera "
                     "{:.3f} (SLO {:.2f} %) = {:.2f}x, {:+.3f}\n",
                     o.policies[s], su, 100 * SloFigure(v.runs[s]), oom, tu, 100 * SloFigure(v.runs[t]),
                     su > 0 ? tu / su : 0.0, tu - su);
}

// Among two or more static-mig layouts (static-mig and its variants), the one with the highest utilisation;
// SIZE_MAX otherwise.
size_t BestStatic(const ScenarioOutcome& o, const VariantOutcome& v) {
  size_t best = SIZE_MAX, count = 0;
  for (size_t p = 0; p < v.runs.size() && p < o.bases.size(); ++p) {
    if (v.runs[p].empty() || o.bases[p] != "static-mig") continue;
    ++count;
    if (best == SIZE_MAX || MeanUtil(v.runs[p]) > MeanUtil(v.runs[best])) best = p;
  }
  return count >= 2 ? best : SIZE_MAX;
}

std::string BoundLine(const VariantOutcome& v) {
  if (v.bounds.empty()) return "";
  std::vector<double> b;
  std::map<std::string, int> limits;
  for (const UtilizationBound& x : v.bounds) {
    b.push_back(x.gpu_utilization);
    ++limits[x.limit];
  }
  const Spread s = SpreadOf(b);
  std::string lim;
  for (const auto& [k, n] : limits) lim += fmt::format("{}{} ({} seeds)", lim.empty() ? "" : ", ", k, n);
  return fmt::format("  {:<15} {:>6.3f} [{:.3f},{:.3f}]   upper bound: fractional packing by compute and memory; "
                     "limit: {}\n", "bound", s.mean, s.min, s.max, lim);
}

// The headline table of one variant as data: per policy utilisation, distance to the bound, allocation,
// queue delay per class (p50, p99), OOM, repartitions, mix deviation and cycle; and the bound.
json TableJson(const ScenarioOutcome& o, const VariantOutcome& v) {
  json t;
  t["classes"] = ClassesOf(v);
  t["rows"] = json::array();
  for (size_t p = 0; p < v.runs.size(); ++p) {
    const auto& runs = v.runs[p];
    if (runs.empty()) continue;
    json s = PolicySummary(runs);
    json row = {{"policy", runs.front().policy}, {"util", s["gpu_utilization"]}, {"alloc", s["gpu_allocation"]},
                {"oom", s["oom_events"]["mean"]}, {"mig_rep", s["mig_repartitions"]["mean"]},
                {"mix_dev", s["mix_deviation"]["max"]}, {"train_tput", s["effective_training_throughput"]},
                {"slo", SloFigure(runs)}};
    if (!v.bounds.empty()) row["to_bound"] = SpreadOf(DistanceToBound(v, runs)).mean;
    if (p < o.cycles.size()) row["cycle"] = o.cycles[p].gang_backfill ? "backfill" : "greedy";
    json waits = json::object();
    for (const std::string c : t["classes"]) {
      const std::vector<double> d = ClassDelays(runs, c);
      if (!d.empty()) waits[c] = {Percentile(d, 0.5), Percentile(d, 0.99)};
    }
    row["waits_s"] = waits;
    json by_class = json::object();
    for (const std::string c : t["classes"]) by_class[c] = s["by_class"].contains(c) ? s["by_class"][c]["gpu_utilization"]["mean"] : json(0.0);
    row["util_by_class"] = by_class;
    t["rows"].push_back(row);
  }
  if (!v.bounds.empty()) t["bound"] = BoundJson(v);
  t["notes"] = StrongestLine(o, v) + WaitNotes(o, v, t["classes"]) + DryNotes(o, v);
  return t;
}

json ScenarioCharts(const ReportScenario& rs) {
  const ScenarioOutcome& o = rs.outcome;
  json sc;
  sc["name"] = o.name;
  sc["path"] = rs.path;
  sc["same_cycle"] = SameCycle(o);
  sc["policies"] = o.policies;
  if (rs.is_sweep) {
    json rows = json::array();
    for (const VariantOutcome& v : o.variants) {
      json row = {{"label", v.variant.label}, {"table", TableJson(o, v)}};
      if (!v.bounds.empty()) row["bound"] = BoundJson(v)["gpu_utilization"]["mean"];
      for (const auto& runs : v.runs) {
        if (runs.empty()) continue;
        std::vector<double> u, a;
        for (const RunResult& r : runs) {
          u.push_back(r.gpu_utilization);
          a.push_back(r.gpu_allocation);
        }
        row[runs.front().policy] = {{"util", SpreadOf(u).mean}, {"alloc", SpreadOf(a).mean}};
      }
      rows.push_back(row);
    }
    sc["sweep"] = rows;
    return sc;
  }
  const VariantOutcome& v = o.variants.front();
  sc["table"] = TableJson(o, v);
  if (!v.bounds.empty()) sc["bound_first_seed"] = v.bounds.front().gpu_utilization;
  json series = json::object(), cdf = json::object();
  for (const auto& runs : v.runs) {
    if (runs.empty()) continue;
    const RunResult& r0 = runs.front();
    json alloc = json::array(), util = json::array();
    for (const SamplePoint& p : r0.series) {
      alloc.push_back({{"x", p.t_h}, {"y", p.allocation}});
      util.push_back({{"x", p.t_h}, {"y", p.utilization}});
    }
    series[r0.policy] = {{"alloc", alloc}, {"util", util}};
    for (const std::string& cls : ClassesOf(v)) {
      std::vector<double> d = ClassDelays(runs, cls);
      if (d.empty()) continue;
      std::sort(d.begin(), d.end());
      json pts = json::array();
      const size_t step = std::max<size_t>(1, d.size() / 200);
      for (size_t i = 0; i < d.size(); i += step)
        pts.push_back({{"x", d[i] / 3600.0}, {"y", static_cast<double>(i + 1) / d.size()}});
      pts.push_back({{"x", d.back() / 3600.0}, {"y", 1.0}});
      cdf[cls][r0.policy] = pts;
    }
  }
  sc["series"] = series;
  sc["cdf"] = cdf;
  return sc;
}

const char* kPage = R"HTML(<!doctype html>
<html><head><meta charset="utf-8"><title>Tessera simulation report</title>
<script src="chart.min.js"></script>
<style>body{font-family:sans-serif;max-width:1100px;margin:auto;color:#222}canvas{max-height:360px}
table{border-collapse:collapse;margin:8px 0;font-size:14px}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}
th{background:#f3f3f3}td.l,th.l{text-align:left;white-space:nowrap}tr.bound td{font-style:italic;background:#fafafa}
.swatch{display:inline-block;width:22px;height:0;border-top:3px solid;vertical-align:middle;margin-right:6px}
.note{color:#a33}details{margin:6px 0}</style>
</head><body>
<h1>Tessera simulation report</h1>
<p>Generated by <code>tessera simulate report</code>. Figures: time-averaged over each scenario's measurement
window, mean over seeds [min, max]. <b>bound</b>: the job stream's upper bound on utilisation that no scheduler
can exceed (fractional packing by compute and memory; docs/simulator.md "Upper bound"); <b>to bound</b>: bound
minus the policy's utilisation. Waits: queue delay p50 / p99 per class, pooled over seeds. Each policy keeps one
colour and dash in every chart; the bound is the black dotted line. Definitions: docs/simulator.md. Data:
<a href="results.json">results.json</a>, <a href="runs.csv">runs.csv</a>.</p>
<div id="main"></div>
<script>
const DATA = __DATA__;
const main = document.getElementById('main');
const COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b', '#e377c2', '#17becf', '#bcbd22',
  '#7f7f7f', '#393b79', '#e6550d', '#31a354', '#756bb1', '#843c39', '#3182bd', '#637939', '#de2d26', '#636363', '#fd8d3c'];
const DASHES = [[], [8, 4], [3, 3], [12, 3, 3, 3], [6, 2, 2, 2]];
const STYLE = {};
function style(key) {
  if (!(key in STYLE)) {
    const i = Object.keys(STYLE).length;
    STYLE[key] = {color: COLORS[i % COLORS.length], dash: DASHES[i % DASHES.length]};
  }
  return STYLE[key];
}
for (const sc of DATA.scenarios) for (const p of sc.policies) style(p);
for (const k of Object.keys(DATA.fgd)) style(k.replace(/^ours /, ''));
function el(tag, text, parent) {
  const e = document.createElement(tag); if (text !== undefined) e.textContent = text; (parent || main).appendChild(e);
  return e;
}
function line(key, data, extra) {
  const s = style(key);
  return Object.assign({label: key, data: data, borderColor: s.color, backgroundColor: s.color, borderDash: s.dash,
                        borderWidth: 2, pointRadius: 0, fill: false}, extra || {});
}
function boundLine(y, x0, x1) {
  return {label: 'bound', data: [{x: x0, y: y}, {x: x1, y: y}], borderColor: '#000000', backgroundColor: '#000000',
          borderDash: [2, 3], borderWidth: 1.5, pointRadius: 0};
}
function chart(title, type, data, xl, yl, scales) {
  el('h3', title);
  const wrap = el('div'); wrap.className = 'chart'; wrap.dataset.title = title;
  const c = el('canvas', undefined, wrap);
  const sc = {x: {type: type === 'line' && !data.labels ? 'linear' : 'category', title: {display: true, text: xl}},
              y: {title: {display: true, text: yl}}};
  for (const k in (scales || {})) Object.assign(sc[k], scales[k]);
  return new Chart(c, {type: type, data: data,
    options: {animation: false, responsive: true, parsing: true, elements: {point: {radius: 0}}, scales: sc,
              plugins: {legend: {labels: {usePointStyle: false}}}}});
}
const f3 = x => (x === undefined || x === null) ? '-' : Number(x).toFixed(3);
const spread = s => s ? f3(s.mean) + ' [' + f3(s.min) + ', ' + f3(s.max) + ']' : '-';
function wait(s) {
  if (s === undefined) return '-';
  return s < 60 ? s.toFixed(0) + ' s' : s < 3600 ? (s / 60).toFixed(0) + ' min' : (s / 3600).toFixed(1) + ' h';
}
function table(t, parent) {
  const tab = el('table', undefined, parent);
  const cls = t.classes;
  let h = '<tr><th class="l">policy</th><th>utilisation</th><th>to bound</th><th>allocation</th>' +
    cls.map(c => '<th>' + c + ' wait p50 / p99</th>').join('') +
    '<th>train tput</th><th>OOM</th><th>MIG repartitions</th><th>mix deviation (max)</th>' +
    '<th>replica-hours above SLO (worst class)</th><th>cycle</th></tr>';
  for (const r of t.rows) {
    const s = style(r.policy);
    h += '<tr><td class="l"><span class="swatch" style="border-color:' + s.color + ';border-top-style:' +
      (s.dash.length ? 'dashed' : 'solid') + '"></span>' + r.policy + '</td>' +
      '<td>' + spread(r.util) + '</td><td>' + f3(r.to_bound) + '</td><td>' + spread(r.alloc) + '</td>' +
      cls.map(c => '<td>' + (r.waits_s[c] ? wait(r.waits_s[c][0]) + ' / ' + wait(r.waits_s[c][1]) : '-') + '</td>').join('') +
      '<td>' + Number(r.train_tput).toFixed(1) + '</td><td>' + r.oom + '</td><td>' + Number(r.mig_rep).toFixed(0) +
      '</td><td>' + f3(r.mix_dev) + '</td><td>' + (100 * r.slo).toFixed(2) + ' %</td><td>' + (r.cycle || '') +
      '</td></tr>';
  }
  if (t.bound) {
    const lim = Object.entries(t.bound.limit).map(([k, n]) => k + ' (' + n + ' seeds)').join(', ');
    h += '<tr class="bound"><td class="l"><span class="swatch" style="border-color:#000;border-top-style:dotted"></span>bound</td><td>' +
      spread(t.bound.gpu_utilization) + '</td><td colspan="' + (cls.length + 8) + '" class="l">limit: ' + lim +
      '; offered compute ' + f3(t.bound.offered_compute.mean) + '</td></tr>';
  }
  tab.innerHTML = h;
  if (t.notes) for (const n of t.notes.trim().split('\n')) if (n) el('p', n.trim(), parent).className = 'note';
  return tab;
}
for (const sc of DATA.scenarios) {
  el('h2', sc.name + ' (' + sc.path + ')');
  el('p', sc.same_cycle ? 'Every policy ran the same scheduling cycle.' :
       'ASYMMETRIC run: policies ran different scheduling cycles (column cycle).');
  if (sc.sweep) {
    for (const r of sc.sweep) { el('h4', r.label); table(r.table); }
    const labels = sc.sweep.map(r => r.label);
    const ds = sc.policies.filter(p => sc.sweep[0][p]).map(p => line(p, sc.sweep.map(r => r[p].util), {pointRadius: 3}));
    if (sc.sweep[0].bound !== undefined)
      ds.push({label: 'bound', data: sc.sweep.map(r => r.bound), borderColor: '#000000', backgroundColor: '#000000',
               borderDash: [2, 3], borderWidth: 1.5, pointRadius: 2});
    chart('Utilisation by sweep point', 'line', {labels: labels, datasets: ds}, 'sweep point', 'gpu_utilization');
    continue;
  }
  table(sc.table);
  const pols = Object.keys(sc.series);
  let x1 = 0;
  for (const p of pols) for (const pt of sc.series[p].util) x1 = Math.max(x1, pt.x);
  const util = pols.map(p => line(p, sc.series[p].util));
  if (sc.bound_first_seed !== undefined) util.push(boundLine(sc.bound_first_seed, 0, x1));
  chart('Utilisation over time (first seed)', 'line', {datasets: util}, 'hours', 'gpu_utilization', {y: {min: 0}});
  chart('Allocation over time (first seed)', 'line', {datasets: pols.map(p => line(p, sc.series[p].alloc))},
        'hours', 'gpu_allocation', {y: {min: 0}});
  const cls = sc.table.classes;
  chart('Utilisation by class (mean over seeds)', 'bar', {labels: cls, datasets: sc.table.rows.map(r => {
    const s = style(r.policy);
    return {label: r.policy, data: cls.map(c => r.util_by_class[c]), backgroundColor: s.color, borderColor: s.color};
  })}, 'class', 'share of GPU capacity used', {y: {min: 0}});
  for (const [c, per] of Object.entries(sc.cdf))
    chart('Queue delay CDF: ' + c + ' (all seeds)', 'line', {datasets: Object.entries(per).map(([p, v]) => line(p, v))},
          'hours waited', 'fraction of jobs', {y: {min: 0, max: 1}});
  const d = el('details'); el('summary', 'Text table (as printed by simulate run)', d); el('pre', sc.text, d);
}
const fgdKeys = Object.keys(DATA.fgd);
if (fgdKeys.length) {
  const fgdSets = lo => fgdKeys.map(k => line(k.replace(/^ours /, ''),
    DATA.fgd[k].filter(p => lo === undefined || (p.x >= lo[0] && p.x <= lo[1])), {label: k}));
  chart('Unallocated GPU versus arrived load (openb default trace, median over seeds)', 'line', {datasets: fgdSets()},
        'arrived GPU load (% of capacity)', 'unallocated GPU (% of capacity)');
  let ymin = Infinity, ymax = -Infinity;
  for (const k of fgdKeys) for (const p of DATA.fgd[k]) if (p.x >= 80 && p.x <= 130) { ymin = Math.min(ymin, p.y); ymax = Math.max(ymax, p.y); }
  if (ymin <= ymax) {
    const pad = Math.max(0.5, (ymax - ymin) * 0.05);
    chart('Zoom: 80-130 % arrived load', 'line', {datasets: fgdSets([80, 130])}, 'arrived GPU load (% of capacity)',
          'unallocated GPU (% of capacity)', {x: {min: 80, max: 130}, y: {min: Math.max(0, ymin - pad), max: ymax + pad}});
  }
} else {
  el('p', 'No FGD curves: run `tessera simulate fgd-harness ... --curves curves.csv` and pass --fgd-curves curves.csv.');
}
window.REPORT_STYLE = STYLE;
window.REPORT_READY = true;
</script></body></html>
)HTML";

}  // namespace

std::string TextSummary(const ScenarioOutcome& o, bool is_sweep) {
  std::string out = fmt::format("scenario {} ({} GPUs, {} seeds, {:.1f} s)\n", o.name, o.gpus, o.seeds.size(), o.wall_s);
  const bool same = SameCycle(o);
  if (!o.cycles.empty())
    out += same ? fmt::format("  every policy on the same cycle: {}\n", o.cycles.front().gang_backfill ? "backfill (gang "
                                                                     "reservations, backfill, time limits)" : "greedy")
                : "  ASYMMETRIC run: policies on different cycles (column cycle)\n";
  for (const VariantOutcome& v : o.variants) {
    if (is_sweep) out += v.variant.label + "\n";
    const std::vector<std::string> classes = ClassesOf(v);
    const size_t best_static = BestStatic(o, v);
    std::string wait_head;
    for (const std::string& c : classes) wait_head += fmt::format(" {:>15}", c.substr(0, 9) + " p50/p99");
    out += fmt::format("  {:<15} {:>22} {:>8} {:>22}{} {:>9} {:>5} {:>7} {:>7} {:>7}{}\n", "policy",
                       "utilization mean[min,max]", "to_bound", "allocation mean[min,max]", wait_head, "train_tput",
                       "oom", "mig_rep", "mix_dev", "slo%", same ? "" : "  cycle");
    for (size_t p = 0; p < v.runs.size(); ++p) {
      const auto& runs = v.runs[p];
      if (runs.empty()) continue;
      std::vector<double> u, a, t, oom, rep, dev;
      for (const RunResult& r : runs) {
        u.push_back(r.gpu_utilization);
        a.push_back(r.gpu_allocation);
        t.push_back(r.effective_training_throughput);
        oom.push_back(static_cast<double>(r.oom_events));
        rep.push_back(static_cast<double>(r.mig_repartitions));
        dev.push_back(MixDeviation(r));
      }
      const Spread su = SpreadOf(u), sa = SpreadOf(a);
      const std::string gap = v.bounds.empty() ? "-" : fmt::format("{:.3f}", SpreadOf(DistanceToBound(v, runs)).mean);
      std::string waits;
      for (const std::string& c : classes) {
        const std::vector<double> d = ClassDelays(runs, c);
        waits += fmt::format(" {:>15}", d.empty() ? "-" : Wait(Percentile(d, 0.5)) + "/" + Wait(Percentile(d, 0.99)));
      }
      const std::string cyc = same || p >= o.cycles.size() ? "" : o.cycles[p].gang_backfill ? "  backfill" : "  greedy";
      const std::string name = runs.front().policy + (p == best_static ? "*" : "");
      out += fmt::format("  {:<15} {:>6.3f} [{:.3f},{:.3f}] {:>8}   {:>6.3f} [{:.3f},{:.3f}]{} {:>9.1f} {:>5.1f} {:>7.0f} "
                         "{:>7.3f} {:>7.2f}{}\n",
                         name, su.mean, su.min, su.max, gap, sa.mean, sa.min, sa.max, waits,
                         SpreadOf(t).mean, SpreadOf(oom).mean, SpreadOf(rep).mean, SpreadOf(dev).max,
                         100 * SloFigure(runs), cyc);
    }
    out += BoundLine(v);
    out += StrongestLine(o, v);
    if (best_static != SIZE_MAX) out += "  * the best static-mig layout of this run\n";
    out += WaitNotes(o, v, classes);
    out += DryNotes(o, v);
  }
  return out;
}

Status WriteReport(const ReportInput& in) {
  std::error_code ec;
  std::filesystem::create_directories(in.out_dir, ec);
  if (ec) return Status::Error("cannot create " + in.out_dir + ": " + ec.message());
  std::filesystem::copy_file(in.chartjs_path, std::filesystem::path(in.out_dir) / "chart.min.js",
                             std::filesystem::copy_options::overwrite_existing, ec);
  if (ec)
    return Status::Error(fmt::format("cannot copy Chart.js from {} (install Debian's libjs-chart.js): {}",
                                     in.chartjs_path, ec.message()));
  json data;
  data["scenarios"] = json::array();
  json results = json::array();
  std::string csv;
  for (const ReportScenario& rs : in.outcomes) {
    json sc = ScenarioCharts(rs);
    sc["text"] = TextSummary(rs.outcome, rs.is_sweep);
    data["scenarios"].push_back(sc);
    json r = OutcomeJson(rs.outcome, rs.is_sweep);
    r["path"] = rs.path;
    results.push_back(r);
    std::string c = OutcomeCsv(rs.outcome);
    if (!csv.empty()) c = c.substr(c.find('\n') + 1);
    for (std::istringstream ls(c); ;) {
      std::string line;
      if (!std::getline(ls, line)) break;
      if (line.rfind("variant,", 0) == 0) csv += "scenario," + line + "\n";
      else csv += "\"" + rs.outcome.name + "\"," + line + "\n";
    }
  }
  json fgd = json::object();
  if (!in.fgd_curves_csv.empty()) {
    auto ours = OurCurves(in.fgd_curves_csv);
    if (!ours.ok()) return ours.status();
    fgd = std::move(ours).value();
    if (!in.authors_curves_csv.empty()) {
      auto a = AuthorsCurves(in.authors_curves_csv);
      if (!a.ok()) return a.status();
      for (auto it = a->begin(); it != a->end(); ++it) fgd[it.key()] = it.value();
    }
  }
  data["fgd"] = fgd;
  std::string page = kPage;
  std::string payload = data.dump();
  // Keep "</script>" out of the inline data.
  for (size_t p = 0; (p = payload.find("</", p)) != std::string::npos; p += 3) payload.replace(p, 2, "<\\/");
  page.replace(page.find("__DATA__"), 8, payload);
  const std::filesystem::path dir(in.out_dir);
  if (Status s = WriteText((dir / "index.html").string(), page); !s.ok()) return s;
  if (Status s = WriteText((dir / "results.json").string(), json{{"scenarios", results}}.dump(2)); !s.ok()) return s;
  return WriteText((dir / "runs.csv").string(), csv);
}

}  // namespace tessera
