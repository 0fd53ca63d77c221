#pragma once
// EnginePolicy: the placement machinery shared by the named policies, parameterised by traits.
//
// Algorithm (for one request):
//  1. Sub-GPU task (gpus_per_task == 0): MIG-aware policies pick the smallest MIG profile covering the
//     memory and compute need (model/workload.h) on each allowed kind. Candidates, best first:
//       A  an idle instance of exactly that profile;
//       C  a new instance of that profile in free slices of a MIG GPU (repartitioning policies);
//       S  a share of a partly used non-MIG GPU (share-capable policies, memory checked);
//       A' an idle larger instance that covers the need;
//       D  destroy idle instances on a MIG GPU so the profile fits (repartition);
//       E  switch an idle GPU to MIG mode and create the instance;
//       S0 a share of an idle non-MIG GPU.
//     MIG-unaware policies treat the task as one whole GPU. Policies with share_instances first try a
//     place in a shared instance, then a new shared instance (docs/sharing.md), before these.
//  2. Whole-GPU tasks and gangs (all or nothing): topology-aware policies try one node, then one leaf
//     switch, then one spine group, then anywhere (unless the request requires one leaf); within a domain
//     they best-fit (fewest free GPUs left) and fill the fewest nodes. Spreading policies (kube-scheduler's
//     LeastAllocated) place task by task on the least-allocated node.
//  3. Single tasks that take whole non-MIG GPUs, a share of a non-MIG GPU, or no GPU: a policy with a
//     NodeScorer (node_scorer.h: tessera's, bestfit's) ranks the candidate nodes by its score, after the
//     engine's own keys (MIG before shares where MIG is possible, class separation, drain alignment);
//     equal scores go to the scorer's tie order. Without a scorer: the packing or spreading rules above.
//  4. Every result says where and why, or why nothing fits, with the numbers.

#include <memory>
#include <optional>
#include <string>
#include <tuple>

#include "sched/node_scorer.h"
#include "sched/policy.h"
#include "sched/sharing.h"

namespace tessera {

struct PolicyTraits {
  std::string name;
  bool mig_aware = true;         // sub-GPU tasks may use MIG instances
  bool repartition = true;       // may create/destroy instances and switch MIG mode on idle GPUs
  bool share = true;             // sub-GPU tasks may share non-MIG GPUs
  bool topology = true;          // gangs prefer node, then leaf, then spine
  bool spread = false;           // LeastAllocated node scoring instead of packing
  bool separate_classes = true;  // keep inference and training on different nodes when possible
  bool frag_aware = true;        // choose MIG starts that keep the most layout freedom
  // Several inference replicas may share one MIG instance (docs/sharing.md): join a shared instance with
  // room, else open one where the replica's demand makes a shared instance cheaper per replica than a slice.
  bool share_instances = false;
  // A sub-GPU task's need is a named profile's (the largest across GPU kinds): it takes an instance of
  // that profile only (on each kind the largest profile the need contains), never a larger idle one
  // (Kubernetes: a pod asking nvidia.com/mig-2g.20gb can only run on that resource).
  bool exact_mig_profiles = false;
  // Find candidate nodes for a slice from the state's node bitsets instead of visiting every node; the
  // choices are the same (tests compare both ways).
  bool node_index = true;
  // Fractional shares of non-MIG GPUs admit a sharer only when every sharer's worst slowdown stays within
  // its SLO (sharing.h SharerFits with the policy's SharingOptions), as shared MIG instances do.
  bool share_admission = false;
};

struct WholeScan;  // engine_policy.cc: what a pass over the nodes found for a whole-GPU request

class EnginePolicy : public Policy {
 public:
  explicit EnginePolicy(PolicyTraits traits, std::unique_ptr<NodeScorer> scorer = nullptr,
                        SharingOptions sharing = {})
      : traits_(std::move(traits)), scorer_(std::move(scorer)), sharing_(sharing) {}
  std::string_view name() const override { return traits_.name; }
  PlaceResult Place(const ClusterState& snapshot, const Request& request) const override;
  const PolicyTraits& traits() const { return traits_; }

