#pragma once
// FOCUS (FinOps Open Cost and Usage Specification) CSV export helpers. The export itself is
// CostModel::FocusCsv; column list and meaning: docs/cost.md.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "model/cluster.h"

namespace tessera {

// The FOCUS columns Tessera writes, in order: every FOCUS 1.0 mandatory column, the conditional ones
// that apply (quantities, unit prices, pricing category, resource, sub-account, tags), FOCUS 1.1's
// CapacityReservationId / CapacityReservationStatus, then Tessera's x_ columns.
const std::vector<std::string>& FocusColumns();

// FOCUS PricingCategory of a tier's usage: on-demand Standard, reserved Committed (a capacity
// reservation paid up front), spot Dynamic, owned Other (hardware the organisation paid for).
const char* FocusPricingCategory(Tier t);

// FOCUS ProviderName of a price-book provider key: aws "Amazon Web Services", gcp "Google Cloud",
// azure "Microsoft Azure", onprem "On-premises"; other keys as given, empty "Unknown".
std::string FocusProviderName(std::string_view provider);
// FOCUS ServiceName of the GPU capacity a provider sells ("Amazon EC2", "Compute Engine", ...).
std::string FocusServiceName(std::string_view provider);

// RFC 4180 field: quoted when it holds a comma, a quote, CR or LF (quotes doubled).
std::string CsvField(std::string_view s);

}  // namespace tessera
