#pragma once
// Hardware catalog: GPU kinds and their MIG profiles, loaded from data (an embedded default YAML plus
// optional user files). Figures follow hardware-facts.md; entries the fact sheet flags as unverified carry
// `unverified = true`.

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/ids.h"
#include "base/status.h"

namespace tessera {

// One GPU-instance profile of a MIG-capable GPU kind.
// Invariants: 1 <= compute_slices <= memory_slices or (compute_slices > memory_slices only on 4-slice
// GPUs, never); start_mask has bits only below the kind's memory-slice count, and every allowed start s
// satisfies s + memory_slices <= kind.mig_memory_slices.
struct MigProfile {
  std::string name;          // e.g. "3g.40gb", "1g.10gb+me"
  int profile_id = -1;       // driver profile id (-lgip); -1 unknown
  int compute_slices = 0;    // of the kind's mig_compute_slices
  int memory_slices = 0;     // of the kind's mig_memory_slices
  int64_t usable_mib = 0;    // measured usable memory
  int sms = 0;               // SMs of the instance
  int max_count = 0;         // max instances of this profile per GPU
  uint8_t start_mask = 0;    // bit s set = may start at memory slice s
  bool media = false;        // +me profile (media extensions)
  bool unverified = false;   // fact sheet marks a figure of this profile unverified
  std::vector<std::string> unverified_fields;  // which figures are estimates/unconfirmed (e.g. "usable_mib")

  // Memory slices covered when placed at `start`.
  uint8_t MaskAt(int start) const { return static_cast<uint8_t>(((1u << memory_slices) - 1u) << start); }
  bool AllowedStart(int start) const { return start >= 0 && start < 8 && ((start_mask >> start) & 1u); }
};

enum class Interconnect : uint8_t { kNvSwitch, kNvLinkPairs, kPcie };

struct GpuKind {
  std::string id;                    // canonical id, e.g. "h100-80gb"
  std::vector<std::string> aliases;  // GFD product names and trace model names
  std::string family;                // ampere, hopper, blackwell, ada, volta, pascal, turing
  int64_t memory_mib = 0;            // whole-GPU usable memory
  int sms = 0;
  double bf16_tflops = 0;            // dense, for step-time models
  bool mig_capable = false;
  int mig_memory_slices = 0;         // 8 on A100/H100/H200/B200, 4 on A30
  int mig_compute_slices = 0;        // 7, or 4 on A30
  int mig_max_instances = 0;
  std::vector<MigProfile> profiles;  // empty unless mig_capable
  bool unverified = false;
  std::vector<std::string> unverified_fields;  // kind figures not confirmed by the fact sheet ("bf16_tflops")
  std::string notes;

  // Index of the profile named `name` (exact), or -1.
  int FindProfile(std::string_view name) const;
  // Compute fraction of a full GPU that a profile gives, in thousandths (SMs of the profile / SMs of the
  // whole GPU, falling back to compute slices / compute slices when SMs are unknown).
  int ProfileComputeMilli(int profile_index) const;
};

class Catalog {
 public:
  // The catalog compiled into the binary (data, not code: see catalog_data.cc).
  static const Catalog& Default();
  // Parses catalog YAML (schema: docs/configuration.md). `source` names the text in error messages.
  static Result<Catalog> FromYaml(std::string_view text, std::string_view source);
  // Adds or replaces kinds from another catalog's YAML (user files extend the default).
  Status Merge(std::string_view text, std::string_view source);

  // Finds a kind by id or alias (case-insensitive). Returns kNone when unknown.
  KindId Find(std::string_view id_or_alias) const;
  // Comma-separated canonical ids, in catalog order (for "unknown kind" messages).
  std::string KnownIds() const;
  const GpuKind& kind(KindId id) const { return kinds_[static_cast<size_t>(id)]; }
  const std::vector<GpuKind>& kinds() const { return kinds_; }
  size_t size() const { return kinds_.size(); }

 private:
  std::vector<GpuKind> kinds_;
  std::map<std::string, KindId> index_;  // lower-cased id and aliases -> kind
};

}  // namespace tessera
