#include "client/format.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <vector>
#include <nlohmann/json.hpp>

#include "base/file.h"
#include "base/utc_time.h"

namespace tessera::client {
namespace {

using Json = nlohmann::json;

Json ScalarToJson(const YAML::Node& n) {
  const std::string& s = n.Scalar();
  if (n.Tag() == "!") return s;  // quoted: a string whatever it reads like
  if (s == "null" || s == "~" || s.empty()) return nullptr;
  if (s == "true" || s == "false") return s == "true";
  Json number = Json::parse(s, nullptr, false);
  if (!number.is_discarded() && number.is_number()) return number;
  return s;
}

Json YamlToJson(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map: {
      Json o = Json::object();
      for (const auto& kv : n) o[kv.first.Scalar()] = YamlToJson(kv.second);
      return o;
    }
    case YAML::NodeType::Sequence: {
      Json a = Json::array();
      for (const auto& e : n) a.push_back(YamlToJson(e));
      return a;
    }
    case YAML::NodeType::Scalar:
      return ScalarToJson(n);
    default:
      return nullptr;
  }
}

// Renders rows under a header, columns left-aligned and two spaces apart.
std::string Table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> w(header.size());
  for (size_t c = 0; c < header.size(); ++c) w[c] = header[c].size();
  for (const auto& r : rows)
    for (size_t c = 0; c < r.size(); ++c) w[c] = std::max(w[c], r[c].size());
  std::string out;
  auto line = [&](const std::vector<std::string>& r) {
    std::string l;
    for (size_t c = 0; c < r.size(); ++c) l += c + 1 == r.size() ? r[c] : fmt::format("{:<{}}  ", r[c], w[c]);
    out += l + "\n";
  };
  line(header);
  for (const auto& r : rows) line(r);
  return out;
}

// Text safe for a terminal: control characters (C0, DEL, C1) as \xNN, so that a name cannot move the
// cursor, clear the screen or retitle the window.
std::string TerminalSafe(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    const bool c1 = c == 0xc2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) >= 0x80 &&
                    static_cast<unsigned char>(s[i + 1]) <= 0x9f;
    if (c < 0x20 || c == 0x7f) {
      out += fmt::format("\\x{:02x}", c);
    } else if (c1) {
      out += fmt::format("\\u{:04x}", static_cast<unsigned char>(s[++i]));
    } else {
      out += s[i];
    }
  }
  return out;
}

// A field as text: strings as they are (terminal-safe), null or missing as "-", others as JSON.
std::string Text(const Json& o, const std::string& key) {
  if (!o.is_object() || !o.contains(key) || o[key].is_null()) return "-";
  return TerminalSafe(o[key].is_string() ? o[key].get<std::string>()
                                         : o[key].dump(-1, ' ', false, Json::error_handler_t::replace));
}

std::string NodesOrReason(const Json& j) {
  std::vector<std::string> nodes;
  if (j.contains("placements") && j["placements"].is_array())
    for (const Json& p : j["placements"]) {
      const std::string n = Text(p, "node");
      if (std::find(nodes.begin(), nodes.end(), n) == nodes.end()) nodes.push_back(n);
    }
  std::string joined;
  for (const std::string& n : nodes) joined += (joined.empty() ? "" : ",") + n;
  if (!joined.empty()) return joined;
  if (j.contains("reason") && j["reason"].is_object()) return "(" + Text(j["reason"], "code") + ")";
  return "";
}

const Json& Array(const Json& o, const std::string& key) {
  static const Json kEmpty = Json::array();
  return o.is_object() && o.contains(key) && o[key].is_array() ? o[key] : kEmpty;
}

}  // namespace

Result<nlohmann::json> WorkloadFromText(const std::string& text, const std::string& path) {
  return MappingFromText(text, path, "one workload entry (a mapping with name, class, ...)");
}

Result<nlohmann::json> MappingFromText(const std::string& text, const std::string& path, const std::string& what) {
  Json j;
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && (text[first] == '{' || text[first] == '[')) {
    j = Json::parse(text, nullptr, false);
    if (j.is_discarded()) return Status::Error(path + ": not valid JSON");
  } else {
    try {
      j = YamlToJson(YAML::Load(text));
    } catch (const YAML::Exception& e) {
      return Status::Error(fmt::format("{}: line {}: {}", path, e.mark.line + 1, e.msg));
    }
  }
  if (j.is_array() && j.size() == 1) j = j[0];
  if (!j.is_object())
    return Status::Error(path + ": expected " + what);
  return j;
}