 private:
  PlaceResult PlaceSubGpu(const ClusterState& s, const Request& r) const;
  PlaceResult PlaceSlice(const ClusterState& s, const Request& r) const;
  // PlaceSlice's steps (engine_policy.cc).
  struct SliceSearch;
  void SliceFastPath(const ClusterState& s, const Request& r, SliceSearch* q) const;
  bool SliceCandidates(const ClusterState& s, const Request& r, SliceSearch* q) const;
  bool SliceNode(const ClusterState& s, const Request& r, NodeId n, SliceSearch* q) const;
  int ShareCategory(const ClusterState& s, const Request& r, NodeId n, bool shares_only,
                    int64_t* share_score) const;
  void SliceDestroy(const ClusterState& s, const Request& r, SliceSearch* q) const;
  PlaceResult SliceNoFit(const Request& r, const SliceSearch& q) const;
  PlaceResult SliceResult(const ClusterState& s, const Request& r, SliceSearch* q) const;
  // Whether, once no exact idle or creatable instance exists, only idle larger instances and free whole GPUs
  // can serve the request (no fractional share of a non-MIG GPU competes).
  bool MigCandidatesOnly(const ClusterState& s, const Request& r) const;
  // Sharing (share_instances): a place in an instance already shared, or a new shared instance when the
  // request's demand makes one cheaper per replica than a dedicated slice; ok == false when neither applies.
  PlaceResult JoinShared(const ClusterState& s, const Request& r) const;
  // Lower wins: class conflict, drain extension, memory left in the instance (best fit), node, GPU, start.
  using JoinKey = std::tuple<int, int, int64_t, NodeId, GpuId, int>;
  // Offers node n's shared instances to `r`: keeps the best (lowest key) that fits in best and grant.
  void JoinOnNode(const ClusterState& s, const SharingOptions& o, const Request& r, NodeId n, std::optional<JoinKey>* best,
                  GpuGrant* grant) const;
  PlaceResult OpenShared(const ClusterState& s, const Request& r) const;
  // Whether the instance of dedicated grant `g` would still take a small replica (kRoomMib, kRoomMilli)
  // within every SLO: then it is opened as shared, so that later replicas can fill it.
  bool HasRoom(const ClusterState& s, const Request& r, const GpuGrant& g) const;
  static constexpr int64_t kRoomMib = 2048;
  static constexpr int kRoomMilli = 20;
  PlaceResult SharedResult(const ClusterState& s, const Request& r, GpuGrant grant, std::string_view what) const;
  PlaceResult PlaceWhole(const ClusterState& s, const Request& r) const;
  void ScanWhole(const ClusterState& s, const Request& r, WholeScan* w) const;
  PlaceResult PlaceSpread(const ClusterState& s, const Request& r) const;
  PlaceResult PlaceCpuOnly(const ClusterState& s, const Request& r) const;
  // Minus the scorer's score of node n (a key: lower wins); the largest int64 when the scorer rejects it.
  int64_t ScoreKey(const ClusterState& s, NodeId n, const Request& r) const;
  // The sharing options admission uses on `s`: the policy's, with the headroom the snapshot learned.
  SharingOptions Sharing(const ClusterState& s) const { return WithLearned(sharing_, s.learned_headroom()); }
  // The SLO admission of shares of non-MIG GPUs (share_admission), else none (by compute alone).
  const SharingOptions* Admit() const { return traits_.share_admission ? &sharing_ : nullptr; }
  // Whether class separation ranks nodes on `s`: a policy that separates classes does, unless its node
  // scorer counts the workload's typical tasks (given or learned) and the workload is of one kind (only
  // training, or none): then the score, which counts what they will need, decides. Where training and
  // inference share the cluster, separation keeps gangs' nodes free of sharers and the score ranks within.
  bool Separate(const ClusterState& s) const {
    if (!traits_.separate_classes) return false;
    const TaskShapeDistribution* w = scorer_ ? scorer_->Workload(s) : nullptr;
    return w == nullptr || w->MixesClasses();
  }
  PolicyTraits traits_;
  std::unique_ptr<NodeScorer> scorer_;  // null: no node score (k8s-default, static-mig)
  SharingOptions sharing_;
};

PolicyTraits TesseraTraits();
PolicyTraits K8sDefaultTraits();
PolicyTraits BestFitTraits();
PolicyTraits StaticMigTraits();
PolicyTraits BestFitShareTraits();
PolicyTraits HamiTraits();
PolicyTraits K8sReplicaTraits(std::string name);

}  // namespace tessera
