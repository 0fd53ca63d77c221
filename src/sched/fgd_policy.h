#pragma once
// Fragmentation Gradient Descent (FGD, Weng et al., USENIX ATC 2023) as the authors' harness runs it
// (docs: ../shared/reference/fgd-harness.md), plus the pieces it is built from: the typical-task
// distribution, the fragmentation measure and the per-seed node order that breaks ties (base/random.h's
// SeededRng). tessera's node scorer (node_scorer.h) reuses the same engine.
//
// Harness requests are single tasks (Request::tasks == 1) of one of three forms:
//   CPU-only:  gpus_per_task == 0 && gpu_milli == 0
//   sharing:   gpus_per_task == 0 && 0 < gpu_milli < 1000 (a share of one non-MIG GPU)
//   whole:     gpus_per_task == k >= 1 (k fully free non-MIG GPUs), or gpus_per_task == 0 && gpu_milli == 1000
// MIG GPUs count as having no free share (GpuState::free_milli == 0).
//
// Thread safety: a policy object keeps a mutable memo cache; use one policy object per thread.

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/random.h"
#include "sched/cluster_state.h"
#include "sched/policy.h"
#include "sched/task_shape.h"

namespace tessera {

// Appends whole grants of node `n`'s whole-free GPUs (non-MIG, no task), lowest index first, until `tp` holds
// `count` GPUs or the node has no more.
void AppendWholeFreeGpus(const ClusterState& s, NodeId n, int count, TaskPlacement* tp);
// A uniformly random permutation of 0..n-1 (Fisher-Yates over SeededRng(seed)).
std::vector<int32_t> SeededPermutation(int32_t n, uint64_t seed);
// The node order that breaks score ties: SeededPermutation(n, *seed), or 0..n-1 without a seed.
std::vector<int32_t> NodeOrder(int32_t n, std::optional<uint64_t> seed);

// A node as the measure sees it: its GPU kind, free CPU and the free milli of each GPU.
struct NodeResources {
  KindId kind = kNone;
  int64_t free_cpu_milli = 0;
  std::vector<int> free_milli;  // per GPU, 0..1000
};
NodeResources NodeResourcesOf(const ClusterState& s, NodeId n);

// GPU milli of `node` that a task of shape `m` cannot use (fgd-harness.md, "Fragmentation of a node").
int64_t FragmentedMilli(const NodeResources& node, const TaskShape& m);
// F(node) = sum over typical shapes of p_m * FragmentedMilli(node, m).
double NodeFragmentation(const NodeResources& node, const TaskShapeDistribution& dist);
// FGD's integer node score: int(100 * sigmoid((before - after) / 1000)), truncated toward zero.
int FgdScore(double frag_before, double frag_after);

namespace fgd_internal {

// Nodes with equal (kind, free cpu, free memory, sorted free milli) are one class: every per-class
// quantity (F, per-shape counts, the score of a task) is computed once per class, not once per node.
struct NodeClass {
  KindId kind = kNone;
  int64_t free_cpu = 0;
  int64_t free_mem = 0;
  std::vector<int> sorted_free;    // ascending
  std::vector<int> distinct_free;  // ascending, distinct, > 0
  std::vector<int> cnt_ge;         // per typical shape: GPUs with free >= shape's share
  std::vector<int64_t> sum_lt;     // per typical shape: free milli of GPUs with free < shape's share
  int64_t total_free = 0;
  double frag = 0;                 // F(class)
  uint64_t stamp = 0;              // request stamp the cached score belongs to
  double score = 0;
  uint16_t best_values = 0;        // bit i: distinct_free[i] reaches `score` (sharing tasks)
};

struct NodeEntry {
  const ClusterState* owner = nullptr;
  uint32_t version = 0;
  int64_t free_cpu = -1;
  int64_t free_mem = -1;
  std::vector<int16_t> free_milli;  // per GPU, as last seen
  int32_t cls = -1;
  int max_free = 0;
};

// What a scoring rule needs to know about a task.
struct TaskDelta {
  TaskShape shape;
  int64_t host_memory_mib = 0;
};

// Scores one class for a task; higher is better. For sharing tasks only the distinct free values in
// `allowed` (bit i = distinct_free[i]) are candidates, and it reports which of them reach the best score.
class ClassScorer {
 public:
  static constexpr uint16_t kAllValues = 0xffff;
  virtual ~ClassScorer() = default;
  virtual double Score(const NodeClass& c, const TaskDelta& t, const TaskShapeDistribution& dist, uint16_t allowed,
                       uint16_t* best_values) const = 0;
};

// Shared engine: walks nodes in the seed's order (node index order without a seed), keeps per-node class
// ids current by content, scores each class once per request and returns the earliest node (in that
// order) of the best class.
class ClassEngine {
 public:
  ClassEngine(TaskShapeDistribution dist, std::optional<uint64_t> seed);
  PlaceResult Place(const ClusterState& s, const Request& r, const ClassScorer& scorer,
                    std::string_view policy_name) const;
  const TaskShapeDistribution& dist() const { return dist_; }

