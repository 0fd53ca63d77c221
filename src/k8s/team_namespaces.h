#pragma once
// Which namespace the jobs of a team submitted through Tessera's API (with a container) are created in:
// only what an explicit mapping says (`tessera k8s scheduler --team-namespaces FILE`). The file is YAML (or
// JSON), one entry per team:
//
//   vision: ml-vision        # team: namespace
//   nlp: ml-nlp
//
// Every namespace must be a DNS-1123 label, and none may be a namespace that is not a team's to use:
// `default`, any `kube-*` (kube-system, kube-public, kube-node-lease, ...) or one the scheduler itself
// uses (its Lease's, the MIG manager ConfigMap's). A team with no entry gets no pods: its API jobs are
// refused. Pure functions; errors name the file, the line and the entry.

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace tessera {

using TeamNamespaces = std::map<std::string, std::string>;  // team -> namespace

// Why `ns` may not hold API jobs' pods (not a DNS-1123 label, or a system or `reserved` namespace); empty
// when it may.
std::string NamespaceRefusal(std::string_view ns, const std::vector<std::string>& reserved);
// Reads and checks the mapping; `source` names the text in errors. An empty document maps no team.
Result<TeamNamespaces> ParseTeamNamespaces(std::string_view text, std::string_view source,
                                           const std::vector<std::string>& reserved);
// ParseTeamNamespaces of a file's contents.
Result<TeamNamespaces> LoadTeamNamespaces(const std::string& path, const std::vector<std::string>& reserved);
// The namespaces the scheduler itself uses, which no team may have: its Lease's (`lease_namespace`, else
// the kubeconfig's `kube_namespace`) and the MIG manager ConfigMap's (`mig_config_map` NS/NAME, when set).
std::vector<std::string> SchedulerNamespaces(const std::string& lease_namespace, const std::string& kube_namespace,
                                             const std::string& mig_config_map);
// The namespace of `team`'s API jobs, or why the team has none.
Result<std::string> NamespaceOfTeam(const TeamNamespaces& namespaces, const std::string& team);

}  // namespace tessera
