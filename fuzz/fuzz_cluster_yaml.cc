// Fuzz target: the cluster YAML reader (model/cluster.h LoadClusterYaml) on arbitrary bytes.
#include "fuzz_input.h"
#include "model/cluster.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tessera;
  (void)LoadClusterYaml(fuzz::AsText(data, size), "cluster.yaml", Catalog::Default());
  return 0;
}
