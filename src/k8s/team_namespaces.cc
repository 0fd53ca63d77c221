#include "k8s/team_namespaces.h"

#include <fmt/format.h>

#include <algorithm>

#include "base/file.h"
#include "base/yaml_reader.h"

namespace tessera {

namespace {

// A DNS-1123 label: 1-63 of a-z, 0-9 and '-', starting and ending with a letter or digit.
bool Dns1123Label(std::string_view s) {
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (s.empty() || s.size() > 63 || !alnum(s.front()) || !alnum(s.back())) return false;
  return std::all_of(s.begin(), s.end(), [&](char c) { return alnum(c) || c == '-'; });
}

// A Tessera team name: 1-63 of a-z, 0-9, '-' and '_'.
bool TeamName(std::string_view s) {
  return !s.empty() && s.size() <= 63 && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
  });
}

}  // namespace

std::string NamespaceRefusal(std::string_view ns, const std::vector<std::string>& reserved) {
  if (!Dns1123Label(ns))
    return "is not a namespace name (a DNS-1123 label: 1-63 of a-z, 0-9 and '-', starting and ending with a "
           "letter or digit)";
  if (ns == "default") return "is the cluster's shared default namespace, not a team's";
  if (ns.starts_with("kube-")) return "is a Kubernetes system namespace (kube-*)";
  if (std::find(reserved.begin(), reserved.end(), ns) != reserved.end())
    return "is a namespace the scheduler itself uses (its Lease, the MIG manager's ConfigMap)";
  return "";
}

Result<TeamNamespaces> ParseTeamNamespaces(std::string_view text, std::string_view source,
                                           const std::vector<std::string>& reserved) {
  auto doc = ParseYaml(text, source);
  if (!doc.ok()) return doc.status();
  TeamNamespaces out;
  if (doc->IsNull()) return out;
  if (!doc->IsMap())
    return Status::Error(YamlWhere(source, *doc, "") + ": expected a mapping of team: namespace");
  for (const auto& entry : *doc) {
    auto team = YamlString(entry.first, source, "team");
    if (!team.ok()) return team.status();
    const std::string where = YamlWhere(source, entry.first, fmt::format("team '{}'", *team));
    if (!TeamName(*team)) return Status::Error(where + ": not a team name (1-63 of a-z, 0-9, '-' and '_')");
    auto ns = YamlString(entry.second, source, *team);
    if (!ns.ok()) return Status::Error(where + ": expected a namespace name");
    if (const std::string why = NamespaceRefusal(*ns, reserved); !why.empty())
      return Status::Error(fmt::format("{}: namespace '{}' {}; API jobs may not run there", where, *ns, why));
    if (!out.emplace(*team, *ns).second) return Status::Error(where + ": given twice");
  }
  return out;
}

Result<TeamNamespaces> LoadTeamNamespaces(const std::string& path, const std::vector<std::string>& reserved) {
  auto text = ReadFile(path);
  if (!text.ok()) return text.status();
  return ParseTeamNamespaces(*text, path, reserved);
}

std::vector<std::string> SchedulerNamespaces(const std::string& lease_namespace, const std::string& kube_namespace,
                                             const std::string& mig_config_map) {
  std::vector<std::string> out = {lease_namespace.empty() ? kube_namespace : lease_namespace};
  if (const size_t slash = mig_config_map.find('/'); slash != std::string::npos)
    out.push_back(mig_config_map.substr(0, slash));
  return out;
}

Result<std::string> NamespaceOfTeam(const TeamNamespaces& namespaces, const std::string& team) {
  auto it = namespaces.find(team);
  if (it != namespaces.end()) return it->second;
  return Status::Error(fmt::format(
      "team '{}' has no namespace in the scheduler's --team-namespaces mapping, so its jobs with a container "
      "are refused (an administrator maps the team to a namespace)",
      team));
}

}  // namespace tessera
