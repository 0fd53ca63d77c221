#pragma once
// Policies of the FGD evaluation harness (../shared/reference/fgd-harness.md) besides FGD itself:
// BestFit with the harness's exact integer formula, Random, and `tessera`'s packing score for non-MIG
// sharing / whole-GPU single tasks. All take the harness request forms described in fgd_policy.h, break
// score ties by the seed's node order and are pure given their construction arguments (seed,
// typical-task distribution); memo caches never change a decision.

#include <cstdint>
#include <memory>
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

// BestFit: score int(100 * (1 - 0.5 * cpu_left / max_cpu - 0.5 * gpu_left / max_gpu)), where *_left is
// what the node keeps after the task and max_* are the largest node's CPU (millicores) and GPU (milli)
// capacities (128,000 and 8,000 on openb). Highest score wins; ties to the earliest node in seed order.
class BestFitPolicy : public Policy {
 public:
  explicit BestFitPolicy(uint64_t seed) : seed_(seed) {}
  std::string_view name() const override { return "bestfit"; }
  PlaceResult Place(const ClusterState& snapshot, const Request& request) const override;

 private:
  uint64_t seed_;
  mutable std::vector<int32_t> order_;
};

// Random: a uniformly random feasible node (for a sharing task a random GPU on it that fits), drawn from a generator seeded by (seed, request id), so the
// choice depends only on the snapshot, the request and the seed.
class RandomPolicy : public Policy {
 public:
  explicit RandomPolicy(uint64_t seed) : seed_(seed) {}
  std::string_view name() const override { return "random"; }
  PlaceResult Place(const ClusterState& snapshot, const Request& request) const override;

 private:
  uint64_t seed_;
};

// DotProd (Tetris's alignment score as the harness runs it): the node's free vector (CPU millicores, total
// free GPU milli) and the task's demand vector, each divided by the largest node's capacities (128,000
// and 8,000 on openb); score int(100 * (1 - dot / 2)), so the node whose free resources align least with
// the demand wins. Sharing tasks take the tightest-fitting GPU. Ties to the earliest node in seed order.
class DotProdPolicy : public Policy {
 public:
  explicit DotProdPolicy(uint64_t seed) : seed_(seed) {}
  std::string_view name() const override { return "dotprod"; }
  PlaceResult Place(const ClusterState& snapshot, const Request& request) const override;

 private:
  uint64_t seed_;
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
  explicit GpuClusteringPolicy(uint64_t seed) : seed_(seed) {}
  std::string_view name() const override { return "gpuclustering"; }
  PlaceResult Place(const ClusterState& snapshot, const Request& request) const override;

 private:
  uint64_t seed_;
  mutable std::vector<int32_t> order_;
};

// GpuPacking: prefer partly used GPUs, then free GPUs on partly used nodes, then empty nodes. The task's
// GPUs are the tightest fits (fewest free milli first). Score: sharing task on a partly used GPU with f
// free milli: max(100 - int(f * 100 / 1000) / 10, 50); on a partly used node, needing u fully free GPUs:
// max(50 - u, 33); on a node whose n GPUs are all free: max(33 - n, n). CPU-only tasks score 0
// everywhere. Ties to the earliest node in seed order.
class GpuPackingPolicy : public Policy {
 public:
  explicit GpuPackingPolicy(uint64_t seed) : seed_(seed) {}
  std::string_view name() const override { return "gpupacking"; }
  PlaceResult Place(const ClusterState& snapshot, const Request& request) const override;

 private:
  uint64_t seed_;
  mutable std::vector<int32_t> order_;
};

// tessera's score for non-MIG sharing / whole-GPU single tasks (docs/evaluation.md, "FGD harness"):
// FGD's integer gradient over F(node) + S(node), where S is the free GPU milli the node's remaining CPU
// and memory cannot feed at the typical mix's CPU and memory per GPU milli (what FGD's GPU-only measure
// misses). Ties to the earliest node of the seed's order; sharing tasks take the lowest-index GPU reaching
// the node's best score.
class TesseraPackingPolicy : public Policy {
 public:
  TesseraPackingPolicy(TaskShapeDistribution dist, uint64_t seed);
  std::string_view name() const override { return "tessera"; }
  PlaceResult Place(const ClusterState& snapshot, const Request& request) const override;

 private:
  fgd_internal::ClassEngine engine_;
  double cpu_per_milli_ = 0;  // typical mix: mean CPU (millicores) per GPU milli
  double mem_per_milli_ = 0;  // typical mix: mean host memory (MiB) per GPU milli
  mutable std::vector<double> reserve_weight_;  // per kind, from the first snapshot's cluster
  mutable std::vector<double> reserve_cost_;    // per kind, for the request being placed
};

namespace tessera_internal {
// Per GPU kind, the share of its capacity that typical tasks restricted to a subset of kinds will ask
// for, capped at 1: a constrained shape's GPU demand is spread over its allowed kinds in proportion to
// their capacity, and the workload's total GPU demand is taken to equal cluster capacity (the harness
// reads results at 100% arrived load). 0 for every kind when no typical shape is constrained.
std::vector<double> KindReserveWeights(const TaskShapeDistribution& dist, const Cluster& cluster);
}  // namespace tessera_internal

// Harness policy names: "fgd", "bestfit", "random", "dotprod", "gpuclustering", "gpupacking", "tessera".
std::vector<std::string> HarnessPolicyNames();
// Builds a harness policy. `dist` is the workload's typical-task distribution (fgd, tessera); `seed`
// fixes the node order that breaks ties (and Random's draws).
Result<std::unique_ptr<Policy>> MakeHarnessPolicy(std::string_view name, const TaskShapeDistribution& dist,
                                                  uint64_t seed);

}  // namespace tessera
