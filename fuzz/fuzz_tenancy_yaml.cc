// Fuzz target: the tenancy YAML reader (sched/tenancy.h ParseTenancyYaml) on arbitrary bytes.
#include "fuzz_input.h"
#include "sched/tenancy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tessera;
  (void)ParseTenancyYaml(fuzz::AsText(data, size), "tenancy.yaml", Catalog::Default());
  return 0;
}
