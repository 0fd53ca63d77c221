#include "model/workload.h"

#include <cmath>
#include <fmt/format.h>
#include <set>

#include "base/yaml_reader.h"
#include "model/workload_fields.h"

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

Result<Workload> ParseWorkload(const YAML::Node& y, std::string_view source, const std::string& path) {
  FieldReader r(y, source, path);
  return ReadWorkloadFields(r);
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
