// Fuzz target: the scenario reader (sim/scenario.h ParseScenario) on arbitrary bytes. Relative paths
// resolve against examples/scenarios, so that inputs naming the shipped clusters and traces read them.
// Inputs naming device or kernel files are skipped: reading /dev/zero never ends, and that is not a bug of
// the reader.
#include "fuzz_input.h"
#include "sim/scenario.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tessera;
  const std::string_view text = fuzz::AsText(data, size);
  for (std::string_view skip : {"/dev", "/proc", "/sys"})
    if (text.find(skip) != std::string_view::npos) return 0;
  (void)ParseScenario(text, "scenario.yaml", TESSERA_SOURCE_DIR "/examples/scenarios", Catalog::Default());
  return 0;
}
