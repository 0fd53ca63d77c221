// The default price book (2024 list prices, price_date 2024-12-31) is data, not code: examples/cost/prices.yaml,
// compiled in by CMake (src/cost/default_prices.h.in). Figures from hardware-facts.md section 4 ("not
// authoritative, re-check before use"); every entry carries its source, date and validity window. The current
// book after the 2025 cuts is examples/cost/prices-2025.yaml.
#include <string_view>

#include "cost/default_prices.h"
#include "cost/pricebook.h"

namespace tessera {

std::string_view PriceBook::DefaultYaml() { return kDefaultPricesYaml; }

}  // namespace tessera
