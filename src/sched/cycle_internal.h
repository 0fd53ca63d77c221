#pragma once
// Private to the scheduling cycle (src/sched/cycle*.cc); nothing outside those files includes it. The cycle
// is one object, CycleRun, whose methods live in one file per concern:
//   cycle.cc               RunCycle and the top-level flow: pool order, one job's path, binding, statuses
//   cycle_accounting.cc    setup, GPU units per queue and kind, fair shares, pool-order keys, free capacity
//   cycle_quota.cc         queue limits, per-kind limits, lending limits, production headroom
//   cycle_preemption.cc    victim search, preempt/checkpoint actions, headroom restoration
//   cycle_reservations.cc  gang reservations (what-if on a copy), holds, backfill into holds
//   cycle_estimates.cc     what-if start estimates for jobs left pending

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <queue>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "sched/cycle.h"
#include "sched/preemption.h"
#include "sched/sharing.h"

namespace tessera::cycle_internal {

// GPU units of one grant (see UnitsOf).
int64_t GrantUnits(const GpuKind& kind, const GpuGrant& g, SliceUnits mode);
// GPU units as a GPU count for messages: "2" or "0.50".
std::string Gpus(int64_t milli);

// Per-cycle cache of request shapes that did not fit. Within a cycle capacity only shrinks (until a
// preemption releases some, which clears the cache), so a request at least as large in every dimension as
// a failed one, with the same constraints, fails too and is not tried again.
class FailureCache {
 public:
  struct Entry {
    int tasks, gpt, milli;
    int64_t mem, cpu, host;
    NoFitCode code;
    SharedText reason;
  };
  const Entry* Find(const Request& r) const {
    auto it = groups_.find(Group(r));
    if (it == groups_.end()) return nullptr;
    for (const Entry& e : it->second)
      if (r.tasks >= e.tasks && r.gpus_per_task >= e.gpt && r.gpu_milli >= e.milli && r.gpu_memory_mib >= e.mem &&
          r.cpu_milli >= e.cpu && r.host_memory_mib >= e.host && (r.gpus_per_task == 0) == (e.gpt == 0))
        return &e;
    return nullptr;
  }
  void Add(const Request& r, NoFitCode code, const SharedText& reason) {
    std::vector<Entry>& v = groups_[Group(r)];
    Entry e{r.tasks, r.gpus_per_task, r.gpu_milli, r.gpu_memory_mib, r.cpu_milli, r.host_memory_mib, code, reason};
    // Drop entries the new one makes redundant (they dominate it).
    v.erase(std::remove_if(v.begin(), v.end(),
                           [&](const Entry& o) {
                             return o.tasks >= e.tasks && o.gpt >= e.gpt && o.milli >= e.milli && o.mem >= e.mem &&
                                    o.cpu >= e.cpu && o.host >= e.host && (o.gpt == 0) == (e.gpt == 0);
                           }),
            v.end());
    if (v.size() < 256) v.push_back(std::move(e));
  }
  void Clear() { groups_.clear(); }

 private:
  struct Key {
    uint64_t kind_mask;
    uint32_t flags;
    bool operator==(const Key& o) const { return kind_mask == o.kind_mask && flags == o.flags; }
  };
  struct Hash {
    size_t operator()(const Key& k) const { return std::hash<uint64_t>()(k.kind_mask * 31 + k.flags); }
  };
  static Key Group(const Request& r) {
    uint32_t f = r.tier_mask;
    // Everything besides size that decides where a request may go: a latency-sensitive replica has a tighter
    // sharing SLO and a training task may not share, so neither failure says anything about the other.
    f |= (r.SubGpu() ? 1u : 0u) << 8 | (r.allow_mig ? 1u : 0u) << 9 | (r.allow_share ? 1u : 0u) << 10 |
         (r.require_same_leaf ? 1u : 0u) << 11 | (r.latency_sensitive ? 1u : 0u) << 12 |
         (MayShare(r) ? 1u : 0u) << 13;
    return {r.kind_mask, f};
  }
  std::unordered_map<Key, std::vector<Entry>, Hash> groups_;
};

// One run of the cycle over a working copy of the snapshot (work_). Indices: j = pending job (into
// CycleInput::pending), i = running job (into CycleInput::running), q = queue.
class CycleRun {
 public:
  CycleRun(const CycleInput& in, const Policy& policy)
      : in_(in), o_(in.options), policy_(policy), work_(*in.snapshot) {
    if (!in.drain_s.empty()) work_.SetDrainTimes(in.drain_s);
  }
  Plan Run();

