#pragma once
// Named MIG layouts (mig-parted / GPU Operator conventions) and layout search helpers used by policies.

#include <string_view>
#include <vector>

#include "base/status.h"
#include "model/catalog.h"
#include "model/mig.h"

namespace tessera {

// Places a multiset of profiles (indices into kind.profiles) on an empty GPU with explicit starts, larger
// profiles first, backtracking over allowed starts. Empty result when they cannot all be placed.
std::vector<MigInstance> PlaceProfiles(const GpuKind& kind, std::vector<int> profiles);

// "all-disabled"/"all-enabled" (no instances), "all-balanced" (per hardware-facts.md 2.1), "all-<profile>"
// (max count of that profile), "tessera-<n>x<profile>-..." (the profile counts, as `tessera k8s mig-config`
// names its configs; "+me" written ".me"). Error for unknown names or profiles.
Result<std::vector<MigInstance>> NamedMigLayout(const GpuKind& kind, std::string_view name);

// Number of (non-media profile, start) pairs that could still be created on a GPU whose instances cover
// `used_mask`, weighted by the profile's memory slices. A policy keeps this high to keep room for the
// profiles yet to come (a fragmentation measure over MIG geometry).
int MigFreedom(const GpuKind& kind, uint8_t used_mask);

}  // namespace tessera
