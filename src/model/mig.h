#pragma once
// MIG geometry: validity of a set of GPU instances on one GPU, and enumeration of maximal layouts.
// Rule (hardware-facts.md 1.3): a set of GIs is placeable iff each GI starts at one of its profile's
// allowed starts, no two GIs share a memory slice, and per-profile max counts hold. Modelled as a bitmask
// over the kind's memory slices.

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "model/catalog.h"

namespace tessera {

struct MigInstance {
  int profile = -1;  // index into GpuKind::profiles
  int start = 0;     // first memory slice
  bool operator==(const MigInstance&) const = default;
};

// OK, or an error naming the offending instance and the reason (wrong start, overlap, over max count).
Status CheckMigLayout(const GpuKind& kind, const std::vector<MigInstance>& instances);

// True when `instance` can be added to a GPU whose instances are `existing` (already valid).
bool CanAddInstance(const GpuKind& kind, const std::vector<MigInstance>& existing, MigInstance instance);

// Every maximal valid layout using only profiles without media extensions: no further instance of any such
// profile fits. Each layout is sorted by (start, profile). Deterministic order.
std::vector<std::vector<MigInstance>> MaximalMigLayouts(const GpuKind& kind);

// Parses "PROFILE@START" (e.g. "3g.40gb@4") against `kind`.
Result<MigInstance> ParseMigInstance(const GpuKind& kind, const std::string& text);

// One GPU's MIG mode and instances, as a node entry may give them explicitly (cluster.h Node::mig_layouts).
struct GpuMigLayout {
  bool enabled = true;  // MIG mode; false = the GPU is whole (no instances)
  std::vector<MigInstance> instances;
  bool operator==(const GpuMigLayout&) const = default;
};

// "disabled" (MIG off), "" (MIG on, no instances) or "PROFILE@START,PROFILE@START,..." (the store's per-GPU
// layout text), checked against the placement rules (CheckMigLayout): an impossible layout is an error.
Result<GpuMigLayout> ParseGpuMigLayout(const GpuKind& kind, const std::string& text);
// The inverse of ParseGpuMigLayout (instances in start order).
std::string FormatGpuMigLayout(const GpuKind& kind, const GpuMigLayout& layout);

}  // namespace tessera
