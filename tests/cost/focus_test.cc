// FOCUS validator: the FOCUS 1.0 column list (every mandatory column, and the conditional ones Tessera
// writes) and FOCUS 1.1's capacity-reservation columns, written here from the specification with their
// data types, nullability and allowed values, checked against the export of the example ledger under
// every idle policy.
#include "cost/focus.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cost/cost_model.h"
#include "testing/csv.h"
#include "testing/paths.h"

namespace tessera {
namespace {

using testing::ParseCsv;

enum class Type { kString, kDecimal, kDateTime, kJson, kCurrency };

struct SpecColumn {
  const char* name;
  bool mandatory;  // FOCUS 1.0 "Mandatory" (the others are conditional or recommended)
  bool nullable;   // may be empty in a row
  Type type;
  std::set<std::string> allowed;  // empty: any value of the type
};

// FOCUS 1.0 (and 1.1 where noted), column by column as the specification lists them.
const std::vector<SpecColumn>& Spec() {
  static const std::vector<SpecColumn> kSpec = {
      {"BilledCost", true, false, Type::kDecimal, {}},
      {"BillingAccountId", true, false, Type::kString, {}},
      {"BillingAccountName", true, true, Type::kString, {}},
      {"BillingCurrency", true, false, Type::kCurrency, {}},
      {"BillingPeriodEnd", true, false, Type::kDateTime, {}},
      {"BillingPeriodStart", true, false, Type::kDateTime, {}},
      {"ChargeCategory", true, false, Type::kString, {"Adjustment", "Credit", "Purchase", "Tax", "Usage"}},
      {"ChargeClass", true, true, Type::kString, {"Correction"}},
      {"ChargeDescription", true, true, Type::kString, {}},
      {"ChargeFrequency", false, true, Type::kString, {"One-Time", "Recurring", "Usage-Based"}},
      {"ChargePeriodEnd", true, false, Type::kDateTime, {}},
      {"ChargePeriodStart", true, false, Type::kDateTime, {}},
      {"ConsumedQuantity", false, true, Type::kDecimal, {}},
      {"ConsumedUnit", false, true, Type::kString, {}},
      {"ContractedCost", true, false, Type::kDecimal, {}},
      {"ContractedUnitPrice", false, true, Type::kDecimal, {}},
      {"EffectiveCost", true, false, Type::kDecimal, {}},
      {"InvoiceIssuerName", true, false, Type::kString, {}},
      {"ListCost", true, false, Type::kDecimal, {}},
      {"ListUnitPrice", false, true, Type::kDecimal, {}},
      {"PricingCategory", false, true, Type::kString, {"Standard", "Dynamic", "Committed", "Other"}},
      {"PricingQuantity", true, true, Type::kDecimal, {}},
      {"PricingUnit", true, true, Type::kString, {}},
      {"ProviderName", true, false, Type::kString, {}},
      {"PublisherName", true, false, Type::kString, {}},
      {"ResourceId", false, true, Type::kString, {}},
      {"ResourceName", false, true, Type::kString, {}},
      {"ResourceType", false, true, Type::kString, {}},
      {"ServiceCategory",
       true,
       false,
       Type::kString,
       {"AI and Machine Learning", "Analytics", "Business Applications", "Compute", "Databases",
        "Developer Tools", "Multicloud", "Identity", "Integration", "Internet of Things",
        "Management and Governance", "Media", "Migration", "Mobile", "Networking", "Security", "Storage",
        "Web", "Other"}},
      {"ServiceName", true, false, Type::kString, {}},
      {"SubAccountId", false, true, Type::kString, {}},
      {"SubAccountName", false, true, Type::kString, {}},
      {"Tags", false, true, Type::kJson, {}},
      // FOCUS 1.1: capacity reservations.
      {"CapacityReservationId", false, true, Type::kString, {}},
      {"CapacityReservationStatus", false, true, Type::kString, {"Used", "Unused"}},
      // FOCUS 1.0 commitment-discount, region and SKU columns (conditional: present when the provider has
      // the concept).
      {"CommitmentDiscountCategory", false, true, Type::kString, {"Spend", "Usage"}},
      {"CommitmentDiscountId", false, true, Type::kString, {}},
      {"CommitmentDiscountName", false, true, Type::kString, {}},
      {"CommitmentDiscountStatus", false, true, Type::kString, {"Used", "Unused"}},
      {"CommitmentDiscountType", false, true, Type::kString, {}},
      {"RegionId", false, true, Type::kString, {}},
      {"RegionName", false, true, Type::kString, {}},
      {"SkuId", false, true, Type::kString, {}},
      {"SkuPriceId", false, true, Type::kString, {}},
  };
  return kSpec;
}

// Errors of one row against the specification, as text (empty when valid).
std::vector<std::string> Validate(const std::map<std::string, std::string>& row) {
  static const std::regex kDateTime(R"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z)");
  // Currency precision: at most two decimals (USD), no exponent.
  static const std::regex kMoney(R"(-?\d+(\.\d{1,2})?)");
  static const std::regex kDecimal(R"(-?\d+(\.\d+)?)");
  std::vector<std::string> errors;
  for (const SpecColumn& c : Spec()) {
    auto it = row.find(c.name);
    if (it == row.end()) continue;  // presence is checked once, on the header
    const std::string& v = it->second;
    if (v.empty()) {
      if (!c.nullable) errors.push_back(std::string(c.name) + " is null");
      continue;
    }
    const std::string name = c.name;
    const bool cost = name.size() > 4 && name.compare(name.size() - 4, 4, "Cost") == 0;
    switch (c.type) {
      case Type::kDecimal:
        if (!std::regex_match(v, cost ? kMoney : kDecimal)) errors.push_back(name + " not a decimal: " + v);
        break;
      case Type::kDateTime:
        if (!std::regex_match(v, kDateTime)) errors.push_back(name + " not ISO 8601 UTC: " + v);
        break;
      case Type::kJson:
        if (!nlohmann::json::accept(v) || !nlohmann::json::parse(v).is_object())
          errors.push_back(name + " not a JSON object: " + v);
        break;
      case Type::kCurrency:
        if (!std::regex_match(v, std::regex("[A-Z]{3}"))) errors.push_back(name + " not ISO 4217: " + v);
        break;
      case Type::kString:
        break;
    }
    if (!c.allowed.empty() && !c.allowed.count(v)) errors.push_back(name + " value not allowed: " + v);
  }
  // Cross-column rules of the specification.
  auto at = [&](const char* k) { return row.count(k) ? row.at(k) : std::string(); };
  if (at("ChargeCategory") != "Usage" && !at("ConsumedQuantity").empty())
    errors.push_back("ConsumedQuantity set on a non-usage row");
  if (!at("ConsumedQuantity").empty() && at("ConsumedUnit").empty()) errors.push_back("ConsumedUnit missing");
  if (!at("PricingQuantity").empty() && at("PricingUnit").empty()) errors.push_back("PricingUnit missing");
  if (at("ChargePeriodStart") > at("ChargePeriodEnd"))
    errors.push_back("charge period ends before it starts");
  // FOCUS 1.0 discount handling: a commitment-priced row names its commitment, with category, name and type;
  // its usage rows say Used or Unused.
  if (at("PricingCategory") == "Committed" && at("CommitmentDiscountId").empty())
    errors.push_back("PricingCategory Committed without CommitmentDiscountId");
  if (!at("CommitmentDiscountId").empty()) {
    for (const char* c : {"CommitmentDiscountCategory", "CommitmentDiscountName", "CommitmentDiscountType"})
      if (at(c).empty()) errors.push_back(std::string(c) + " null on a commitment row");
    if (at("ChargeCategory") == "Usage" && at("CommitmentDiscountStatus").empty())
      errors.push_back("usage of a commitment without CommitmentDiscountStatus");
    if (at("CommitmentDiscountStatus") == "Unused" && at("ResourceId") != at("CommitmentDiscountId"))
      errors.push_back("unused commitment row whose ResourceId is not the commitment");
  }
  // Billing periods are calendar months (UTC), and a charge period lies inside its billing period.
  const std::string bs = at("BillingPeriodStart"), be = at("BillingPeriodEnd");
  if (bs.size() == 20 && (bs.substr(8) != "01T00:00:00Z" || be.substr(8) != "01T00:00:00Z" || be <= bs ||
                          (bs.substr(5, 2) != "12" && be.substr(0, 4) != bs.substr(0, 4))))
    errors.push_back("billing period not a calendar month: " + bs + " .. " + be);
  if (at("ChargePeriodStart") < bs || at("ChargePeriodEnd") > be) errors.push_back("charge period outside its billing period");
  if (at("BillingPeriodStart") > at("ChargePeriodStart") || at("ChargePeriodEnd") > at("BillingPeriodEnd"))
    errors.push_back("charge period outside the billing period");
  // FOCUS 1.1: a status only with a reservation, and a usage row of a reservation has one.
  if (!at("CapacityReservationStatus").empty() && at("CapacityReservationId").empty())
    errors.push_back("CapacityReservationStatus without CapacityReservationId");
  if (!at("CapacityReservationId").empty() && at("ChargeCategory") == "Usage" &&
      at("CapacityReservationStatus").empty())
    errors.push_back("usage of a capacity reservation without CapacityReservationStatus");
  return errors;
}

Ledger ExampleLedger() {
  std::ifstream in(std::string(::tessera::testing::SourceDir()) + "/examples/cost/ledger-day.yaml");
  std::stringstream ss;
  ss << in.rdbuf();
  Result<Ledger> l = ParseLedgerYaml(ss.str(), "ledger-day.yaml");
  EXPECT_TRUE(l.ok()) << l.error();
  return l.ok() ? *l : Ledger{};
}

TEST(FocusValidator, ExportHasEveryMandatoryColumnWithValidValues) {
  const Ledger ledger = ExampleLedger();
  for (IdlePolicy policy : {IdlePolicy::kNone, IdlePolicy::kProportional, IdlePolicy::kEven}) {
    SCOPED_TRACE(IdlePolicyName(policy));
    CostOptions opt;
    opt.idle_policy = policy;
    const CostModel model(PriceBook::Default(), opt);
    Result<std::string> csv = model.FocusCsv(ledger);
    ASSERT_TRUE(csv.ok()) << csv.error();
    const auto rows = ParseCsv(*csv);
    ASSERT_GT(rows.size(), 1u);
    const std::vector<std::string>& header = rows[0];
    for (const SpecColumn& c : Spec()) {
      const bool present = std::find(header.begin(), header.end(), c.name) != header.end();
      if (c.mandatory) {
        EXPECT_TRUE(present) << "mandatory column missing: " << c.name;
      }
    }
    EXPECT_NE(std::find(header.begin(), header.end(), "CapacityReservationStatus"), header.end());
    // Columns outside the specification carry the x_ prefix.
    std::set<std::string> spec_names;
    for (const SpecColumn& c : Spec()) spec_names.insert(c.name);
    for (const std::string& h : header) EXPECT_TRUE(spec_names.count(h) || h.rfind("x_", 0) == 0) << h;
    double billed = 0, effective = 0;
    std::map<std::string, int> statuses;
    for (size_t i = 1; i < rows.size(); ++i) {
      ASSERT_EQ(rows[i].size(), header.size());
      std::map<std::string, std::string> row;
      for (size_t k = 0; k < header.size(); ++k) row[header[k]] = rows[i][k];
      for (const std::string& e : Validate(row)) ADD_FAILURE() << "row " << i << ": " << e;
      if (row["ChargeCategory"] == "Usage") {
        EXPECT_LE(std::stod(row["BilledCost"]), std::stod(row["ListCost"])) << i;
      }
      EXPECT_EQ(row["ProviderName"], "Amazon Web Services") << i;  // every pool of the example is AWS
      EXPECT_EQ(row["BillingAccountId"], "tessera-aws") << i;      // one billing account per provider
      EXPECT_FALSE(row["x_PriceBookDate"].empty()) << i;
      billed += std::stod(row["BilledCost"]);
      effective += std::stod(row["EffectiveCost"]);
      ++statuses[row["CapacityReservationStatus"]];
    }
    // The reservation is billed once (its purchase) and amortised in EffectiveCost: both add up to the
    // report's total exactly.
    Result<CostReport> rep = model.Evaluate(ledger);
    ASSERT_TRUE(rep.ok());
    EXPECT_EQ(std::llround(billed * 100), rep->total_cents);
    EXPECT_EQ(std::llround(effective * 100), rep->total_cents);
    EXPECT_EQ(statuses["Used"], 6);  // 4 inference GPUs and 2 MIG slices on the reservation
    EXPECT_GE(statuses["Unused"], 1);
  }
}

TEST(FocusValidator, ValidatorRejectsWhatTheSpecificationForbids) {
  std::map<std::string, std::string> good = {{"BilledCost", "1.25"},
                                             {"BillingAccountId", "a"},
                                             {"BillingCurrency", "USD"},
                                             {"BillingPeriodStart", "2025-01-01T00:00:00Z"},
                                             {"BillingPeriodEnd", "2025-02-01T00:00:00Z"},
                                             {"ChargePeriodStart", "2025-01-01T00:00:00Z"},
                                             {"ChargePeriodEnd", "2025-01-01T01:00:00Z"},
                                             {"ChargeCategory", "Usage"},
                                             {"ChargeClass", ""},
                                             {"ContractedCost", "1.25"},
                                             {"EffectiveCost", "1.25"},
                                             {"InvoiceIssuerName", "x"},
                                             {"ListCost", "2"},
                                             {"ProviderName", "x"},
                                             {"PublisherName", "x"},
                                             {"ServiceCategory", "Compute"},
                                             {"ServiceName", "x"},
                                             {"PricingQuantity", "1"},
                                             {"PricingUnit", "GPU-Hours"}};
  EXPECT_TRUE(Validate(good).empty());
  struct Bad {
    const char* column;
    const char* value;
  } bad[] = {{"BilledCost", "117.98400000000002"},
             {"BillingCurrency", "usd"},
             {"ChargeCategory", "Idle"},
             {"ChargeClass", "Idle"},
             {"ChargePeriodEnd", "2025-01-01 01:00"},
             {"ServiceCategory", "GPU"},
             {"CapacityReservationStatus", "Used"},
             {"ProviderName", ""},
             {"Tags", "[1]"},
             {"PricingCategory", "Committed"},  // without a CommitmentDiscountId
             {"CommitmentDiscountId", "cb-1"},  // without category, name, type, status
             {"BillingPeriodEnd", "2025-01-02T00:00:00Z"},  // not a calendar month
             {"BillingPeriodStart", "2025-01-01T01:00:00Z"}};
  for (const Bad& b : bad) {
    auto row = good;
    row[b.column] = b.value;
    EXPECT_FALSE(Validate(row).empty()) << b.column << "=" << b.value;
  }
}

}  // namespace
}  // namespace tessera
