#include "sim/trace.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <set>

namespace tessera {
namespace {

using nlohmann::json;

const std::set<std::string> kJobFields = {
    "id",          "submit_s",        "class",      "team",       "priority",       "tasks",
    "gpus_per_task", "compute_milli", "memory_mib", "cpu_milli",  "host_memory_mib", "gpu_kinds",
    "duration_s",  "grad_bytes",      "step_compute_s", "checkpointable", "params_billion", "precision",
    "light"};

template <typename T>
Status Get(const json& j, const char* key, T* out, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end()) return Status::Ok();
  try {
    *out = it->get<T>();
  } catch (const json::exception&) {
    return Status::Error(fmt::format("{}: field '{}': wrong type ({})", where, key, it->dump()));
  }
  return Status::Ok();
}

#define TRY(expr)              \
  do {                         \
    Status _s = (expr);        \
    if (!_s.ok()) return _s;   \
  } while (0)

}  // namespace

Result<Request> ToRequest(const TraceJob& job, const Catalog& catalog) {
  Request r;
  r.id = job.id;
  r.cls = job.cls;
  r.tasks = job.tasks;
  r.gpus_per_task = job.gpus_per_task;
  r.gpu_milli = job.gpus_per_task == 0 ? std::clamp(job.compute_milli, 1, kMilliPerGpu) : kMilliPerGpu;
  r.gpu_memory_mib = job.memory_mib;
  r.cpu_milli = job.cpu_milli;
  r.host_memory_mib = job.host_memory_mib;
  r.priority = job.priority;
  for (const std::string& k : job.gpu_kinds) {
    KindId id = catalog.Find(k);
    if (id == kNone) return Status::Error(fmt::format("job {}: field 'gpu_kinds': unknown GPU kind '{}'", job.id, k));
    if (id >= 64) return Status::Error(fmt::format("job {}: more than 64 GPU kinds", job.id));
    r.kind_mask |= uint64_t{1} << id;
  }
  return r;
}

std::string TraceHeaderJson(std::string_view provenance_json) {
  json h = json::object();
  if (!provenance_json.empty()) {
    json p = json::parse(provenance_json, nullptr, false);
    if (p.is_object()) h = p;
  }
  h["format"] = "tessera-trace";
  h["version"] = kTraceVersion;
  return h.dump();
}

std::string TraceJobToJson(const TraceJob& j) {
  json o;
  o["id"] = j.id;
  o["submit_s"] = j.submit_s;
  o["class"] = WorkloadClassName(j.cls);
  o["team"] = j.team;
  if (j.priority) o["priority"] = j.priority;
  o["tasks"] = j.tasks;
  o["gpus_per_task"] = j.gpus_per_task;
  o["compute_milli"] = j.compute_milli;
  o["memory_mib"] = j.memory_mib;
  if (j.cpu_milli) o["cpu_milli"] = j.cpu_milli;
  if (j.host_memory_mib) o["host_memory_mib"] = j.host_memory_mib;
  if (!j.gpu_kinds.empty()) o["gpu_kinds"] = j.gpu_kinds;
  o["duration_s"] = j.duration_s;
  if (j.grad_bytes > 0) o["grad_bytes"] = j.grad_bytes;
  if (j.step_compute_s > 0) o["step_compute_s"] = j.step_compute_s;
  if (j.checkpointable) o["checkpointable"] = true;
  if (j.params_billion > 0) o["params_billion"] = j.params_billion;
  if (!j.precision.empty()) o["precision"] = j.precision;
  if (j.light) o["light"] = true;
  return o.dump();
}

std::string WriteTrace(const std::vector<TraceJob>& jobs, std::string_view provenance_json) {
  std::string out = TraceHeaderJson(provenance_json);
  out += '\n';
  for (const TraceJob& j : jobs) {
    out += TraceJobToJson(j);
    out += '\n';
  }
  return out;
}

