#pragma once
// A pod's ResourceClaims from decision to binding (kubernetes-contracts.md section 8, kube-scheduler's
// DynamicResources plugin order). PlanDraPod decides, without I/O: every claim of the pod is resolved
// (pod.spec.resourceClaims by name, or through pod.status.resourceClaimStatuses for a template's claim);
// claims already allocated fix the node (a claim shared by several pods is allocated once and only reserved
// for the others); the rest are allocated by AllocateDra on that node or the best one. ExecuteDraPlan then
// writes, per claim: the finalizer resource.kubernetes.io/delete-protection in a normal update (when
// missing), then allocation and reservedFor in ONE /status update (an allocated claim only gets the pod
// added to reservedFor; an allocation is never rewritten); and only after every claim is allocated and
// reserved for the pod, the binding with the pod's UID. A conflict (409) re-reads the claim and retries; a
// claim that was allocated meanwhile by someone else ends the attempt (the next pass plans again).

#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "k8s/api/api_client.h"
#include "k8s/dra/dra_allocator.h"
#include "k8s/dra/dra_model.h"
#include "k8s/dra/dra_objects.h"

namespace tessera {

// What PlanDraPod sees: the model, classes, usage (devices in use; a bind plan's new devices are added to
// it) and the claims by "namespace/name" as JSON.
struct DraWorld {
  const DraModel* model = nullptr;
  const DraClassMap* classes = nullptr;
  DraUsage* usage = nullptr;
  const std::map<std::string, nlohmann::json>* claims = nullptr;
  std::vector<std::string> nodes;  // nodes pods may go to (ready, schedulable)
  DraPolicy policy = DraPolicy::kTessera;
};

struct DraClaimWrite {
  std::string key;                       // namespace/name
  bool allocate = false;                 // false: already allocated, only reserve
  std::vector<DraDeviceResult> results;  // when allocate
};

struct DraPodPlan {
  enum class Kind { kBind, kWait, kRefuse };
  Kind kind = Kind::kWait;
  std::string node;
  std::vector<DraClaimWrite> claims;  // every claim of the pod, in spec order (kBind)
  std::string reason, message;  // kRefuse: PodScheduled=False reason and message; kWait: what it waits for
};

// The claim keys ("namespace/name") of a pod's spec.resourceClaims, in order; empty strings where a
// template's claim has no name in the pod's status yet.
std::vector<std::string> PodClaimKeys(const nlohmann::json& pod);
// Whether the pod asks for claims (spec.resourceClaims is not empty).
bool PodUsesDra(const nlohmann::json& pod);

DraPodPlan PlanDraPod(const nlohmann::json& pod, const DraWorld& world);

// One API call: method ("GET", "PUT", "POST"), path, body (null for GET).
using DraCall = std::function<ApiResponse(const std::string& method, const std::string& path,
                                          const nlohmann::json& body)>;
DraCall DraCallOf(const ApiClient* api);

struct DraBindOutcome {
  bool bound = false;
  std::string error;                       // why not
  std::vector<nlohmann::json> claims_now;  // claims as the API server returned them after our writes
};

// Writes a kBind plan in kube-scheduler's order (see above). `claims` as in DraWorld.
DraBindOutcome ExecuteDraPlan(const nlohmann::json& pod, const DraPodPlan& plan,
                              const std::map<std::string, nlohmann::json>& claims, const DraCall& call);

}  // namespace tessera
