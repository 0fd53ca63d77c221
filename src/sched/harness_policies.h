#pragma once
// The baselines of the FGD evaluation harness (../shared/reference/fgd-harness.md) besides FGD itself
// and BestFit (an EnginePolicy with the harness's BestFit scorer, node_scorer.h): Random, DotProd,
// GpuClustering, GpuPacking. All place the harness request forms described in fgd_policy.h (single tasks,
// no GPU memory, no MIG; anything else is a kInvalid result), break score ties by the seed's node order
// (node index order without a seed) and are pure given their seed; memo caches never change a decision.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "sched/fgd_policy.h"
#include "sched/policy.h"

namespace tessera {

// Picks, for a sharing task on a chosen node, the GPU with the least free share that still fits (lowest
// index on ties); for whole-GPU tasks the lowest-index fully free GPUs. Fails when the node lacks them.
Result<TaskPlacement> HarnessGpusOnNode(const ClusterState& s, NodeId n, const TaskShape& t);

// Random: a uniformly random feasible node (for a sharing task a random GPU on it that fits), drawn from
// a generator seeded by (seed, request id; seed 0 when none), so the choice depends only on the snapshot,
// the request and the seed.
class RandomPolicy : public Policy {
 public:
  explicit RandomPolicy(std::optional<uint64_t> seed) : seed_(seed) {}
  std::string_view name() const override { return "random"; }
  PlaceResult Place(const ClusterState& snapshot, const Request& request) const override;

 private:
  std::optional<uint64_t> seed_;
};

// DotProd (Tetris's alignment score as the harness runs it): the node's free vector (CPU millicores, total
// free GPU milli) and the task's demand vector, each divided by the largest node's capacities (128,000
// and 8,000 on openb); score int(100 * (1 - dot / 2)), so the node whose free resources align least with
// the demand wins. Sharing tasks take the tightest-fitting GPU. Ties to the earliest node in seed order.
class DotProdPolicy : public Policy {
 public:
  explicit DotProdPolicy(std::optional<uint64_t> seed) : seed_(seed) {}
  std::string_view name() const override { return "dotprod"; }
  PlaceResult Place(const ClusterState& snapshot, const Request& request) const override;

 private:
  std::optional<uint64_t> seed_;
  mutable std::vector<int32_t> order_;
};

// GpuClustering: keep tasks of the same GPU form together. A GPU task's form is "share" (a part of one
// GPU) or "whole"; a node's forms are those of the GPU tasks it holds, read from its GPUs (a GPU held by
// one task with nothing free is whole, any other used GPU is shared; CPU-only tasks give no form). The
// authors distinguish whole tasks by GPU count (1-GPU vs 8-GPU); the snapshot does not record that, so
// ours does not. Score: 75 if the node holds only the task's form, 50 if that form among others, 25 if
// no GPU task, 0 if only other forms; plus int(25 * (8000 - node free GPU milli) / 8000) (integer
// arithmetic, 8000 = the largest node's GPU milli). CPU-only tasks score 0 everywhere. Sharing tasks
// take the tightest-fitting GPU. Ties to the earliest node in seed order.
class GpuClusteringPolicy : public Policy {
 public:
  explicit GpuClusteringPolicy(std::optional<uint64_t> seed) : seed_(seed) {}
  std::string_view name() const override { return "gpuclustering"; }
  PlaceResult Place(const ClusterState& snapshot, const Request& request) const override;

 private:
  std::optional<uint64_t> seed_;
  mutable std::vector<int32_t> order_;
};

// GpuPacking: prefer partly used GPUs, then free GPUs on partly used nodes, then empty nodes. The task's
// GPUs are the tightest fits (fewest free milli first). Score: sharing task on a partly used GPU with f
// free milli: max(100 - int(f * 100 / 1000) / 10, 50); on a partly used node, needing u fully free GPUs:
// max(50 - u, 33); on a node whose n GPUs are all free: max(33 - n, n). CPU-only tasks score 0
// everywhere. Ties to the earliest node in seed order.
class GpuPackingPolicy : public Policy {
 public:
  explicit GpuPackingPolicy(std::optional<uint64_t> seed) : seed_(seed) {}
  std::string_view name() const override { return "gpupacking"; }
  PlaceResult Place(const ClusterState& snapshot, const Request& request) const override;

 private:
  std::optional<uint64_t> seed_;
  mutable std::vector<int32_t> order_;
};

}  // namespace tessera