Result<nlohmann::json> ReadWorkloadFile(const std::string& path) {
  auto text = ReadFile(path);
  if (!text.ok()) return text.status();
  return WorkloadFromText(text.value(), path);
}

std::string StateCode(const std::string& state) {
  if (state == "Pending") return "PD";
  if (state == "Running") return "R";
  if (state == "Succeeded") return "CD";
  if (state == "Failed") return "F";
  if (state == "Cancelled") return "CA";
  if (state == "Preempted") return "PR";
  return state;
}

std::string FormatAge(int64_t s) {
  if (s < 0) s = 0;
  const int64_t d = s / 86400, h = s % 86400 / 3600, m = s % 3600 / 60, sec = s % 60;
  if (d > 0) return fmt::format("{}-{:02}:{:02}:{:02}", d, h, m, sec);
  if (h > 0) return fmt::format("{}:{:02}:{:02}", h, m, sec);
  return fmt::format("{}:{:02}", m, sec);
}

std::string JobsTable(const nlohmann::json& jobs, int64_t now_unix) {
  std::vector<std::vector<std::string>> rows;
  for (const Json& j : Array(jobs, "jobs")) {
    const auto t = ParseIsoUtc(Text(j, "submitted_at"));
    rows.push_back({Text(j, "id"), Text(j, "team"), Text(j, "name"), Text(j, "user"), StateCode(Text(j, "state")),
                    t.ok() ? FormatAge(now_unix - t.value()) : "-", Text(j, "gpus"), NodesOrReason(j)});
  }
  return Table({"JOBID", "TEAM", "NAME", "USER", "ST", "AGE", "GPUS", "NODES(REASON)"}, rows);
}

std::string JobDetail(const nlohmann::json& job) {
  std::string out;
  for (const char* k : {"id", "name", "team", "project", "user", "class", "state", "priority_class", "gpus",
                        "submitted_at", "started_at", "finished_at", "queue_position", "estimated_start"})
    out += fmt::format("{}: {}\n", k, Text(job, k));
  if (job.contains("reason") && job["reason"].is_object())
    out += fmt::format("reason: {} {}\n", Text(job["reason"], "code"), Text(job["reason"], "message"));
  out += fmt::format("nodes: {}\n", NodesOrReason(job));
  return out;
}

std::string QueueTable(const nlohmann::json& queue) {
  std::vector<std::vector<std::string>> rows;
  for (const Json& j : Array(queue, "jobs")) {
    const Json reason = j.contains("reason") ? j["reason"] : Json::object();
    rows.push_back({Text(j, "queue_position"), Text(j, "id"), Text(j, "team"), Text(j, "name"), Text(j, "user"),
                    Text(j, "priority_class"), Text(j, "gpus"), Text(j, "estimated_start"),
                    Text(reason, "code") + ": " + Text(reason, "message")});
  }
  return Table({"POS", "JOBID", "TEAM", "NAME", "USER", "PRIORITY", "GPUS", "START", "REASON"}, rows);
}

std::string TeamsTable(const nlohmann::json& teams) {
  std::vector<std::vector<std::string>> rows;
  for (const Json& t : Array(teams, "teams"))
    rows.push_back({Text(t, "name"), Text(t, "guaranteed_gpus"), Text(t, "limit_gpus"), Text(t, "allocated_gpus"),
                    Text(t, "fair_share_gpus")});
  return Table({"TEAM", "GUARANTEED", "LIMIT", "ALLOCATED", "FAIR_SHARE"}, rows);
}

std::string UsersTable(const nlohmann::json& users) {
  std::vector<std::vector<std::string>> rows;
  for (const Json& u : Array(users, "users")) {
    const bool active = !u.contains("token_active") || u["token_active"] != false;
    rows.push_back({Text(u, "name"), Text(u, "team"), Text(u, "role"), active ? "active" : "revoked"});
  }
  return Table({"USER", "TEAM", "ROLE", "TOKEN"}, rows);
}

