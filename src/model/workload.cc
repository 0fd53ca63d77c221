#include "model/workload.h"

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <fmt/format.h>
#include <set>

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

const std::set<std::string> kWorkloadKeys = {
    "name",        "class",          "team",        "project",     "priority_class",       "replicas",
    "workers",     "gpus_per_worker", "gpu_fraction", "gpu_milli", "memory_gib",           "memory_mib",
    "memory",      "cpu",            "host_memory_gib", "gpu_kinds", "checkpoint_interval_s", "duration_s",
    "latency_sensitive", "checkpointable"};
const std::set<std::string> kMemoryKeys = {"params_billion", "precision",      "training",     "optimizer_bytes_per_param",
                                           "zero_stage",     "data_parallel",  "tensor_parallel", "kv_cache_gib",
                                           "activation_gib", "overhead_pct"};

template <typename T>
Status Read(const YAML::Node& n, const char* key, T* out, const std::string& where) {
  if (!n[key]) return Status::Ok();
  try {
    *out = n[key].as<T>();
  } catch (const YAML::Exception&) {
    return Status::Error(fmt::format("{}: field '{}': wrong type ('{}')", where, key,
                                     n[key].IsScalar() ? n[key].Scalar() : "not a scalar"));
  }
  return Status::Ok();
}

#define TESSERA_TRY(expr)        \
  do {                           \
    Status _st = (expr);         \
    if (!_st.ok()) return _st;   \
  } while (0)

