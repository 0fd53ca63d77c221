#pragma once
// ClusterState: allocation state of every GPU, node and network domain, built from a Cluster and a
// Catalog. It is the snapshot policies read (a const reference) and the thing callers mutate by applying
// placements. Copying it is cheap enough for what-if runs (flat arrays, no pointers into itself).
//
// Thread safety: none; callers own a ClusterState per thread.

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/ids.h"
#include "base/status.h"
#include "model/catalog.h"
#include "model/cluster.h"
#include "model/mig.h"
#include "sched/placement.h"
#include "sched/sharing.h"
#include "sched/task_shape.h"

namespace tessera {

// One MIG GPU instance that exists on a GPU. It is idle, held by one task (dedicated), or shared by
// `sharers` tasks (docs/sharing.md) whose summed compute and memory it records exactly.
struct MigSlot {
  int16_t profile = -1;           // index into GpuKind::profiles
  int8_t start = -1;              // first memory slice
  bool busy = false;              // a task runs in it (dedicated or shared)
  int8_t sharers = 0;             // tasks sharing it (0 = idle or dedicated)
  int8_t sensitive = 0;           // of which latency-sensitive
  int16_t shared_milli = 0;       // summed compute demand of the sharers (thousandths of a full GPU)
  int64_t shared_memory_mib = 0;  // summed memory of the sharers
  bool Shared() const { return sharers > 0; }
};

// Invariants (checked by ClusterState::CheckInvariants):
//  1. !mig_enabled  => n_instances == 0, used_mask == 0, 0 <= free_milli <= 1000,
//                      0 <= free_memory_mib <= kind memory; free_milli == 1000 iff no share is granted.
//  2.  mig_enabled  => free_milli == 0 and free_memory_mib == 0 (capacity lives in instances);
//                      instances[0..n_instances) form a valid layout (model/mig.h) and used_mask is the
//                      union of their memory-slice masks.
//  3. busy_mask is the set of starts of busy instances. A shared instance (sharers > 0) is busy, holds
//     0 <= sensitive <= sharers, shared_milli <= its compute and shared_memory_mib <= its usable memory;
//     a non-shared one has sensitive == shared_milli == shared_memory_mib == 0. A MIG GPU's task count is
//     the sum over busy instances of max(1, sharers) (plus one while cordoned).
//  4. A cordoned GPU shows no free capacity: not MIG => free_milli == 0 and free_memory_mib == 0 (the state
//     holds them); MIG => no idle instance (the state holds them busy) and
//     used_mask also covers the held free slices; either way the state counts one task of its own, so the
//     GPU is never idle. A cordoned node also holds its free CPU and host memory. A removed node is
//     cordoned and holds no task.
struct GpuState {
  KindId kind = kNone;
  NodeId node = kNone;
  bool mig_enabled = false;
  uint8_t n_instances = 0;
  uint8_t used_mask = 0;  // memory slices covered by instances
  uint8_t busy_mask = 0;  // start bits of busy instances
  int16_t free_milli = kMilliPerGpu;
  int16_t tasks = 0;            // tasks holding this GPU (shares, instances or whole)
  int16_t share_sensitive = 0;  // of its fractional shares (non-MIG), the latency-sensitive ones
  int64_t free_memory_mib = 0;
  std::array<MigSlot, 8> instances{};

