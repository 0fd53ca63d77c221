#include "model/workload.h"

#include <cmath>
#include <fmt/format.h>
#include <set>

#include "base/yaml_reader.h"

namespace tessera {

const char* WorkloadClassName(WorkloadClass c) {
  switch (c) {
    case WorkloadClass::kInference: return "inference";
    case WorkloadClass::kBatchInference: return "batch-inference";
    case WorkloadClass::kTraining: return "training";
    case WorkloadClass::kInteractive: return "interactive";
  }
  return "?";
}

Result<WorkloadClass> ParseWorkloadClass(std::string_view s) {
  if (s == "inference") return WorkloadClass::kInference;
  if (s == "batch-inference") return WorkloadClass::kBatchInference;
  if (s == "training") return WorkloadClass::kTraining;
  if (s == "interactive") return WorkloadClass::kInteractive;
  return Status::Error(fmt::format("'{}' is not one of inference, batch-inference, training, interactive", s));
}

Result<Precision> ParsePrecision(std::string_view s) {
  if (s == "fp32") return Precision::kFp32;
  if (s == "bf16" || s == "fp16") return Precision::kBf16;
  if (s == "fp8") return Precision::kFp8;
  if (s == "int8") return Precision::kInt8;
  if (s == "int4") return Precision::kInt4;
  return Status::Error(fmt::format("'{}' is not one of fp32, bf16, fp16, fp8, int8, int4", s));
}

int64_t WeightMilliBytesPerParam(Precision p) {
  switch (p) {
    case Precision::kFp32: return 4000;
    case Precision::kBf16: return 2000;
    case Precision::kFp8:
    case Precision::kInt8: return 1000;
    case Precision::kInt4: return 515;  // 0.5 bytes plus ~3% for scales and zero-points
  }
  return 2000;
}

int64_t EstimateMemoryMib(const MemoryDescription& d) {
  // Bytes per parameter in thousandths, per GPU (hardware-facts.md 5.1).
  const double params = d.params_billion * 1e9;
  double milli_bytes_per_param;
  if (d.training) {
    const int nd = std::max(1, d.data_parallel);
    const double total = d.optimizer_bytes_per_param;  // 16 (ZeRO) or 18
    switch (d.zero_stage) {
      case 1: milli_bytes_per_param = 1000.0 * (4 + (total - 4) / nd); break;
      case 2: milli_bytes_per_param = 1000.0 * (2 + (total - 2) / nd); break;
      case 3: milli_bytes_per_param = 1000.0 * total / nd; break;
      default: milli_bytes_per_param = 1000.0 * total; break;
    }
  } else {
    milli_bytes_per_param = static_cast<double>(WeightMilliBytesPerParam(d.precision));
  }
  const double tp = std::max(1, d.tensor_parallel);
  const double weight_mib = params * milli_bytes_per_param / 1000.0 / tp / (1024.0 * 1024.0);
  const double extra_mib = static_cast<double>(d.training ? d.activation_mib : d.kv_cache_mib);
  const double total = (weight_mib + extra_mib) * (100.0 + d.overhead_pct) / 100.0;
  return static_cast<int64_t>(std::ceil(total));
}

int SmallestCoveringProfile(const GpuKind& kind, int64_t memory_mib, int compute_milli) {
  int best = -1;
  for (int i = 0; i < static_cast<int>(kind.profiles.size()); ++i) {
    const MigProfile& p = kind.profiles[i];
    if (p.media || p.usable_mib < memory_mib || kind.ProfileComputeMilli(i) < compute_milli) continue;
    if (best < 0) {
      best = i;
      continue;
    }
    const MigProfile& b = kind.profiles[best];
    if (std::tie(p.memory_slices, p.compute_slices) < std::tie(b.memory_slices, b.compute_slices)) best = i;
  }
  return best;
}

namespace {

constexpr int64_t kMaxSeconds = int64_t{1} << 40;

// The optional `memory:` description of a workload; `training` defaults to the workload's class.
Status ReadMemory(const YAML::Node& node, std::string_view source, const std::string& path, bool training,
                  MemoryDescription* out) {
  FieldReader m(node, source, path);
  MemoryDescription d;
  d.training = training;
  m.Double("params_billion", &d.params_billion, true, 1e-6, 1e6);
  std::string prec = "bf16";
  m.String("precision", &prec, false);
  if (m.ok()) {
    auto p = ParsePrecision(prec);
    if (p.ok()) d.precision = *p;
    else m.Fail("precision", p.error());
  }
  m.Bool("training", &d.training);
  m.Int("optimizer_bytes_per_param", &d.optimizer_bytes_per_param, false, 1, 64);
  m.Int("zero_stage", &d.zero_stage, false, 0, 3);
  m.Int("data_parallel", &d.data_parallel, false, 1, 1 << 20);
  m.Int("tensor_parallel", &d.tensor_parallel, false, 1, 4096);
  double kv = 0, act = 0;
  m.Double("kv_cache_gib", &kv, false, 0, 1e6);
  m.Double("activation_gib", &act, false, 0, 1e6);
  d.kv_cache_mib = static_cast<int64_t>(std::ceil(kv * 1024));
  d.activation_mib = static_cast<int64_t>(std::ceil(act * 1024));
  m.Int("overhead_pct", &d.overhead_pct, false, 0, 200);
  if (Status st = m.Finish(); !st.ok()) return st;
  *out = d;
  return Status::Ok();
}

}  // namespace

Result<Workload> ParseWorkload(const YAML::Node& y, std::string_view source, const std::string& path) {
  FieldReader r(y, source, path);
  Workload w;
  r.String("name", &w.name, true);
  if (r.ok() && w.name.empty()) r.Fail("name", "must not be empty");
  std::string cls = "inference";
  r.String("class", &cls, false);
  if (r.ok()) {
    auto c = ParseWorkloadClass(cls);
    if (c.ok()) w.cls = *c;
    else r.Fail("class", c.error());
  }
  r.String("team", &w.team, false);
  r.String("project", &w.project, false);
  r.String("priority_class", &w.priority_class, false);
  r.Int("replicas", &w.replicas, false, 1, 100000);
  r.Int("workers", &w.workers, false, 1, 100000);
  r.Int("gpus_per_worker", &w.gpus_per_worker, false, 0, 64);
  double frac = -1;
  r.Double("gpu_fraction", &frac, false, 1e-3, 1);
  if (frac > 0) {
    w.gpu_milli = static_cast<int>(std::lround(frac * 1000));
    if (w.gpu_milli < 1000) w.gpus_per_worker = 0;
  }
  if (r.Has("gpu_milli")) {
    r.Int("gpu_milli", &w.gpu_milli, false, 1, 1000);
    if (w.gpu_milli < 1000) w.gpus_per_worker = 0;
  }
  double gib = -1;
  r.Double("memory_gib", &gib, false, 0, 1e6);
  if (gib >= 0) w.memory_mib = static_cast<int64_t>(std::ceil(gib * 1024));
  r.Int("memory_mib", &w.memory_mib, false, 0, int64_t{1} << 30);
  if (const YAML::Node m = r.Child("memory"); r.ok() && m.IsDefined()) {
    MemoryDescription d;
    if (Status st = ReadMemory(m, source, r.PathOf("memory"), w.cls == WorkloadClass::kTraining, &d); !st.ok())
      return st;
    w.memory = d;
    if (!r.Has("memory_mib") && !r.Has("memory_gib")) w.memory_mib = EstimateMemoryMib(d);
  }
  double cpu = 0, host_gib = 0;
  r.Double("cpu", &cpu, false, 0, 1e6);
  r.Double("host_memory_gib", &host_gib, false, 0, 1e8);
  w.cpu_milli = static_cast<int64_t>(std::lround(cpu * 1000));
  w.host_memory_mib = static_cast<int64_t>(std::ceil(host_gib * 1024));
  r.StringList("gpu_kinds", &w.gpu_kinds, false);
  r.Int("checkpoint_interval_s", &w.checkpoint_interval_s, false, 0, kMaxSeconds);
  r.Int("duration_s", &w.duration_s, false, 0, kMaxSeconds);
  r.Bool("latency_sensitive", &w.latency_sensitive);
  r.Bool("checkpointable", &w.checkpointable);
  if (r.ok() && w.gpus_per_worker == 0 && w.workers > 1)
    r.Fail("workers", "a gang (workers > 1) needs whole GPUs: MIG slices and shares cannot join NCCL");
  if (Status st = r.Finish(); !st.ok()) return st;
  return w;
}

Result<std::vector<Workload>> LoadWorkloadsYaml(std::string_view text, std::string_view source) {
  auto parsed = ParseYaml(text, source);
  if (!parsed.ok()) return parsed.status();
  const YAML::Node root = *parsed;
  YAML::Node list(YAML::NodeType::Undefined);
  if (root.IsMap()) {
    FieldReader top(root, source, "");
    if (!top.Has("workloads"))
      return Status::Error(YamlWhere(source, root, "") + ": expected a list of workloads (or a map with 'workloads:')");
    list.reset(top.Seq("workloads", /*required=*/true));
    if (Status st = top.Finish(); !st.ok()) return st;
  } else if (root.IsSequence()) {
    list.reset(root);
  } else {
    return Status::Error(YamlWhere(source, root, "") + ": expected a list of workloads (or a map with 'workloads:')");
  }
  std::vector<Workload> out;
  std::set<std::string> names;
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string path = fmt::format("workloads[{}]", i);
    auto w = ParseWorkload(list[i], source, path);
    if (!w.ok()) return w.status();
    if (!names.insert(w->name).second)
      return Status::Error(
          fmt::format("{}: duplicate workload name '{}'", YamlWhere(source, list[i], path + ".name"), w->name));
    out.push_back(std::move(w).value());
  }
  return out;
}

}  // namespace tessera