 private:
  struct Outcome {
    bool bound = false;
    bool examined = false;
    int order = -1;  // position in the pool order
    int64_t reserved_start = -1;
  };
  // Pool order of queue heads: production-level priorities first, then demand within a guarantee, then
  // priority, then fair share (lower key first), then queue index.
  struct HeapItem {
    int top;   // 1 = priority at or above cross_queue_preempt_priority
    int aged;  // 1 = the head job is a gang that waited at least gang_aging_s
    int tier;  // 0 = the head job fits within its queue's guarantee
    int prio;
    double key;
    int q;
    uint32_t ver;
    bool operator<(const HeapItem& b) const {  // std::priority_queue pops the largest: invert
      return std::tie(top, aged, b.tier, prio, b.key, b.q) < std::tie(b.top, b.aged, tier, b.prio, key, q);
    }
  };
  struct Phantom {
    JobId job = 0;        // the reserved gang
    int64_t start_s = 0;  // when the reserved gang is expected to start
    int64_t end_s = 0;    // and to end
    std::vector<TaskPlacement> claim;  // the reservation's placement: later reservations plan around it
    std::vector<TaskPlacement> tasks;  // holds: its GPUs that are free now, taken in work_
    // Fences: the free CPU and host memory of each reserved node, held so that no other task lands there
    // (e.g. a new MIG instance on a partly used GPU of the node), which would push the reservation back.
    struct Fence {
      NodeId node;
      int64_t cpu_milli, memory_mib;
    };
    std::vector<Fence> fences;
  };

  // A planned release of capacity on the what-if timeline of a reservation.
  struct PlannedEnd {
    int64_t t;
    const std::vector<TaskPlacement>* tasks;
    int64_t cpu, mem;
    bool inf;
    int claim = -1;  // >= 0: the end of an earlier reservation's gang (index into phantoms_)
    int run = -1;    // >= 0: index into in_.running
  };
  // A release of capacity on the what-if timeline of the start estimates.
  struct EstimateEnd {
    int64_t t;
    const std::vector<TaskPlacement>* tasks;
    int64_t cpu, mem;
    bool inf;
    bool operator>(const EstimateEnd& b) const { return t > b.t; }
  };
  using EstimateEnds = std::priority_queue<EstimateEnd, std::vector<EstimateEnd>, std::greater<EstimateEnd>>;
  // A running job that may be preempted for the job being processed.
  struct VictimCand {
    int i;
    VictimCost cost;
    PreemptKind kind;
  };

  // cycle.cc: the top-level flow.
  void InitStatuses();
  std::vector<int> ProcessInPoolOrder();  // returns the pool order
  void Process(int j);
  bool RejectIfExceedsCluster(int j, int64_t units);
  bool QuotaBlocked(int j, int64_t units);  // true: handled (invalid, or waits, or bound after preemption)
  SharedText CachedFailureReason(const Request& r, const FailureCache::Entry* e);
  // A job that does not fit: backfill into holds, preemption, else a capacity status and maybe a reservation.
  void HandleNoFit(int j, NoFitCode code, SharedText why, int64_t units);
  // start_s: see Action::start_s (-1 = now).
  void Bind(int j, std::vector<TaskPlacement> tasks, std::string reason, int64_t start_s = -1);
  int64_t AfterGrace() const { return o_.termination_grace_s > 0 ? in_.now_s + o_.termination_grace_s : -1; }
  void SetCapacityStatus(int j, NoFitCode code, SharedText reason, int64_t units);
  std::vector<int> AssignPositions(const std::vector<int>& order);  // returns the jobs still pending
  void CompactPending();
  void FillQueueStatuses();

  // cycle_accounting.cc
  void Setup();
  void SetupKinds();
  void SetupQueues();
  void SetupRunning();
  void SetupPending();
  void SetupShares();
  void Account(int q, const std::vector<TaskPlacement>& tasks, int sign);
  int64_t EstimateUnits(const Request& r) const;
  double DominantShare(int q) const;  // max over GPU kinds and GPU memory of held / capacity
  double Key(int q) const;
  void Push(std::priority_queue<HeapItem>& heap, int q);
  int64_t FreeWhole() const;  // idle whole GPUs (free or idle MIG), in units
  int64_t FreeAllowed(const ClusterState& s, const Request& r) const;
  int64_t FreeAllowedWork(const Request& r);  // FreeAllowed(work_, r), memoised until work_ changes
  bool Borrowing(int q) const { return alloc_[q] > guar_[q]; }

  // cycle_quota.cc
  bool QuotaCheck(int j, int64_t units, PendingStatus* st, bool* invalid, int* blocking_queue) const;
  bool KindLimitsOk(int q, const std::vector<TaskPlacement>& tasks, PendingStatus* st) const;
  // Lending limits: a job that takes its queue above its guarantee may not use the idle guarantee other
  // queues keep back (QueueConfig::lending_limit_milli).
  bool LendingOk(int j, int64_t units, PendingStatus* st);
  // Production headroom: a borrowing job below production priority may not leave fewer idle GPUs than
  // CycleOptions::production_headroom_milli.
  bool HeadroomOk(int j, const std::vector<TaskPlacement>& tasks);

