#pragma once
// Tenancy: organisation, teams (namespaces), projects and queues with guarantees, limits, over-quota weights
// and optional per-GPU-kind quotas, plus priority classes and cycle options, parsed from YAML text into
// the flat queue list the scheduling cycle takes (sched/cycle.h). Schema: docs/scheduling.md.
//
// The tree is organisation -> teams -> projects -> queues; a team or project without children is itself a
// leaf queue. Quantities are given in GPUs (decimals allowed: 0.5, or 1/7 of a GPU for a 1g slice) and
// stored in thousandths. Parsing takes text (no I/O); errors name the source, the line and the field.

#include <string>
#include <string_view>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "base/status.h"
#include "model/catalog.h"
#include "sched/cycle.h"

namespace tessera {

struct TenancyConfig {
  std::string organisation;
  std::vector<QueueConfig> queues;           // parents before children
  std::vector<PriorityClass> priority_classes;
  CycleOptions options;                      // fair share, preemption and unit settings from the file

  // Index of a queue by its name ("team", "team/project" or a queue's own name), or -1.
  int FindQueue(std::string_view name) const;
  // The leaf queue for a team (and optional project): the named leaf, else the first leaf under it, or -1.
  int LeafFor(std::string_view team, std::string_view project = {}) const;
  bool IsLeaf(int q) const;
  // Priority class by name, or nullptr.
  const PriorityClass* FindClass(std::string_view name) const;
};

// The five standard classes: production-inference 1000 (reclaimed or preempted only by higher classes,
// preempts lower classes in any queue), inference 800, training-high 600, training 400, best-effort 100.
std::vector<PriorityClass> DefaultPriorityClasses();

// Parses a tenancy YAML document. `catalog` resolves GPU kinds in per-kind quotas.
Result<TenancyConfig> ParseTenancyYaml(std::string_view text, std::string_view source, const Catalog& catalog);
// The same from a parsed map (e.g. the `tenancy:` section of a scenario); `path` prefixes field paths.
Result<TenancyConfig> ParseTenancyNode(const YAML::Node& node, std::string_view source, std::string_view path,
                                       const Catalog& catalog);

}  // namespace tessera
