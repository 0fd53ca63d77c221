#pragma once
// PodDisruptionBudgets (policy/v1) as the scheduler reads them: which budgets select a pod (same namespace,
// the budget's label selector) and whether they allow no disruption now (status.disruptionsAllowed <= 0).
// A pod such a budget selects cannot be evicted now, so no cycle chooses its job as a victim (the Eviction
// API would refuse it and the preemptor would wait for nothing). Pure functions.

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"
#include "k8s/api/object_map.h"

namespace tessera {

// Whether a LabelSelector (matchLabels; matchExpressions with In, NotIn, Exists, DoesNotExist) selects
// `labels`; an empty selector selects everything. Errors name what does not read.
Result<bool> SelectorMatches(const nlohmann::json& selector, const nlohmann::json& labels);

// The names of the budgets of `budgets` (the informer's objects) that select `pod` and allow no disruption
// now. A budget without a selector, or without status.disruptionsAllowed yet, blocks nothing.
std::vector<std::string> BlockingBudgets(const ObjectMap& budgets,
                                         const nlohmann::json& pod);

}  // namespace tessera
