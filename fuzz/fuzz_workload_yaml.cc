// Fuzz target: the workload YAML reader (model/workload.h LoadWorkloadsYaml) on arbitrary bytes.
#include "fuzz_input.h"
#include "model/workload.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tessera;
  (void)LoadWorkloadsYaml(fuzz::AsText(data, size), "workload.yaml");
  return 0;
}
