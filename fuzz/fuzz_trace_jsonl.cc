// Fuzz target: the JSONL trace reader (sim/trace.h ReadTrace) on arbitrary bytes. A trace that reads
// must also write and read back to the same jobs, and every job must convert to an engine request or
// give an error.
#include <cstdlib>

#include "fuzz_input.h"
#include "sim/trace.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tessera;
  Result<std::vector<TraceJob>> jobs = ReadTrace(fuzz::AsText(data, size), "trace.jsonl");
  if (!jobs.ok()) {
    fuzz::ExpectNamesSource(jobs.error(), "trace.jsonl");
    return 0;
  }
  for (const TraceJob& j : *jobs) (void)ToRequest(j, Catalog::Default());
  Result<std::vector<TraceJob>> again = ReadTrace(WriteTrace(*jobs, "{}"), "rewritten.jsonl");
  if (!again.ok() || again->size() != jobs->size()) std::abort();
  return 0;
}
