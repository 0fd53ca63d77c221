#pragma once
// Preemption and eviction as kube-scheduler does them, as pure JSON (the backend sends them): a victim is
// marked DisruptionTarget=True (reason PreemptionByScheduler, naming the preemptor), then evicted through
// the Eviction API (policy/v1) with no deleteOptions.gracePeriodSeconds, so its own
// terminationGracePeriodSeconds applies; the preemptor carries status.nominatedNodeName while its victims
// terminate. And how a run's pod ended, as the backend reports it.

#include <string>

#include <nlohmann/json.hpp>

namespace tessera {

// The Eviction of pod `ns`/`name` with the UID precondition (no grace period: the pod's own applies).
nlohmann::json EvictionFor(const std::string& ns, const std::string& name, const std::string& uid);
// The strategic merge patch of a victim's status: condition DisruptionTarget=True, reason
// PreemptionByScheduler, `message`, at `now` (RFC 3339).
nlohmann::json DisruptionTargetPatch(const std::string& message, const std::string& now);
// The patch of a preemptor's status.nominatedNodeName (`node` empty: cleared).
nlohmann::json NominatedNodePatch(const std::string& node);
// The pod's status.nominatedNodeName ("" when none).
std::string NominatedNode(const nlohmann::json& pod);

// How a pod of a run stands: running (or waiting), done (Succeeded), failed (Failed), deleted (its user
// deleted it: deletionTimestamp set, no disruption condition) or disrupted (evicted or preempted by the
// system: a DisruptionTarget=True condition with deletionTimestamp set, or Failed with it: the eviction
// killed it).
enum class PodEnd { kRunning, kDone, kFailed, kDeleted, kDisrupted };
PodEnd PodEndOf(const nlohmann::json& pod);

}  // namespace tessera
