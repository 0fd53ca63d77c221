// Fuzz target: the cost layer's YAML readers (cost/breakeven.h, cost/ledger.h, cost/pricebook.h) on the
// same arbitrary bytes: a break-even config, a ledger and a price book.
#include "cost/breakeven.h"
#include "cost/ledger.h"
#include "cost/pricebook.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tessera;
  const std::string_view text = fuzz::AsText(data, size);
  if (Result<BreakEvenConfig> cfg = ParseBreakEvenYaml(text, "cost.yaml"); cfg.ok()) (void)ComputeBreakEven(*cfg);
  (void)ParseLedgerYaml(text, "cost.yaml");
  (void)PriceBook::FromYaml(text, "cost.yaml");
  return 0;
}
