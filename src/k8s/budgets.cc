#include "k8s/budgets.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "k8s/api/objects.h"

namespace tessera {

using json = nlohmann::json;

namespace {

std::string LabelOf(const json& labels, const std::string& key, bool* present) {
  *present = false;
  if (!labels.is_object()) return "";
  auto it = labels.find(key);
  if (it == labels.end() || !it->is_string()) return "";
  *present = true;
  return it->get<std::string>();
}

Result<bool> ExpressionMatches(const json& e, const json& labels) {
  const json* key = Field(e, "key");
  const json* op = Field(e, "operator");
  if (key == nullptr || !key->is_string() || op == nullptr || !op->is_string())
    return Status::Error("matchExpressions: an entry needs a key and an operator");
  const json* values = Field(e, "values");
  if (values != nullptr && !values->is_null() && !values->is_array())
    return Status::Error("matchExpressions: values is not a list");
  bool present = false;
  const std::string value = LabelOf(labels, key->get<std::string>(), &present);
  const bool listed = present && values != nullptr && values->is_array() &&
                      std::any_of(values->begin(), values->end(), [&](const json& v) { return v == value; });
  const std::string o = op->get<std::string>();
  if (o == "In") return listed;
  if (o == "NotIn") return !listed;
  if (o == "Exists") return present;
  if (o == "DoesNotExist") return !present;
  return Status::Error(fmt::format("matchExpressions: unknown operator '{}'", o));
}

}  // namespace

Result<bool> SelectorMatches(const json& selector, const json& labels) {
  if (!selector.is_object()) return Status::Error("selector: not an object");
  if (const json* ml = Field(selector, "matchLabels"); ml != nullptr && !ml->is_null()) {
    if (!ml->is_object()) return Status::Error("matchLabels: not an object");
    for (const auto& [k, v] : ml->items()) {
      bool present = false;
      if (LabelOf(labels, k, &present) != v || !present) return false;
    }
  }
  if (const json* me = Field(selector, "matchExpressions"); me != nullptr && !me->is_null()) {
    if (!me->is_array()) return Status::Error("matchExpressions: not a list");
    for (const json& e : *me) {
      auto m = ExpressionMatches(e, labels);
      if (!m.ok() || !*m) return m;
    }
  }
  return true;
}

std::vector<std::string> BlockingBudgets(const ObjectMap& budgets, const json& pod) {
  std::vector<std::string> out;
  const std::string ns = Meta(pod, "namespace");
  const json* meta = Field(pod, "metadata");
  const json* labels = meta != nullptr ? Field(*meta, "labels") : nullptr;
  const json no_labels = json::object();
  for (const auto& [key, b] : budgets) {
    if (Meta(b, "namespace") != ns) continue;
    const json* spec = Field(b, "spec");
    const json* selector = spec != nullptr ? Field(*spec, "selector") : nullptr;
    const json* status = Field(b, "status");
    const json* allowed = status != nullptr ? Field(*status, "disruptionsAllowed") : nullptr;
    if (selector == nullptr || selector->is_null() || allowed == nullptr || !allowed->is_number_integer())
      continue;
    if (allowed->get<int64_t>() > 0) continue;
    auto m = SelectorMatches(*selector, labels != nullptr ? *labels : no_labels);
    if (m.ok() && *m) out.push_back(Meta(b, "name"));
  }
  return out;
}

}  // namespace tessera
