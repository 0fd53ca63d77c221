// PodDisruptionBudgets: label selectors as the API server reads them, and which budgets block a pod's
// eviction.
#include "k8s/budgets.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace tessera {
namespace {

using json = nlohmann::json;

TEST(Budgets, SelectorsMatchAsTheApiServerReadsThem) {
  const json labels = {{"app", "web"}, {"tier", "gpu"}};
  EXPECT_TRUE(*SelectorMatches(json::object(), labels));
  EXPECT_TRUE(*SelectorMatches({{"matchLabels", {{"app", "web"}}}}, labels));
  EXPECT_FALSE(*SelectorMatches({{"matchLabels", {{"app", "web"}, {"zone", "a"}}}}, labels));
  auto expr = [](const std::string& key, const std::string& op, json values = nullptr) {
    json e = {{"key", key}, {"operator", op}};
    if (!values.is_null()) e["values"] = values;
    return json{{"matchExpressions", {e}}};
  };
  EXPECT_TRUE(*SelectorMatches(expr("tier", "In", {"gpu", "cpu"}), labels));
  EXPECT_FALSE(*SelectorMatches(expr("tier", "NotIn", {"gpu"}), labels));
  EXPECT_TRUE(*SelectorMatches(expr("zone", "NotIn", {"a"}), labels));
  EXPECT_TRUE(*SelectorMatches(expr("app", "Exists"), labels));
  EXPECT_TRUE(*SelectorMatches(expr("zone", "DoesNotExist"), labels));
  EXPECT_FALSE(*SelectorMatches(expr("app", "DoesNotExist"), labels));
  auto bad = SelectorMatches(expr("app", "Like", {"w*"}), labels);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("Like"), std::string::npos);
  EXPECT_FALSE(SelectorMatches({{"matchLabels", "app=web"}}, labels).ok());
}

TEST(Budgets, OnlyBudgetsThatAllowNoDisruptionInThePodsNamespaceBlock) {
  auto budget = [](const std::string& ns, const std::string& name, json selector, json allowed) {
    json b = {{"metadata", {{"name", name}, {"namespace", ns}}}, {"spec", {{"selector", selector}}}};
    if (!allowed.is_null()) b["status"] = {{"disruptionsAllowed", allowed}};
    return b;
  };
  const json web = {{"matchLabels", {{"app", "web"}}}};
  const std::map<std::string, json> budgets = {
      {"ml/full", budget("ml", "full", web, 0)},        // blocks
      {"ml/room", budget("ml", "room", web, 1)},        // allows one
      {"ml/new", budget("ml", "new", web, nullptr)},    // no status yet
      {"ml/none", budget("ml", "none", nullptr, 0)},    // no selector: selects nothing
      {"other/full", budget("other", "full", web, 0)},  // another namespace
      {"ml/db", budget("ml", "db", {{"matchLabels", {{"app", "db"}}}}, 0)},
  };
  const json pod = {{"metadata", {{"name", "w"}, {"namespace", "ml"}, {"labels", {{"app", "web"}}}}}};
  EXPECT_EQ(BlockingBudgets(budgets, pod), std::vector<std::string>{"full"});
  const json bare = {{"metadata", {{"name", "b"}, {"namespace", "ml"}}}};
  EXPECT_TRUE(BlockingBudgets(budgets, bare).empty());
}

}  // namespace
}  // namespace tessera
