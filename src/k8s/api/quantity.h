#pragma once
// Kubernetes resource quantities (k8s.io/apimachinery resource.Quantity) as exact integers: "8", "500m",
// "64Gi", "1.5", "2e3", "100M". Parsed into thousandths of the unit ("8" = 8000, "500m" = 500, "64Gi" =
// 68719476736000), refusing what the API server would refuse, and values beyond int64.

#include <cstdint>
#include <string_view>

#include "base/status.h"

namespace tessera {

// Thousandths of the quantity's unit; an error says what is wrong with `text`.
Result<int64_t> ParseQuantityMilli(std::string_view text);
// A whole count (a device resource such as nvidia.com/gpu): an error for fractions.
Result<int64_t> ParseQuantityCount(std::string_view text);

}  // namespace tessera
