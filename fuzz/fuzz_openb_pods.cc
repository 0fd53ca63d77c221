// Fuzz target: the openb pod-list CSV reader (sim/openb.h ParseOpenbPods) on arbitrary bytes.
#include "fuzz_input.h"
#include "sim/openb.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tessera;
  Result<OpenbPods> pods = ParseOpenbPods(fuzz::AsText(data, size), "pods.csv", Catalog::Default());
  if (!pods.ok()) fuzz::ExpectNamesSource(pods.error(), "pods.csv");
  return 0;
}