Result<Workload> ParseWorkload(const YAML::Node& y, const std::string& where0) {
  if (!y.IsMap()) return Status::Error(where0 + ": expected a map");
  for (auto it = y.begin(); it != y.end(); ++it) {
    std::string k = it->first.as<std::string>();
    if (!kWorkloadKeys.count(k)) return Status::Error(fmt::format("{}: unknown field '{}'", where0, k));
  }
  Workload w;
  TESSERA_TRY(Read(y, "name", &w.name, where0));
  if (w.name.empty()) return Status::Error(where0 + ": field 'name': required");
  const std::string where = fmt::format("{} ('{}')", where0, w.name);
  std::string cls = "inference";
  TESSERA_TRY(Read(y, "class", &cls, where));
  auto c = ParseWorkloadClass(cls);
  if (!c.ok()) return Status::Error(where + ": field 'class': " + c.error());
  w.cls = *c;
  TESSERA_TRY(Read(y, "team", &w.team, where));
  TESSERA_TRY(Read(y, "project", &w.project, where));
  TESSERA_TRY(Read(y, "priority_class", &w.priority_class, where));
  TESSERA_TRY(Read(y, "replicas", &w.replicas, where));
  TESSERA_TRY(Read(y, "workers", &w.workers, where));
  TESSERA_TRY(Read(y, "gpus_per_worker", &w.gpus_per_worker, where));
  double frac = -1;
  TESSERA_TRY(Read(y, "gpu_fraction", &frac, where));
  if (frac >= 0) {
    if (frac <= 0 || frac > 1) return Status::Error(where + ": field 'gpu_fraction': must be in (0, 1]");
    w.gpu_milli = static_cast<int>(std::lround(frac * 1000));
    if (w.gpu_milli < 1000) w.gpus_per_worker = 0;
  }
  TESSERA_TRY(Read(y, "gpu_milli", &w.gpu_milli, where));
  if (y["gpu_milli"] && w.gpu_milli < 1000) w.gpus_per_worker = 0;
  double gib = -1;
  TESSERA_TRY(Read(y, "memory_gib", &gib, where));
  if (gib >= 0) w.memory_mib = static_cast<int64_t>(std::ceil(gib * 1024));
  TESSERA_TRY(Read(y, "memory_mib", &w.memory_mib, where));
  if (y["memory"]) {
    const YAML::Node& m = y["memory"];
    const std::string mw = where + ": memory";
    if (!m.IsMap()) return Status::Error(mw + ": expected a map");
    for (auto it = m.begin(); it != m.end(); ++it) {
      std::string k = it->first.as<std::string>();
      if (!kMemoryKeys.count(k)) return Status::Error(fmt::format("{}: unknown field '{}'", mw, k));
    }
    MemoryDescription d;
    d.training = w.cls == WorkloadClass::kTraining;
    TESSERA_TRY(Read(m, "params_billion", &d.params_billion, mw));
    std::string prec = "bf16";
    TESSERA_TRY(Read(m, "precision", &prec, mw));
    auto p = ParsePrecision(prec);
    if (!p.ok()) return Status::Error(mw + ": field 'precision': " + p.error());
    d.precision = *p;
    TESSERA_TRY(Read(m, "training", &d.training, mw));
    TESSERA_TRY(Read(m, "optimizer_bytes_per_param", &d.optimizer_bytes_per_param, mw));
    TESSERA_TRY(Read(m, "zero_stage", &d.zero_stage, mw));
    TESSERA_TRY(Read(m, "data_parallel", &d.data_parallel, mw));
    TESSERA_TRY(Read(m, "tensor_parallel", &d.tensor_parallel, mw));
    double kv = 0, act = 0;
    TESSERA_TRY(Read(m, "kv_cache_gib", &kv, mw));
    TESSERA_TRY(Read(m, "activation_gib", &act, mw));
    d.kv_cache_mib = static_cast<int64_t>(std::ceil(kv * 1024));
    d.activation_mib = static_cast<int64_t>(std::ceil(act * 1024));
    TESSERA_TRY(Read(m, "overhead_pct", &d.overhead_pct, mw));
    if (d.params_billion <= 0) return Status::Error(mw + ": field 'params_billion': must be > 0");
    if (d.zero_stage < 0 || d.zero_stage > 3) return Status::Error(mw + ": field 'zero_stage': must be 0..3");
    if (d.data_parallel < 1 || d.tensor_parallel < 1)
      return Status::Error(mw + ": fields 'data_parallel'/'tensor_parallel': must be >= 1");
    if (d.overhead_pct < 0 || d.overhead_pct > 200) return Status::Error(mw + ": field 'overhead_pct': 0..200");
    w.memory = d;
    if (!y["memory_mib"] && !y["memory_gib"]) w.memory_mib = EstimateMemoryMib(d);
  }
  double cpu = 0, host_gib = 0;
  TESSERA_TRY(Read(y, "cpu", &cpu, where));
  TESSERA_TRY(Read(y, "host_memory_gib", &host_gib, where));
  w.cpu_milli = static_cast<int64_t>(std::lround(cpu * 1000));
  w.host_memory_mib = static_cast<int64_t>(std::ceil(host_gib * 1024));
  if (y["gpu_kinds"]) {
    if (!y["gpu_kinds"].IsSequence()) return Status::Error(where + ": field 'gpu_kinds': expected a list");
    for (const auto& k : y["gpu_kinds"]) w.gpu_kinds.push_back(k.as<std::string>());
  }
  TESSERA_TRY(Read(y, "checkpoint_interval_s", &w.checkpoint_interval_s, where));
  TESSERA_TRY(Read(y, "duration_s", &w.duration_s, where));
  TESSERA_TRY(Read(y, "latency_sensitive", &w.latency_sensitive, where));
  TESSERA_TRY(Read(y, "checkpointable", &w.checkpointable, where));

  if (w.replicas < 1) return Status::Error(where + ": field 'replicas': must be >= 1");
  if (w.workers < 1) return Status::Error(where + ": field 'workers': must be >= 1");
  if (w.gpus_per_worker < 0 || w.gpus_per_worker > 64)
    return Status::Error(where + ": field 'gpus_per_worker': must be 0..64");
  if (w.gpu_milli < 1 || w.gpu_milli > 1000) return Status::Error(where + ": field 'gpu_milli': must be 1..1000");
  if (w.memory_mib < 0) return Status::Error(where + ": field 'memory_gib': must not be negative");
  if (w.cpu_milli < 0 || w.host_memory_mib < 0) return Status::Error(where + ": cpu/host memory must not be negative");
  if (w.gpus_per_worker == 0 && w.workers > 1)
    return Status::Error(where + ": a gang (workers > 1) needs whole GPUs: MIG slices and shares cannot join NCCL");
  return w;
}

}  // namespace

Result<std::vector<Workload>> LoadWorkloadsYaml(std::string_view text, std::string_view source) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return Status::Error(fmt::format("{}:{}: YAML syntax error: {}", source, e.mark.line + 1, e.msg));
  }
  YAML::Node list = root.IsMap() ? root["workloads"] : root;
  if (!list || !list.IsSequence())
    return Status::Error(fmt::format("{}: expected a list of workloads (or a map with 'workloads:')", source));
  std::vector<Workload> out;
  std::set<std::string> names;
  for (size_t i = 0; i < list.size(); ++i) {
    auto w = ParseWorkload(list[i], fmt::format("{}: workloads[{}]", source, i));
    if (!w.ok()) return w.status();
    if (!names.insert(w->name).second)
      return Status::Error(fmt::format("{}: workloads[{}]: duplicate name '{}'", source, i, w->name));
    out.push_back(std::move(w).value());
  }
  return out;
}

}  // namespace tessera