  bool Idle() const { return tasks == 0; }
  bool WholeFree() const { return !mig_enabled && tasks == 0; }
};

// Over a set of shared MIG instances, each figure at its best for a newcomer, taken separately: no instance
// of the set has more memory or compute headroom left, less compute, fewer sharers or fewer
// latency-sensitive ones. A join test that is monotone in each figure and fails on these fails on every
// instance (sharing.h: MaxJoinMilli).
struct SharedBound {
  int64_t max_left_mib = 0;        // usable memory minus the sharers' memory
  int32_t max_headroom_milli = 0;  // compute minus the sharers' summed demand (thousandths of a GPU)
  int32_t min_capacity_milli = 0;  // the instance's compute
  int8_t min_sharers = 0;
  int8_t min_sensitive = 0;
  void Add(const GpuKind& kind, const MigSlot& m);
  bool operator==(const SharedBound&) const = default;
};

// Per-node aggregates, kept current on every change.
struct NodeState {
  KindId kind = kNone;
  GpuId first_gpu = 0;
  int gpu_count = 0;
  LeafId leaf = 0;
  SpineId spine = 0;
  Tier tier = Tier::kReserved;
  Interconnect interconnect = Interconnect::kPcie;
  int64_t free_cpu_milli = 0;
  int64_t free_memory_mib = 0;
  int free_whole = 0;                   // GPUs with WholeFree()
  int mig_gpus = 0;                     // GPUs with MIG enabled
  int idle_gpus = 0;                    // GPUs with no task (MIG or not)
  int32_t free_milli_total = 0;         // sum of free_milli over non-MIG GPUs
  int inference_tasks = 0;              // tasks of inference classes on this node
  int training_tasks = 0;               // tasks of training class on this node
  uint32_t idle_profile_mask = 0;       // bit p: some GPU has an idle instance of profile p
  uint32_t creatable_profile_mask = 0;  // bit p: some MIG GPU has free slices for profile p
  int idle_mig_gpus = 0;                // MIG GPUs with no busy instance (can be relaid out or switched off)
  int shared_slots = 0;  // MIG instances shared by several tasks (candidates for one more sharer)
  SharedBound shared;    // over those instances: what joining the least loaded one could find at best
  uint32_t version = 0;  // bumped on every change (for memo caches)
};

class ClusterState {
 public:
  // Builds the empty state; GPUs of nodes with mig_enabled start in MIG mode with the layout named by
  // the node's mig_config ("all-balanced", "all-<profile>", or empty = no instances).
  static Result<ClusterState> Build(const Cluster& cluster, const Catalog& catalog);

  const Catalog& catalog() const { return *catalog_; }
  const Cluster& cluster() const { return *cluster_; }
  const GpuKind& kind_of_gpu(GpuId g) const { return catalog_->kind(gpus_[g].kind); }

  int num_nodes() const { return static_cast<int>(nodes_.size()); }
  int num_gpus() const { return static_cast<int>(gpus_.size()); }
  int num_leaves() const { return num_leaves_; }
  int num_spines() const { return num_spines_; }
  const NodeState& node(NodeId n) const { return nodes_[n]; }
  const GpuState& gpu(GpuId g) const { return gpus_[g]; }
  const std::vector<NodeState>& nodes() const { return nodes_; }
  const std::vector<GpuState>& gpus() const { return gpus_; }
  int leaf_free_whole(LeafId l) const { return leaf_free_whole_[l]; }
  // Dense per-node summaries for fast scans (same index as nodes()): whole GPUs usable by a whole-GPU task
  // (free, and free plus idle MIG GPUs), and the union of idle/creatable MIG profile bits.
  const std::vector<uint8_t>& free_whole_index() const { return free_whole_index_; }
  const std::vector<uint8_t>& convertible_index() const { return convertible_index_; }
  const std::vector<uint32_t>& mig_profile_index() const { return mig_profile_index_; }
  // Bitsets over nodes (64 per word): nodes of kind `k` with an idle instance of profile `p`, and with
  // free slices where one could be created. Empty for kinds without MIG.
  const std::vector<uint64_t>& idle_profile_nodes(KindId k, int p) const { return idle_nodes_[k * 32 + p]; }
  // Bit n: node n has a shared MIG instance (shared_slots > 0).
  const std::vector<uint64_t>& shared_nodes() const { return shared_nodes_; }
  // GPU kinds (bit k, k < 64) of every node ever added with GPUs (a removed node's kind stays: a superset).
  uint64_t gpu_kinds_present() const { return gpu_kinds_present_; }
  // Node bitset: nodes with at least one free whole GPU (NodeState::free_whole > 0).
  const std::vector<uint64_t>& free_whole_nodes() const { return free_whole_nodes_; }
  const std::vector<uint64_t>& creatable_profile_nodes(KindId k, int p) const {
    return create_nodes_[k * 32 + p];
  }

  // Checks that `tasks` can be applied now (every grant fits); no change on error.
  Status CanApply(const std::vector<TaskPlacement>& tasks, int64_t cpu_milli, int64_t host_memory_mib) const;
  // Applies a placement: creates/destroys instances and toggles MIG mode as the grants ask, then marks
  // the GPUs, instances and shares used. `inference` selects which per-node class counter to bump.
  // REQUIRES: CanApply(...) is OK (checked; a broken precondition aborts).
  void Apply(const std::vector<TaskPlacement>& tasks, int64_t cpu_milli, int64_t host_memory_mib,
             bool inference);
  // Releases what Apply granted. Instances created by the placement stay (idle) until repartitioned.
  void Release(const std::vector<TaskPlacement>& tasks, int64_t cpu_milli, int64_t host_memory_mib,
               bool inference);

