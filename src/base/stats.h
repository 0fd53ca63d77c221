#pragma once
// Small summary statistics.
#include <limits>
#include <vector>

namespace tessera {

inline constexpr double kInfinity = std::numeric_limits<double>::infinity();

// The median: the middle value, or the mean of the two middle values for an even count; 0 when empty.
double Median(std::vector<double> v);

}  // namespace tessera