std::string UserDetail(const nlohmann::json& user) {
  std::string out = fmt::format("user {} (team {}, role {})\n", Text(user, "name"), Text(user, "team"), Text(user, "role"));
  if (user.contains("token") && user["token"].is_string())
    out += fmt::format("token: {}\n(shown once: store it now)\n", user["token"].get<std::string>());
  else
    out += "token: none (revoked; the user cannot sign in until given a new one)\n";
  return out;
}

std::string WhatIfTable(const nlohmann::json& whatif) {
  std::vector<std::vector<std::string>> rows;
  for (const Json& o : Array(whatif, "options")) {
    const Json reason = o.contains("reason") && o["reason"].is_object() ? o["reason"] : Json::object();
    const double f = o.contains("fraction") && o["fraction"].is_number() ? o["fraction"].get<double>() : 0;
    const std::string change =
        o.contains("change") && o["change"].is_string() ? o["change"].get<std::string>() : "";
    std::string what = fmt::format("{:g} of the GPUs", f);
    if (change == "any_gpu_kind") what = "any GPU kind";
    if (change == "mig_profile") what = "MIG profile " + Text(o, "mig_profile");
    if (change == "spot") what = "checkpointable (spot allowed)";
    rows.push_back({what, Text(o, "gpus"), Text(o, "estimated_start"),
                    reason.empty() ? "starts" : Text(reason, "code") + ": " + Text(reason, "message")});
  }
  return Table({"IF IT ASKED FOR", "GPUS", "START", "REASON"}, rows);
}

std::string ClusterTable(const nlohmann::json& cluster) {
  const Json totals = cluster.is_object() && cluster.contains("totals") ? cluster["totals"] : Json::object();
  std::string out = fmt::format("cluster {}: {} nodes, {} GPUs, {} busy, {} allocated, utilisation {}\n",
                                Text(cluster, "name"), Text(totals, "nodes"), Text(totals, "gpus"),
                                Text(totals, "busy_gpus"), Text(totals, "allocated_gpus"), Text(totals, "utilisation"));
  std::vector<std::vector<std::string>> rows;
  for (const Json& n : Array(cluster, "nodes")) {
    std::string mig;
    for (const Json& g : Array(n, "gpus")) {
      if (g.value("mig_enabled", false) != true) continue;
      std::string layout;
      for (const Json& m : Array(g, "mig_layout"))
        layout += (layout.empty() ? "" : ",") + Text(m, "profile") + "@" + Text(m, "start") +
                  (m.value("busy", false) ? "*" : "");
      mig += fmt::format("{}gpu{}[{}]", mig.empty() ? "" : " ", Text(g, "index"), layout);
    }
    rows.push_back({Text(n, "name"), Text(n, "gpu_kind"), Text(n, "leaf"), Text(n, "tier"), Text(n, "gpu_count"),
                    Text(n, "allocated_gpus"), mig.empty() ? "-" : mig});
  }
  return out + Table({"NODE", "KIND", "LEAF", "TIER", "GPUS", "ALLOCATED", "MIG"}, rows);
}

std::string NodesTable(const nlohmann::json& nodes) {
  std::vector<std::vector<std::string>> rows;
  const Json list = nodes.is_object() && nodes.contains("nodes") ? nodes["nodes"] : Json::array({nodes});
  for (const Json& n : list.is_array() ? list : Json::array())
    rows.push_back({Text(n, "name"), Text(n, "state"), Text(n, "gpu"), Text(n, "gpus"), Text(n, "leaf"),
                    Text(n, "spine"), Text(n, "tier"), Text(n, "tasks")});
  return Table({"NODE", "STATE", "KIND", "GPUS", "LEAF", "SPINE", "TIER", "TASKS"}, rows);
}

std::string UsageTable(const nlohmann::json& usage) {
  std::vector<std::vector<std::string>> rows;
  for (const Json& r : Array(usage, "rows")) {
    auto num = [&](const char* k) {
      return r.contains(k) && r[k].is_number() ? fmt::format("{:.2f}", r[k].get<double>()) : std::string("-");
    };
    rows.push_back({Text(r, "team"), Text(r, "project"), Text(r, "job"), Text(r, "tier"), num("gpu_hours"),
                    num("cost")});
  }
  return Table({"TEAM", "PROJECT", "JOB", "TIER", "GPU_HOURS", "COST"}, rows);
}

}  // namespace tessera::client
