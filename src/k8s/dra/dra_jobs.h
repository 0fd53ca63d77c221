#pragma once
// Pods with ResourceClaims as jobs of the loop (scheduler.h). A pod whose every claim asks only for whole
// GPUs (requests `exactly` with ExactCount, no selectors of their own, no constraints, a DeviceClass whose
// selectors match only NVIDIA full-GPU devices of the published model) is a job of `gpus` whole GPUs: the
// loop chooses its node and the DRA allocator its devices there when the launch is carried out. Any other
// claim (a MIG slice by CEL, allocationMode All, firstAvailable, request selectors) keeps the pod on the DRA
// path (dra_room.h: planned by the allocator alone, outside quotas and preemption). Also: which GPUs of
// each DRA node the loop may place on (those no claim of a DRA-path pod holds). Pure.

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "k8s/dra/dra_allocator.h"
#include "k8s/dra/dra_model.h"
#include "model/catalog.h"

namespace tessera {

struct DraJobDemand {
  enum class Kind { kWholeGpus, kNotYet, kDraPath };
  Kind kind = Kind::kNotYet;
  int64_t gpus = 0;  // kWholeGpus: whole GPUs over every claim
  std::string why;   // kNotYet: what it waits for; kDraPath: what the loop cannot express
  std::string node;  // kWholeGpus: the node its claims already allocated name ("" when none is allocated)
};

// `class_cache`: DeviceClass name -> whether it selects whole GPUs only (filled as classes are judged on
// `model`; keep it for one model).
DraJobDemand DraJobDemandOf(const nlohmann::json& pod, const std::map<std::string, nlohmann::json>& claims,
                            const DraClassMap& classes, const DraModel& model,
                            std::map<std::string, bool>* class_cache);

// One DRA node as the loop sees it: its GPU kind (the most common known kind of its full GPUs) and how many
// of those GPUs no device of a foreign claim uses.
struct DraLoopNode {
  KindId kind = kNone;
  int total = 0, free = 0;
};

// Per node of `model` with full GPUs of a known kind. An allocated claim is foreign when it is reserved for
// one of `foreign_pods` (uids of pods that are not loop jobs and not done); a claim reserved for nobody (its
// pod gone, the claim controller about to deallocate it) is not.
std::map<std::string, DraLoopNode> DraLoopNodes(const DraModel& model,
                                                const std::map<std::string, nlohmann::json>& claims,
                                                const std::set<std::string>& foreign_pods);

}  // namespace tessera
