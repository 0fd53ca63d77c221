#include "sim/trace.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "base/file.h"

namespace tessera {
namespace {

using nlohmann::json;

const std::set<std::string> kJobFields = {
    "id",          "submit_s",        "class",      "team",       "priority",       "tasks",
    "gpus_per_task", "compute_milli", "memory_mib", "cpu_milli",  "host_memory_mib", "gpu_kinds",
    "duration_s",  "grad_bytes",      "step_compute_s", "checkpointable", "params_billion", "precision",
    "light",       "latency_sensitive", "cancel_s"};

// Range limits of the numeric job fields: wide enough for any real trace, narrow enough that the engine's
// int64 sums (submit + duration, tasks * memory) and int casts cannot overflow.
constexpr int64_t kMaxSeconds = int64_t{100} * 365 * 24 * 3600;  // 100 years
constexpr int64_t kMaxMilliOrMib = int64_t{1} << 40;
constexpr int64_t kMaxTasks = 100000;
constexpr int64_t kMaxPriority = 1000000;

Status FieldError(const std::string& where, const char* key, const std::string& what) {
  return Status::Error(fmt::format("{}: field '{}': {}", where, key, what));
}

// An integer field in lo..hi. JSON numbers with a fraction, beyond int64 (read as floating point) or out of
// range are errors; the range is checked before any narrowing cast.
template <typename T>
Status GetInt(const json& j, const char* key, int64_t lo, int64_t hi, T* out, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end()) return Status::Ok();
  const json& v = *it;
  if (!v.is_number()) return FieldError(where, key, fmt::format("wrong type ({}), expected an integer", v.dump()));
  const std::string range = fmt::format("must be an integer in {}..{}, got {}", lo, hi, v.dump());
  int64_t x = 0;
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(hi)) return FieldError(where, key, range);
    x = static_cast<int64_t>(u);
  } else if (v.is_number_integer()) {
    x = v.get<int64_t>();
  } else {
    const double d = v.get<double>();  // 2^63 is exact in a double; int64 holds -2^63 .. 2^63 - 1
    if (!(d >= -0x1p63 && d < 0x1p63) || d != std::floor(d)) return FieldError(where, key, range);
    x = static_cast<int64_t>(d);
  }
  if (x < lo || x > hi) return FieldError(where, key, range);
  *out = static_cast<T>(x);
  return Status::Ok();
}

// A finite number in lo..hi.
Status GetNumber(const json& j, const char* key, double lo, double hi, double* out, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end()) return Status::Ok();
  if (!it->is_number()) return FieldError(where, key, fmt::format("wrong type ({}), expected a number", it->dump()));
  const double d = it->get<double>();
  if (!(d >= lo && d <= hi)) return FieldError(where, key, fmt::format("must be in {}..{}, got {}", lo, hi, it->dump()));
  *out = d;
  return Status::Ok();
}

// A string, a bool or a list of strings: nlohmann's own checked conversion (throws only on a type mismatch).
template <typename T>
Status Get(const json& j, const char* key, T* out, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end()) return Status::Ok();
  try {
    *out = it->get<T>();
  } catch (const json::exception&) {
    return FieldError(where, key, fmt::format("wrong type ({})", it->dump()));
  }
  return Status::Ok();
}