Result<std::vector<TraceJob>> ReadTrace(std::string_view text, std::string_view source) {
  std::vector<TraceJob> jobs;
  size_t pos = 0;
  int line_no = 0;
  bool header = false;
  while (pos <= text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos) {
      if (end == text.size()) break;
      continue;
    }
    const std::string where = fmt::format("{}:{}", source, line_no);
    json j = json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return Status::Error(where + ": not a JSON object");
    if (!header) {
      if (j.value("format", "") != "tessera-trace")
        return Status::Error(where + ": field 'format': the first line must be {\"format\": \"tessera-trace\", \"version\": 1}");
      if (!j.contains("version") || !j["version"].is_number_integer() || j["version"].get<int>() != kTraceVersion)
        return Status::Error(fmt::format("{}: field 'version': expected {}", where, kTraceVersion));
      header = true;
      continue;
    }
    for (auto it = j.begin(); it != j.end(); ++it)
      if (!kJobFields.count(it.key())) return Status::Error(fmt::format("{}: unknown field '{}'", where, it.key()));
    TraceJob t;
    if (!j.contains("id")) return Status::Error(where + ": field 'id': required");
    TRY(Get(j, "id", &t.id, where));
    TRY(Get(j, "submit_s", &t.submit_s, where));
    std::string cls = "inference";
    TRY(Get(j, "class", &cls, where));
    auto c = ParseWorkloadClass(cls);
    if (!c.ok()) return Status::Error(where + ": field 'class': " + c.error());
    t.cls = *c;
    TRY(Get(j, "team", &t.team, where));
    TRY(Get(j, "priority", &t.priority, where));
    TRY(Get(j, "tasks", &t.tasks, where));
    TRY(Get(j, "gpus_per_task", &t.gpus_per_task, where));
    TRY(Get(j, "compute_milli", &t.compute_milli, where));
    TRY(Get(j, "memory_mib", &t.memory_mib, where));
    TRY(Get(j, "cpu_milli", &t.cpu_milli, where));
    TRY(Get(j, "host_memory_mib", &t.host_memory_mib, where));
    TRY(Get(j, "gpu_kinds", &t.gpu_kinds, where));
    TRY(Get(j, "duration_s", &t.duration_s, where));
    TRY(Get(j, "grad_bytes", &t.grad_bytes, where));
    TRY(Get(j, "step_compute_s", &t.step_compute_s, where));
    TRY(Get(j, "checkpointable", &t.checkpointable, where));
    TRY(Get(j, "params_billion", &t.params_billion, where));
    TRY(Get(j, "precision", &t.precision, where));
    TRY(Get(j, "light", &t.light, where));
    if (t.submit_s < 0) return Status::Error(where + ": field 'submit_s': must not be negative");
    if (t.tasks < 1) return Status::Error(where + ": field 'tasks': must be at least 1");
    if (t.gpus_per_task < 0 || t.gpus_per_task > 64) return Status::Error(where + ": field 'gpus_per_task': must be 0..64");
    if (t.gpus_per_task == 0 && t.tasks > 1)
      return Status::Error(where + ": field 'tasks': a sub-GPU job (gpus_per_task 0) has one task");
    if (t.compute_milli < 0 || t.compute_milli > kMilliPerGpu)
      return Status::Error(where + ": field 'compute_milli': must be 0..1000");
    if (t.memory_mib < 0) return Status::Error(where + ": field 'memory_mib': must not be negative");
    if (t.duration_s < -1 || t.duration_s == 0)
      return Status::Error(where + ": field 'duration_s': must be positive (or -1 for runs-forever)");
    if (t.grad_bytes < 0 || t.step_compute_s < 0)
      return Status::Error(where + ": field 'grad_bytes'/'step_compute_s': must not be negative");
    jobs.push_back(std::move(t));
  }
  if (!header) return Status::Error(fmt::format("{}:1: field 'format': empty trace (no header line)", source));
  return jobs;
}

}  // namespace tessera
