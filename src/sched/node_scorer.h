#pragma once
// NodeScorer: how a packing policy ranks nodes for one task that takes whole non-MIG GPUs, a share of
// one non-MIG GPU, or no GPU at all. EnginePolicy consults it for single tasks (docs/architecture.md,
// "Policies"); gangs and MIG instances keep the engine's own rules. Higher scores win; equal scores go to
// the node of lower Rank (the node order: node index, or a random order drawn once from a tie seed, which
// is how the FGD harness breaks ties).
//
// Scorers keep memo caches (mutable); a cache never changes a score. One scorer per policy object, and a
// policy object per thread.

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <vector>

#include "sched/cluster_state.h"
#include "sched/fgd_policy.h"
#include "sched/request.h"

namespace tessera {

class NodeScorer {
 public:
  static constexpr int64_t kUnusable = std::numeric_limits<int64_t>::min();

  explicit NodeScorer(std::optional<uint64_t> tie_seed) : tie_seed_(tie_seed) {}
  virtual ~NodeScorer() = default;

  // Prepares for scoring `r` against `s`; call once per request, before Score.
  virtual void Begin(const ClusterState& s, const Request& r) const = 0;
  // Score of one task of `r` on node `n`. REQUIRES: the node has the task's CPU, host memory, GPU kind and
  // (whole-GPU tasks) enough fully free GPUs. For a sub-GPU task: kUnusable when no GPU of the node can
  // take the share (not MIG, with the share and the GPU memory free).
  virtual int64_t Score(const ClusterState& s, NodeId n, const Request& r) const = 0;
  // For a sub-GPU task, the GPU of node `n` the share goes to (one that reaches the node's score);
  // kNone when there is none. Call after Begin for the same request.
  virtual GpuId ShareGpu(const ClusterState& s, NodeId n, const Request& r) const = 0;
  // The typical tasks the score counts on `s`: those it was given, else (tessera) those the snapshot's
  // loop learned; null when it counts none.
  virtual const TaskShapeDistribution* Workload(const ClusterState&) const { return nullptr; }
  // Position of `n` in the tie order (lower wins ties).
  int32_t Rank(const ClusterState& s, NodeId n) const;

 private:
  std::optional<uint64_t> tie_seed_;
  mutable std::vector<int32_t> rank_;
};

// tessera's score (docs/evaluation.md, "tessera's score"): FGD's integer gradient over F(node) + S(node) +
// R(task, node): F is FGD's fragmentation measure over the typical-task distribution, S the free GPU milli
// the node's remaining CPU and memory cannot feed at the typical mix's CPU and memory per GPU milli, R the
// reservation cost of taking GPU kinds that tasks pinned to few kinds will need. A share takes the
// lowest-index GPU reaching the node's best score among the GPUs with enough free GPU memory. With an
// empty distribution it scores with the snapshot's learned workload (ClusterState::learned_workload);
// when that is not known either (early in a run, learning off) the score is the engine's
// packing: fewest whole GPUs left (free or idle MIG) for whole GPUs; for a share the node with the fewest
// idle GPUs, a partly used GPU before an idle one, the tightest first.
std::unique_ptr<NodeScorer> MakeTesseraScorer(TaskShapeDistribution dist, std::optional<uint64_t> tie_seed);

// BestFit as the FGD harness scores it: int(100 * (1 - 0.5 * cpu_left / max_cpu - 0.5 * gpu_left / max_gpu)),
// *_left being what the node keeps after the task and max_* the largest node's CPU (millicores) and GPU
// (milli) capacities. A share takes the tightest-fitting GPU (least free share, lowest index).
std::unique_ptr<NodeScorer> MakeBestFitScorer(std::optional<uint64_t> tie_seed);

namespace tessera_internal {
// Per GPU kind, the share of its capacity that typical tasks restricted to a subset of kinds will ask
// for, capped at 1: a constrained shape's GPU demand is spread over its allowed kinds in proportion to
// their capacity, and the workload's total GPU demand is taken to equal cluster capacity (the harness
// reads results at 100% arrived load). 0 for every kind when no typical shape is constrained.
std::vector<double> KindReserveWeights(const TaskShapeDistribution& dist, const Cluster& cluster);
}  // namespace tessera_internal

}  // namespace tessera