// Parses one line as a JSON object; errors give the column of a syntax error.
Result<json> ParseLine(std::string_view line, const std::string& where) {
  json j;
  try {
    j = json::parse(line);
  } catch (const json::parse_error& e) {
    std::string what = e.what();
    const size_t col = what.find("column ");
    const size_t colon = col == std::string::npos ? std::string::npos : what.find(": ", col);
    if (colon != std::string::npos) what = what.substr(colon + 2);
    return Status::Error(fmt::format("{}:{}: not a JSON object: {}", where, e.byte, what));
  } catch (const json::exception& e) {  // e.g. out_of_range 406: a number beyond double (1e400)
    std::string what = e.what();
    const size_t bracket = what.find("] ");
    return Status::Error(fmt::format("{}: not a JSON object: {}", where, what.substr(bracket == std::string::npos ? 0 : bracket + 2)));
  }
  if (!j.is_object()) return Status::Error(fmt::format("{}: not a JSON object (a {})", where, j.type_name()));
  return j;
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
  r.latency_sensitive = job.latency_sensitive;
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
  if (j.latency_sensitive) o["latency_sensitive"] = true;
  if (j.cancel_s >= 0) o["cancel_s"] = j.cancel_s;
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

namespace {

Status CheckHeader(const json& j, const std::string& where) {
  auto format = j.find("format");
  if (format == j.end() || !format->is_string() || format->get<std::string>() != "tessera-trace")
    return FieldError(where, "format", "the first line must be {\"format\": \"tessera-trace\", \"version\": 1}");
  int version = 0;
  if (!j.contains("version") || !GetInt(j, "version", kTraceVersion, kTraceVersion, &version, where).ok())
    return FieldError(where, "version", fmt::format("expected {}", kTraceVersion));
  return Status::Ok();
}

// Reads the fields of one job line (unknown fields, wrong types and out-of-range numbers are errors).
Status ReadJobFields(const json& j, const std::string& where, TraceJob* t) {
  for (auto it = j.begin(); it != j.end(); ++it)
    if (!kJobFields.count(it.key())) return Status::Error(fmt::format("{}: unknown field '{}'", where, it.key()));
  if (!j.contains("id")) return FieldError(where, "id", "required");
  TRY(GetInt(j, "id", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), &t->id, where));
  TRY(GetInt(j, "submit_s", 0, kMaxSeconds, &t->submit_s, where));
  std::string cls = "inference";
  TRY(Get(j, "class", &cls, where));
  auto c = ParseWorkloadClass(cls);
  if (!c.ok()) return FieldError(where, "class", c.error());
  t->cls = *c;
  TRY(Get(j, "team", &t->team, where));
  TRY(GetInt(j, "priority", -kMaxPriority, kMaxPriority, &t->priority, where));
  TRY(GetInt(j, "tasks", 1, kMaxTasks, &t->tasks, where));
  TRY(GetInt(j, "gpus_per_task", 0, 64, &t->gpus_per_task, where));
  TRY(GetInt(j, "compute_milli", 0, kMilliPerGpu, &t->compute_milli, where));
  TRY(GetInt(j, "memory_mib", 0, kMaxMilliOrMib, &t->memory_mib, where));
  TRY(GetInt(j, "cpu_milli", 0, kMaxMilliOrMib, &t->cpu_milli, where));
  TRY(GetInt(j, "host_memory_mib", 0, kMaxMilliOrMib, &t->host_memory_mib, where));
  TRY(Get(j, "gpu_kinds", &t->gpu_kinds, where));
  TRY(GetInt(j, "duration_s", -1, kMaxSeconds, &t->duration_s, where));
  TRY(GetNumber(j, "grad_bytes", 0, 1e15, &t->grad_bytes, where));
  TRY(GetNumber(j, "step_compute_s", 0, 86400, &t->step_compute_s, where));
  TRY(Get(j, "checkpointable", &t->checkpointable, where));
  TRY(GetNumber(j, "params_billion", 0, 1e5, &t->params_billion, where));
  TRY(Get(j, "precision", &t->precision, where));
  TRY(Get(j, "light", &t->light, where));
  TRY(Get(j, "latency_sensitive", &t->latency_sensitive, where));
  TRY(GetInt(j, "cancel_s", 0, kMaxSeconds, &t->cancel_s, where));
  if (t->gpus_per_task == 0 && t->tasks > 1)
    return FieldError(where, "tasks", "a sub-GPU job (gpus_per_task 0) has one task");
  if (t->duration_s == 0) return FieldError(where, "duration_s", "must be positive (or -1 for runs-forever)");
  return Status::Ok();
}

}  // namespace

Result<std::vector<TraceJob>> ReadTrace(std::string_view text, std::string_view source) {
  std::vector<TraceJob> jobs;
  bool header = false;
  LineReader lines(text);
  std::string_view line;
  while (lines.Next(&line)) {
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
    const std::string where = fmt::format("{}:{}", source, lines.line_no());
    Result<json> j = ParseLine(line, where);
    if (!j.ok()) return j.status();
    if (!header) {
      TRY(CheckHeader(*j, where));
      header = true;
      continue;
    }
    TraceJob t;
    TRY(ReadJobFields(*j, where, &t));
    jobs.push_back(std::move(t));
  }
  if (!header) return Status::Error(fmt::format("{}:1: field 'format': empty trace (no header line)", source));
  return jobs;
}

}  // namespace tessera
