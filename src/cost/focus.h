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

// The FOCUS columns Tessera writes, in order.
const std::vector<std::string>& FocusColumns();

// FOCUS PricingCategory of a tier: on-demand Standard, reserved Committed, spot Dynamic, owned
// Committed (paid up front; x_Tier says "owned").
const char* FocusPricingCategory(Tier t);

// RFC 4180 field: quoted when it holds a comma, a quote, CR or LF (quotes doubled).
std::string CsvField(std::string_view s);

// ISO 8601 UTC, seconds precision: "2025-01-01T00:00:00Z".
std::string FormatIsoUtc(int64_t unix_s);
// Parses exactly "YYYY-MM-DDTHH:MM:SSZ"; the error names the text.
Result<int64_t> ParseIsoUtc(std::string_view text);

}  // namespace tessera