  // Repartition primitives (each requires an idle target; return an error otherwise).
  Status SetMigMode(GpuId g, bool enabled);
  Status CreateInstance(GpuId g, int profile, int start);
  Status DestroyInstance(GpuId g, int start);
  // Replaces every idle instance of `g` by `layout` (busy ones must be kept and be part of it).
  Status Relayout(GpuId g, const std::vector<MigInstance>& layout);

  // Nodes that come and go. Ids stay dense and valid: a new node's GPUs follow every existing GPU, and a
  // removed node stays as a tombstone whose GPUs are never free again.
  // Cordoned capacity gets no new placement (what runs there keeps running): the state holds every free
  // share, idle MIG instance and free memory slice of a cordoned GPU itself, so the node aggregates and the
  // candidate indexes every policy reads show none of it, and capacity released there is held at once.
  // Adds a node described like the cluster file's (its leaf and spine must exist); returns its id.
  Result<NodeId> AddNode(const Node& node);
  // Cordons every GPU of the node (a drain starts so). Idempotent.
  Status CordonNode(NodeId n);
  // Lifts the node's cordon (GPUs cordoned one by one stay cordoned). Error on a removed node.
  Status UncordonNode(NodeId n);
  Status CordonGpu(GpuId g);
  Status UncordonGpu(GpuId g);
  // Removes a drained node: refused, with the reason, unless it is cordoned and no task holds any of its
  // GPUs, CPU or memory.
  Status RemoveNode(NodeId n);
  // Holds `cpu_milli` and `memory_mib` of the node's host capacity for work outside this state (another
  // scheduler's pods), replacing the previous hold: a larger hold takes only what is free now (what tasks use
  // stays theirs; the caller asks again later), a smaller one gives back at once. The node keeps its id and
  // place. Returns the amounts held. Error on a removed node or negative amounts.
  Result<std::pair<int64_t, int64_t>> HoldOutsideHost(NodeId n, int64_t cpu_milli, int64_t memory_mib);
  std::pair<int64_t, int64_t> outside_host(NodeId n) const {
    return outside_hold_.empty() ? std::pair<int64_t, int64_t>{0, 0} : outside_hold_[n];
  }
  bool node_cordoned(NodeId n) const { return !node_flags_.empty() && (node_flags_[n] & kNodeCordoned); }
  bool node_removed(NodeId n) const { return !node_flags_.empty() && (node_flags_[n] & kNodeRemoved); }
  bool gpu_cordoned(GpuId g) const { return !holds_.empty() && holds_[g].on(); }

  // Expected drain times (a placement hint, not allocation state): per node, the latest expected end of the
  // work running there, as the caller's time limits say. Off until EnableDrainTimes(); then kNoWork for a
  // node with nothing to wait for and kNever for work without an expected end. Apply/Release leave them
  // alone: the caller keeps them current (ExtendDrain after a bind). Drivers pass them to the cycle in
  // CycleInput::drain_s, which sets them on the cycle's working copy only.
  static constexpr int64_t kNoWork = -1;
  static constexpr int64_t kNever = INT64_MAX;
  void EnableDrainTimes() { drain_s_.assign(nodes_.size(), kNoWork); }
  // Replaces every node's drain time (one per node; empty = off).
  void SetDrainTimes(std::vector<int64_t> drain_s) { drain_s_ = std::move(drain_s); }
  bool has_drain_times() const { return !drain_s_.empty(); }
  int64_t drain_s(NodeId n) const { return drain_s_.empty() ? kNoWork : drain_s_[n]; }
  void ExtendDrain(NodeId n, int64_t end_s) {
    if (!drain_s_.empty()) drain_s_[n] = std::max(drain_s_[n], end_s);
  }

  // The headroom the control loop learned from observed demand (sharing.h), which admission of sharers uses
  // in place of the configured one: what the cluster measured, not allocation state.
  const LearnedHeadroom& learned_headroom() const { return learned_headroom_; }
  void set_learned_headroom(const LearnedHeadroom& h) { learned_headroom_ = h; }
  // The workload's typical tasks the control loop learned from submissions (control/workload_learner.h);
  // null: not learned. A policy whose node score counts typical tasks uses it where it was given none.
  const std::shared_ptr<const TaskShapeDistribution>& learned_workload() const { return learned_workload_; }
  void set_learned_workload(std::shared_ptr<const TaskShapeDistribution> w) {
    learned_workload_ = std::move(w);
  }