  // cycle_preemption.cc
  void RestoreHeadroom();
  // Appends a victim's checkpoint (when due) and preempt actions and takes it out of the accounting.
  // for_job: the job its capacity goes to, -1 for none (production headroom).
  void EmitPreemption(int i, JobId for_job, bool reclaim, std::string reason);
  bool TryPreempt(int j, int64_t units, int64_t quota_need, PlaceResult* placed);
  std::vector<VictimCand> PreemptionCandidates(int j, int64_t units, int64_t quota_need) const;
  void OrderVictimsByNode(const Request& r, std::vector<VictimCand>* cands) const;
  void ReleaseRunning(int i);
  void ReapplyRunning(int i);
  // Whether running job `i` holds a task on a cordoned node or GPU. Such a job is never a victim: the cordon
  // takes what it would free, and a released job could not be applied back onto the held capacity.
  bool OnCordon(int i) const;
  // Releases candidates in order until the job fits (*res); false (and everything re-applied) if it never does.
  bool ReleaseVictims(int j, int64_t units, int64_t quota_need, const std::vector<VictimCand>& cands,
                      std::vector<VictimCand>* released, int64_t* freed_own, PlaceResult* res);
  // Re-applies every released victim the job does not need; returns which were spared.
  std::vector<bool> SpareVictims(int j, int64_t quota_need, const std::vector<VictimCand>& released,
                                 int64_t freed_own, PlaceResult* res);
  void EmitVictims(int j, const std::vector<VictimCand>& released, const std::vector<bool>& spared);

  // cycle_reservations.cc
  bool TryReserve(int j);
  void BuildRunningEnds();
  void CollectPlannedEnds(std::vector<int>* claim_of);
  int64_t FindReservationTime(int j, const std::vector<int>& claim_of, PlaceResult* res);
  std::vector<TaskPlacement> FreeGpuHolds(const std::vector<TaskPlacement>& placed) const;
  void FenceNodes(const std::vector<TaskPlacement>& placed, Phantom* ph);
  bool TryBackfillHolds(int j);
  int64_t ReservedStartUnder(const std::vector<size_t>& open, const std::vector<TaskPlacement>& tasks) const;
  void SetHolds(Phantom& ph, bool held);

  // cycle_estimates.cc
  void Estimate(const std::vector<int>& order);
  ClusterState EstimateStart(EstimateEnds* ends) const;

  const CycleInput& in_;
  const CycleOptions& o_;
  const Policy& policy_;
  ClusterState work_;
  Plan plan_;
  int nq_ = 0;
  int nk_ = 0;                        // GPU kinds present (dense)
  std::vector<int> kind_idx_;         // KindId -> dense index or -1
  std::vector<int64_t> cap_res_;      // per dense kind units, then GPU memory MiB
  std::vector<int64_t> kind_gpus_;    // per KindId: GPUs in the cluster
  int64_t capacity_ = 0;
  std::vector<int> parent_;
  std::vector<bool> leaf_;
  std::vector<int64_t> alloc_, guar_, limit_, fair_, demand_;
  std::vector<std::vector<int64_t>> res_;  // per queue: dense kind units + memory (subtree)
  std::vector<double> hist_share_;
  std::vector<std::vector<int>> qjobs_;
  std::vector<size_t> qnext_;
  std::vector<uint32_t> qver_;
  std::vector<bool> no_borrow_;
  std::vector<int> lending_queues_;  // leaf queues that keep part of their idle guarantee back
  std::vector<int64_t> est_units_;
  std::vector<Outcome> out_;
  std::vector<int64_t> run_units_;
  std::vector<bool> preempted_;
  std::vector<std::pair<int, std::vector<TaskPlacement>>> bound_;  // pending index, tasks
  std::vector<Phantom> phantoms_;
  FailureCache fails_;
  uint64_t fails_generation_ = 0;  // bumped when fails_ is cleared (entries' addresses are reused)
  std::map<std::tuple<int, int, int, int64_t, const void*>, std::pair<uint64_t, SharedText>> dominated_msgs_;
  uint64_t work_version_ = 0;   // bumped on every change to work_
  uint64_t alloc_version_ = 0;  // bumped by Account (setup's other changes come before any search)
  // Preemptors for which PreemptionCandidates found nobody, while work_ and alloc_ stay as they were
  // (memo_versions_): the answer depends on nothing else that a cycle changes, so a saturated cycle scans
  // the running jobs once per kind of preemptor instead of once per pending job.
  struct NoVictims {
    int priority, queue;
    bool within_guarantee, quota_blocked;
    bool operator==(const NoVictims&) const = default;
  };
  std::vector<NoVictims> no_victims_;
  std::pair<uint64_t, uint64_t> memo_versions_{~uint64_t{0}, ~uint64_t{0}};
  struct FreeMemo {
    uint64_t kind_mask;
    uint8_t tier_mask;
    bool sub;
    uint64_t version;
    int64_t value;
  };
  std::vector<FreeMemo> free_memo_;
  int64_t phantom_units_ = 0;  // GPU units held for reservations
  ClusterState scratch_;       // what-if state of TryReserve (buffers reused)
  std::vector<PlannedEnd> running_ends_, ends_buf_;
  bool running_ends_built_ = false;
  int preempt_attempts_ = 0;
  int reservations_ = 0;
  int examined_ = 0;
  int seq_ = 0;
};

}  // namespace tessera::cycle_internal
