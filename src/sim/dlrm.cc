#include "sim/dlrm.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <map>
#include <string>

#include "base/file.h"

namespace tessera {
namespace {

std::vector<std::string_view> Split(std::string_view line) {
  std::vector<std::string_view> out;
  size_t pos = 0;
  while (true) {
    size_t c = line.find(',', pos);
    if (c == std::string_view::npos) {
      out.push_back(line.substr(pos));
      break;
    }
    out.push_back(line.substr(pos, c - pos));
    pos = c + 1;
  }
  return out;
}

Status ParseNumber(std::string_view s, double* out, const std::string& where, std::string_view field) {
  const char* b = s.data();
  const char* e = s.data() + s.size();
  auto [p, ec] = std::from_chars(b, e, *out);
  if (ec != std::errc() || p != e || !std::isfinite(*out))
    return Status::Error(fmt::format("{}: field '{}': '{}' is not a number", where, field, s));
  return Status::Ok();
}

}  // namespace

Result<DlrmTrace> ParseDlrmTrace(std::string_view text, std::string_view source, const DlrmOptions& options) {
  DlrmTrace out;
  const std::vector<std::string> needed = {"instance_sn", "role",         "app_name",      "cpu_request",
                                           "gpu_request", "memory_request", "creation_time", "deletion_time"};
  std::map<std::string, size_t> col;
  size_t ncols = 0;
  bool header = false;
  LineReader lines(text);
  std::string_view line;
  while (lines.Next(&line)) {
    if (line.empty()) continue;
    const std::string where = fmt::format("{}:{}", source, lines.line_no());
    if (line.find('"') != std::string_view::npos)
      return Status::Error(where + ": quoted CSV values are not supported by this reader");
    std::vector<std::string_view> f = Split(line);
    if (!header) {
      for (size_t i = 0; i < f.size(); ++i) col[std::string(f[i])] = i;
      for (const std::string& n : needed)
        if (!col.count(n)) return Status::Error(fmt::format("{}: field '{}': missing from the header", where, n));
      ncols = f.size();
      header = true;
      continue;
    }
    if (f.size() != ncols)
      return Status::Error(fmt::format("{}: field '{}': expected {} columns, got {}", where,
                                       f.size() < ncols ? "(row too short)" : "(row too long)", ncols, f.size()));
    auto get = [&](const char* name) { return f[col[name]]; };
    const std::string_view role = get("role");
    if (role != "HN" && role != "CN")
      return Status::Error(fmt::format("{}: field 'role': '{}' is not HN or CN", where, role));
    double cpu = 0, gpu = 0, mem = 0, created = 0, deleted = -1;
    if (Status s = ParseNumber(get("cpu_request"), &cpu, where, "cpu_request"); !s.ok()) return s;
    if (Status s = ParseNumber(get("gpu_request"), &gpu, where, "gpu_request"); !s.ok()) return s;
    if (Status s = ParseNumber(get("memory_request"), &mem, where, "memory_request"); !s.ok()) return s;
    if (!get("creation_time").empty())
      if (Status s = ParseNumber(get("creation_time"), &created, where, "creation_time"); !s.ok()) return s;
    if (!get("deletion_time").empty())
      if (Status s = ParseNumber(get("deletion_time"), &deleted, where, "deletion_time"); !s.ok()) return s;
    if (cpu < 0) return Status::Error(where + ": field 'cpu_request': must not be negative");
    if (mem < 0) return Status::Error(where + ": field 'memory_request': must not be negative");
    if (created < 0) return Status::Error(where + ": field 'creation_time': must not be negative");
    if (gpu != 0 && gpu != 1) return Status::Error(fmt::format("{}: field 'gpu_request': {} is not 0 or 1", where, gpu));
    if (deleted >= 0 && deleted < created)
      return Status::Error(where + ": field 'deletion_time': earlier than creation_time");
    out.trace_end_s = std::max<int64_t>(out.trace_end_s, static_cast<int64_t>(std::max(created, deleted)));
    if (role == "CN" || gpu == 0) {
      ++out.cpu_rows;
      continue;
    }
    TraceJob j;
    j.id = static_cast<int64_t>(out.jobs.size() + out.cpu_rows);
    j.cls = WorkloadClass::kInference;
    j.team = std::string(get("app_name"));
    j.tasks = 1;
    j.gpus_per_task = 1;
    j.compute_milli = options.compute_milli;
    j.memory_mib = options.gpu_memory_mib;
    j.cpu_milli = static_cast<int64_t>(std::llround(cpu * 1000));
    j.host_memory_mib = static_cast<int64_t>(std::llround(mem * 1024));
    j.submit_s = static_cast<int64_t>(created);
    j.duration_s = deleted < 0 ? -1 : std::max<int64_t>(1, static_cast<int64_t>(deleted - created));
    out.jobs.push_back(std::move(j));
  }
  if (!header) return Status::Error(fmt::format("{}:1: field 'instance_sn': empty file (no header)", source));
  return out;
}

}  // namespace tessera
