#pragma once
// The replay behind `tessera bench dra`: on one node of NVIDIA DynamicMIG devices (dra_nvidia.h), a stream
// of small MIG claims that come and go (some stay), then large claims (4g.40gb, 7g.80gb, whole GPUs) one
// at a time; replayed with Tessera's allocator and with first-fit in device-name order, and bounded by an
// exact packing of the same counters in which the small claims that stay may sit anywhere
// (DraBestPacking). Pure and seeded: the same options give the same figures.

#include <cstdint>
#include <string>
#include <vector>

namespace tessera {

struct DraBenchOptions {
  std::string gpu = "a100-80gb";  // catalog kind
  int gpus = 8;
  int seeds = 20;  // random scenarios besides the check's phase-2 sequence
  uint32_t first_seed = 1;
  int arrivals = 12;  // small MIG claims per random scenario
  int64_t bound_budget = 300000;
};

struct DraReplayResult {
  std::string scenario;
  int large = 0;  // large claims offered
  int kept = 0;   // small claims still running when the large ones arrive
  int small_refused_tessera = 0, small_refused_first_fit = 0;
  int tessera = 0, first_fit = 0;  // large claims placed
  int bound = -1;                  // exact packing (-1: the kept small claims alone do not fit)
  bool bound_exhaustive = true;
};

// Scenario "check-phase2" first, then "mixed-<seed>" for each seed. Error text for an unknown GPU kind.
std::vector<DraReplayResult> RunDraBench(const DraBenchOptions& options, std::string* error);

}  // namespace tessera