  // For callers that walk the nodes themselves: BeginRequest once per request, then ScoreNode for each
  // node that has the task's CPU, host memory and kind (and, whole tasks, its free GPUs). For a sharing
  // task only GPUs with at least `gpu_memory_mib` free are candidates (-infinity when none qualifies), and
  // ShareGpu names the lowest-index one reaching the node's best score (kNone when none).
  void BeginRequest(int num_nodes) const;
  double ScoreNode(const ClusterState& s, NodeId n, const TaskDelta& d, int64_t gpu_memory_mib,
                   const ClassScorer& scorer) const;
  GpuId ShareGpu(const ClusterState& s, NodeId n, const TaskDelta& d, int64_t gpu_memory_mib,
                 const ClassScorer& scorer) const;

 private:
  void EnsureOrder(int n) const;
  int32_t Refresh(const ClusterState& s, NodeId n) const;
  int32_t ClassFor(const ClusterState& s, NodeId n, const NodeEntry& e) const;
  // Bits of class `c`'s distinct free values that fit the share (`*fit`) and that a GPU of node n with
  // enough free memory has (returned).
  uint16_t AllowedValues(const ClusterState& s, NodeId n, const NodeClass& c, int share, int64_t gpu_memory_mib,
                         uint16_t* fit) const;
  // The class's score for the request being placed, cached per request stamp.
  double CachedScore(NodeClass& c, const TaskDelta& d, const ClassScorer& scorer) const;

  TaskShapeDistribution dist_;
  std::optional<uint64_t> seed_;
  mutable std::vector<int32_t> order_;
  mutable std::vector<NodeEntry> entries_;
  mutable std::vector<NodeClass> classes_;
  mutable std::unordered_map<std::string, int32_t> class_index_;
  mutable uint64_t stamp_ = 0;
};

// F of class `c` after the task takes: one GPU of free value `v` reduced by the task's share (sharing),
// `k` whole GPUs (whole) or nothing (CPU-only); CPU reduced by the task's CPU.
double FragAfter(const NodeClass& c, const TaskDelta& t, int v, const TaskShapeDistribution& dist);

}  // namespace fgd_internal

// FGD: the node whose fragmentation drops most (integer score, ties to the earliest node in the seed's
// node order, node index order without a seed); for sharing tasks the lowest-index GPU reaching the
// node's best score.
class FgdPolicy : public Policy {
 public:
  FgdPolicy(TaskShapeDistribution dist, std::optional<uint64_t> seed);
  std::string_view name() const override { return "fgd"; }
  PlaceResult Place(const ClusterState& snapshot, const Request& request) const override;

 private:
  fgd_internal::ClassEngine engine_;
};

}  // namespace tessera
