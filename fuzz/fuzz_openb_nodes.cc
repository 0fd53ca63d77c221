// Fuzz target: the openb node-list CSV reader (sim/openb.h ParseOpenbNodes) on arbitrary bytes.
#include "fuzz_input.h"
#include "sim/openb.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tessera;
  Result<Cluster> nodes = ParseOpenbNodes(fuzz::AsText(data, size), "nodes.csv", Catalog::Default());
  if (!nodes.ok()) fuzz::ExpectNamesSource(nodes.error(), "nodes.csv");
  return 0;
}