  // Shared instances of a GPU can be closed to new sharers (a placement hint, not allocation state): the
  // cycle closes the GPUs a gang reservation counts on, so that joining sharers cannot keep them busy past
  // the reservation's start. Apply/Release leave it alone.
  void CloseSharing(GpuId g) {
    if (sharing_closed_.size() < gpus_.size()) sharing_closed_.resize(gpus_.size(), 0);
    if (g >= 0 && g < static_cast<GpuId>(sharing_closed_.size())) sharing_closed_[g] = 1;
  }
  bool sharing_closed(GpuId g) const {
    return g >= 0 && g < static_cast<GpuId>(sharing_closed_.size()) && sharing_closed_[g];
  }

  // What tasks hold, not counting what a cordon holds (capacity kept free of new work is not in use).
  int64_t AllocatedMilliOf(GpuId g) const;              // compute-equivalent thousandths of GPU `g`
  int TasksOf(GpuId g) const;                           // tasks on GPU `g`
  bool InstanceHeldByCordon(GpuId g, int start) const;  // the idle instance at `start` is taken by a cordon
  // Totals.
  int64_t AllocatedMilli() const;  // compute-equivalent thousandths of GPU held by tasks
  // Verifies every invariant above plus node/leaf aggregates; returns the first violation.
  Status CheckInvariants() const;

 private:
  void RefreshNode(NodeId n);
  uint32_t CreatableProfiles(const GpuState& gs) const;
  Status AppendNode(const Node& node);
  void Hold(GpuId g);
  void Unhold(GpuId g);
  void Absorb(GpuId g);
  void HoldHost(NodeId n);
  int PhantomTasks(GpuId g) const;
  Status CheckHold(GpuId g) const;
  Status CheckShareGpu(GpuId g) const;
  Status CheckMigGpu(GpuId g, int* shared, SharedBound* bound) const;
  Status CheckIndexes() const;
  Status Cordoned(GpuId g) const;
  void Touch(NodeId n) { ++nodes_[n].version; }

  // Capacity a cordoned GPU holds back from placement (see AddNode...RemoveNode).
  struct CordonHold {
    bool by_gpu = false;
    bool by_node = false;
    int16_t milli = 0;       // not MIG: the free share held
    int64_t memory_mib = 0;  // not MIG: its free memory
    uint8_t slices = 0;      // MIG: free memory slices held (no instance can be created there)
    uint8_t instances = 0;   // MIG: start bits of idle instances held busy
    bool on() const { return by_gpu || by_node; }
  };
  static constexpr uint8_t kNodeCordoned = 1, kNodeRemoved = 2;

  const Catalog* catalog_ = nullptr;
  const Cluster* cluster_ = nullptr;
  std::shared_ptr<const Cluster> owned_cluster_;        // the cluster once a node was added (copy on write)
  std::vector<CordonHold> holds_;                       // per GPU; empty until something is cordoned
  std::vector<uint8_t> node_flags_;                     // per node; empty until something is cordoned
  std::vector<std::pair<int64_t, int64_t>> host_hold_;  // per node: CPU milli and MiB a node cordon holds
  std::vector<std::pair<int64_t, int64_t>> outside_hold_;  // per node: HoldOutsideHost; empty until used
  std::vector<NodeState> nodes_;
  std::vector<GpuState> gpus_;
  std::vector<int> leaf_free_whole_;
  std::vector<uint8_t> free_whole_index_;
  std::vector<uint8_t> convertible_index_;
  std::vector<uint32_t> mig_profile_index_;
  std::vector<std::vector<uint64_t>> idle_nodes_;  // [kind * 32 + profile] -> node bitset
  std::vector<uint64_t> shared_nodes_;             // node bitset: shared_slots > 0
  std::vector<uint64_t> free_whole_nodes_;         // node bitset: free_whole > 0
  uint64_t gpu_kinds_present_ = 0;
  std::vector<std::vector<uint64_t>> create_nodes_;  // [kind * 32 + profile] -> node bitset
  // Per kind: profiles (bit p) with an allowed start free under each 8-bit used mask, and media profiles.
  std::vector<std::array<uint32_t, 256>> creatable_by_mask_;
  std::vector<uint32_t> media_profiles_;
  int num_leaves_ = 0;
  int num_spines_ = 0;
  std::vector<int64_t> drain_s_;         // empty = drain times off
  std::vector<uint8_t> sharing_closed_;  // per GPU; empty = none closed
  LearnedHeadroom learned_headroom_;
  std::shared_ptr<const TaskShapeDistribution> learned_workload_;
};

}  // namespace tessera
