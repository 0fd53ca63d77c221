#pragma once
// Dynamic Resource Allocation objects (resource.k8s.io/v1) as Tessera reads and writes them
// (kubernetes-contracts.md section 8): ResourceSlices in both layouts (1.34: devices and sharedCounters in
// one slice; 1.35+: counters in a slice of their own), DeviceClasses, ResourceClaims and
// ResourceClaimTemplates. Quantities are exact integers in thousandths of their unit (k8s/quantity.h).
// Parsing errors name the object and the field; nothing here throws. Pools: only the newest
// pool.generation counts, and a pool with fewer slices than resourceSliceCount is marked incomplete.

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "base/status.h"

namespace tessera {

inline constexpr const char* kDraFinalizer = "resource.kubernetes.io/delete-protection";

// A semantic version attribute ("8.0.0", "580.126.20", "1.2.3-rc.1").
struct DraVersion {
  int64_t major = 0, minor = 0, patch = 0;
  std::string pre;  // pre-release, empty when none
  bool operator==(const DraVersion&) const = default;
};
Result<DraVersion> ParseDraVersion(const std::string& text);
int CompareDraVersions(const DraVersion& a, const DraVersion& b);  // -1, 0, 1 (semver precedence)

using DraAttribute = std::variant<bool, int64_t, std::string, DraVersion>;

struct DraCounterConsumption {
  std::string counter_set;
  std::map<std::string, int64_t> counters_milli;
};

struct DraDevice {
  std::string name;
  std::map<std::string, DraAttribute> attributes;  // keys as published (qualified or not)
  std::map<std::string, int64_t> capacity_milli;
  std::vector<DraCounterConsumption> consumes;
  bool allow_multiple_allocations = false;
};

struct DraCounterSet {
  std::string name;
  std::map<std::string, int64_t> counters_milli;
};

struct DraSlice {
  std::string name, driver, pool, node_name;  // node_name empty: not node-local (unsupported for now)
  int64_t generation = 0, slice_count = 1;
  std::vector<DraDevice> devices;
  std::vector<DraCounterSet> counter_sets;
};
Result<DraSlice> ParseResourceSlice(const nlohmann::json& slice);

// The newest generation of one pool (driver, name), all its slices merged.
struct DraPool {
  std::string driver, name, node_name;
  int64_t generation = 0, slice_count = 0, slices_seen = 0;
  bool complete() const { return slices_seen >= slice_count; }
  std::vector<DraDevice> devices;  // sorted by name
  std::vector<DraCounterSet> counter_sets;
};
// Pools of the newest generation; `notes` gets one line per incomplete pool, duplicate device or set.
std::vector<DraPool> BuildDraPools(const std::vector<DraSlice>& slices, std::vector<std::string>* notes);

struct DraDeviceClass {
  std::string name;
  std::vector<std::string> selectors;  // CEL expressions
  std::string extended_resource_name;
};
Result<DraDeviceClass> ParseDeviceClass(const nlohmann::json& device_class);

enum class DraAllocationMode { kExactCount, kAll };

// One way to satisfy a request: `exactly`, or one entry of `firstAvailable` (then `name` is set).
struct DraSubRequest {
  std::string name;  // subrequest name; empty for `exactly`
  std::string device_class;
  std::vector<std::string> selectors;
  DraAllocationMode mode = DraAllocationMode::kExactCount;
  int64_t count = 1;
  bool admin_access = false;
};

struct DraRequest {
  std::string name;
  std::vector<DraSubRequest> alternatives;  // one for `exactly`; the firstAvailable list in order otherwise
  bool first_available = false;
  // The name a result carries for alternative `i`: "<request>" or "<request>/<subrequest>".
  std::string ResultName(size_t i) const;
};

struct DraClaimSpec {
  std::vector<DraRequest> requests;
  bool has_constraints = false;  // constraints[] (matchAttribute/distinctAttribute): not evaluated yet
};

struct DraDeviceResult {
  std::string request, driver, pool, device;
  bool operator==(const DraDeviceResult&) const = default;
};

struct DraReservation {
  std::string resource, name, uid;
};

struct DraClaimAllocation {
  std::vector<DraDeviceResult> results;
  std::vector<std::string> nodes;  // nodeSelector matchFields metadata.name In [...]
};

struct DraClaim {
  std::string name, ns, uid, resource_version;
  DraClaimSpec spec;
  std::optional<DraClaimAllocation> allocation;
  std::vector<DraReservation> reserved_for;
  std::vector<std::string> finalizers;
  bool deleting = false;  // metadata.deletionTimestamp set
  bool HasFinalizer() const;
  bool ReservedFor(const std::string& pod_uid) const;
};
Result<DraClaim> ParseResourceClaim(const nlohmann::json& claim);

struct DraClaimTemplate {
  std::string name, ns;
  DraClaimSpec spec;
  nlohmann::json spec_json;  // spec.spec as given, for the claim the controller creates
};
Result<DraClaimTemplate> ParseResourceClaimTemplate(const nlohmann::json& claim_template);

// Parses a ResourceClaimSpec (`where` prefixes field names in errors).
Result<DraClaimSpec> ParseDraClaimSpec(const nlohmann::json& spec, const std::string& where);

// --- Writes (kube-scheduler's order: finalizer update, then one status update, then the binding).

// The claim object with kDraFinalizer added to metadata.finalizers (unchanged when present).
nlohmann::json WithDeleteProtection(nlohmann::json claim);
// status.allocation for node-local devices: devices.results plus nodeSelector naming `node`.
nlohmann::json DraAllocationJson(const std::vector<DraDeviceResult>& results, const std::string& node);
// The whole status to write: `allocation` (given, or kept from `current_status` when already allocated)
// and reservedFor with the pod added once (by uid); other status fields of `current_status` are kept.
nlohmann::json DraClaimStatusJson(const nlohmann::json& current_status, const nlohmann::json* allocation,
                                  const std::string& pod_name, const std::string& pod_uid);

}  // namespace tessera
