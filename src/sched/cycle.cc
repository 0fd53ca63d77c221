#include "sched/cycle.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <queue>
#include <tuple>
#include <unordered_map>

#include "sched/fair_share.h"
#include "sched/preemption.h"

namespace tessera {

const char* ActionKindName(ActionKind k) {
  switch (k) {
    case ActionKind::kBind: return "bind";
    case ActionKind::kPreempt: return "preempt";
    case ActionKind::kCheckpoint: return "checkpoint";
    case ActionKind::kReserve: return "reserve";
    case ActionKind::kRepartition: return "repartition";
  }
  return "?";
}

const char* WaitCategoryName(WaitCategory c) {
  switch (c) {
    case WaitCategory::kWaiting: return "Waiting";
    case WaitCategory::kCapacity: return "Capacity";
    case WaitCategory::kQuota: return "Quota";
    case WaitCategory::kHeld: return "Held";
    case WaitCategory::kInvalid: return "Invalid";
  }
  return "?";
}

namespace {

int64_t GrantUnits(const GpuKind& kind, const GpuGrant& g, SliceUnits mode) {
  if (g.mig_profile >= 0) {
    if (mode == SliceUnits::kMemory && kind.mig_memory_slices > 0)
      return int64_t{kMilliPerGpu} * kind.profiles[g.mig_profile].memory_slices / kind.mig_memory_slices;
    return kind.ProfileComputeMilli(g.mig_profile);
  }
  if (g.milli >= kMilliPerGpu) return kMilliPerGpu;
  if (mode == SliceUnits::kMemory && kind.memory_mib > 0)
    return std::max<int64_t>(1, (g.memory_mib * kMilliPerGpu + kind.memory_mib - 1) / kind.memory_mib);
  return g.milli;
}

int64_t GrantMemory(const GpuKind& kind, const GpuGrant& g) {
  if (g.mig_profile >= 0) return kind.profiles[g.mig_profile].usable_mib;
  if (g.milli >= kMilliPerGpu) return kind.memory_mib;
  return g.memory_mib;
}

std::string Gpus(int64_t milli) {
  if (milli % kMilliPerGpu == 0) return fmt::format("{}", milli / kMilliPerGpu);
  return fmt::format("{:.2f}", static_cast<double>(milli) / kMilliPerGpu);
}

// Grants as they are once applied (instances exist, MIG mode set): re-applying a released placement.
std::vector<TaskPlacement> Steady(const std::vector<TaskPlacement>& tasks) {
  std::vector<TaskPlacement> out = tasks;
  for (TaskPlacement& t : out)
    for (GpuGrant& g : t.gpus) {
      g.create_instance = g.enable_mig = g.disable_mig = false;
      g.destroy_mask = 0;
    }
  return out;
}

bool CapacityCode(NoFitCode c) {
  return c == NoFitCode::kResources || c == NoFitCode::kMigProfileUnavailable || c == NoFitCode::kMemory ||
         c == NoFitCode::kTopologyUnsatisfiable || c == NoFitCode::kFragmented;
}

// Per-cycle cache of request shapes that did not fit. Within a cycle capacity only shrinks (until a
// preemption releases some, which clears the cache), so a request at least as large in every dimension as
// a failed one, with the same constraints, fails too and is not tried again.
class FailureCache {
 public:
  struct Entry {
    int tasks, gpt, milli;
    int64_t mem, cpu, host;
    NoFitCode code;
    std::string reason;
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
  void Add(const Request& r, NoFitCode code, const std::string& reason) {
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
    f |= (r.SubGpu() ? 1u : 0u) << 8 | (r.allow_mig ? 1u : 0u) << 9 | (r.allow_share ? 1u : 0u) << 10 |
         (r.require_same_leaf ? 1u : 0u) << 11;
    return {r.kind_mask, f};
  }
  std::unordered_map<Key, std::vector<Entry>, Hash> groups_;
};

class CycleRun {
 public:
  CycleRun(const CycleInput& in, const Policy& policy)
      : in_(in), o_(in.options), policy_(policy), work_(*in.snapshot) {}
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

  void Setup();
  void Account(int q, const std::vector<TaskPlacement>& tasks, int sign);
  int64_t EstimateUnits(const Request& r) const;
  double Key(int q) const;
  void Push(std::priority_queue<HeapItem>& heap, int q);
  void Process(int j);
  bool QuotaCheck(int j, int64_t units, PendingStatus* st, bool* invalid, int* blocking_queue) const;
  bool KindLimitsOk(int q, const std::vector<TaskPlacement>& tasks, PendingStatus* st) const;
  // Lending limits: a job that takes its queue above its guarantee may not use the idle guarantee other
  // queues keep back (QueueConfig::lending_limit_milli).
  bool LendingOk(int j, int64_t units, PendingStatus* st);
  void RestoreHeadroom();
  // Appends a victim's checkpoint (when due) and preempt actions and takes it out of the accounting.
  // for_job: the job its capacity goes to, -1 for none (production headroom).
  void EmitPreemption(int i, JobId for_job, bool reclaim, std::string reason);
  // Production headroom: a borrowing job below production priority may not leave fewer idle GPUs than
  // CycleOptions::production_headroom_milli.
  bool HeadroomOk(int j, const std::vector<TaskPlacement>& tasks);
  int64_t FreeWhole() const;  // idle whole GPUs (free or idle MIG), in units
  // start_s: see Action::start_s (-1 = now).
  void Bind(int j, std::vector<TaskPlacement> tasks, std::string reason, int64_t start_s = -1);
  int64_t AfterGrace() const { return o_.termination_grace_s > 0 ? in_.now_s + o_.termination_grace_s : -1; }
  bool TryPreempt(int j, int64_t units, int64_t quota_need, PlaceResult* placed);
  bool TryReserve(int j);
  bool TryBackfillHolds(int j);
  void SetHolds(Phantom& ph, bool held);
  void SetCapacityStatus(int j, NoFitCode code, std::string reason, int64_t units);
  void Estimate(const std::vector<int>& order);
  int64_t FreeAllowed(const ClusterState& s, const Request& r) const;
  int64_t FreeAllowedWork(const Request& r);  // FreeAllowed(work_, r), memoised until work_ changes
  bool Borrowing(int q) const { return alloc_[q] > guar_[q]; }

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
  std::map<std::tuple<int, int, int, int64_t, const void*>, std::pair<uint64_t, std::string>> dominated_msgs_;
  uint64_t work_version_ = 0;  // bumped on every change to work_
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

void CycleRun::Setup() {
  const ClusterState& s = *in_.snapshot;
  const Catalog& cat = s.catalog();
  kind_idx_.assign(cat.size(), -1);
  kind_gpus_.assign(cat.size(), 0);
  for (const NodeState& ns : s.nodes()) {
    if (ns.kind < 0 || ns.gpu_count == 0) continue;
    if (kind_idx_[ns.kind] < 0) kind_idx_[ns.kind] = nk_++;
    kind_gpus_[ns.kind] += ns.gpu_count;
  }
  cap_res_.assign(nk_ + 1, 0);
  for (const NodeState& ns : s.nodes()) {
    if (ns.kind < 0 || ns.gpu_count == 0) continue;
    cap_res_[kind_idx_[ns.kind]] += int64_t{kMilliPerGpu} * ns.gpu_count;
    cap_res_[nk_] += cat.kind(ns.kind).memory_mib * ns.gpu_count;
  }
  for (int k = 0; k < nk_; ++k) capacity_ += cap_res_[k];

  nq_ = static_cast<int>(in_.queues.size());
  if (nq_ == 0) nq_ = 1;  // an implicit default queue
  parent_.assign(nq_, -1);
  leaf_.assign(nq_, true);
  guar_.assign(nq_, 0);
  limit_.assign(nq_, -1);
  std::unordered_map<std::string, int> by_name;
  for (int q = 0; q < static_cast<int>(in_.queues.size()); ++q) by_name[in_.queues[q].name] = q;
  for (int q = 0; q < static_cast<int>(in_.queues.size()); ++q) {
    const QueueConfig& qc = in_.queues[q];
    auto it = by_name.find(qc.parent);
    if (!qc.parent.empty() && it != by_name.end() && it->second != q) parent_[q] = it->second;
    guar_[q] = qc.guaranteed_milli;
    limit_[q] = qc.limit_milli;
    if (qc.lending_limit_milli >= 0 && qc.lending_limit_milli < qc.guaranteed_milli) lending_queues_.push_back(q);
  }
  if (in_.queues.empty()) guar_[0] = capacity_;
  // Break parent cycles (bad input): a chain longer than nq_ is cut at the root.
  for (int q = 0; q < nq_; ++q) {
    int a = q, steps = 0;
    while (a >= 0 && steps <= nq_) a = parent_[a], ++steps;
    if (steps > nq_) parent_[q] = -1;
  }
  for (int q = 0; q < nq_; ++q)
    if (parent_[q] >= 0) leaf_[parent_[q]] = false;
  alloc_.assign(nq_, 0);
  demand_.assign(nq_, 0);
  res_.assign(nq_, std::vector<int64_t>(nk_ + 1, 0));
  qjobs_.assign(nq_, {});
  qnext_.assign(nq_, 0);
  qver_.assign(nq_, 0);
  no_borrow_.assign(nq_, false);

  // Running jobs.
  run_units_.assign(in_.running.size(), 0);
  preempted_.assign(in_.running.size(), false);
  for (size_t i = 0; i < in_.running.size(); ++i) {
    const RunningJob& rj = in_.running[i];
    const int q = rj.queue >= 0 && rj.queue < nq_ ? rj.queue : 0;
    run_units_[i] = rj.tasks.empty() ? rj.gpu_milli : UnitsOf(s, rj.tasks, o_.slice_units);
    Account(q, rj.tasks, +1);
    if (rj.tasks.empty())
      for (int a = q; a >= 0; a = parent_[a]) alloc_[a] += rj.gpu_milli;
  }
  // Pending jobs: order within each queue.
  est_units_.resize(in_.pending.size());
  out_.resize(in_.pending.size());
  plan_.pending.resize(in_.pending.size());  // statuses in job order; bound jobs are removed at the end
  for (size_t j = 0; j < in_.pending.size(); ++j) {
    const PendingJob& p = in_.pending[j];
    const int q = p.queue >= 0 && p.queue < nq_ ? p.queue : 0;
    est_units_[j] = EstimateUnits(p.request);
    qjobs_[q].push_back(static_cast<int>(j));
    if (!p.held)
      for (int a = q; a >= 0; a = parent_[a]) demand_[a] += est_units_[j];
  }
  for (int q = 0; q < nq_; ++q) {
    demand_[q] += alloc_[q];
    std::sort(qjobs_[q].begin(), qjobs_[q].end(), [&](int a, int b) {
      const PendingJob& x = in_.pending[a];
      const PendingJob& y = in_.pending[b];
      if (x.request.priority != y.request.priority) return x.request.priority > y.request.priority;
      if (x.submit_time_s != y.submit_time_s) return x.submit_time_s < y.submit_time_s;
      return x.request.id < y.request.id;
    });
  }
  // Fair shares.
  std::vector<FairShareClaim> claims(nq_);
  for (int q = 0; q < nq_; ++q) {
    claims[q].guaranteed = guar_[q];
    claims[q].limit = o_.allow_borrowing ? limit_[q] : (limit_[q] >= 0 ? std::min(limit_[q], guar_[q]) : guar_[q]);
    claims[q].weight = q < static_cast<int>(in_.queues.size()) ? in_.queues[q].over_quota_weight : 1;
    claims[q].demand = demand_[q];
  }
  fair_ = TreeFairShares(parent_, claims, capacity_);
  // Historical usage share (fractions of all recorded usage).
  hist_share_.assign(nq_, 0.0);
  double total_hist = 0;
  for (int q = 0; q < nq_ && q < static_cast<int>(in_.historical_usage.size()); ++q)
    if (leaf_[q]) total_hist += std::max(0.0, in_.historical_usage[q]);
  if (total_hist > 0)
    for (int q = 0; q < nq_ && q < static_cast<int>(in_.historical_usage.size()); ++q)
      hist_share_[q] = std::max(0.0, in_.historical_usage[q]) / total_hist;
}

void CycleRun::Account(int q, const std::vector<TaskPlacement>& tasks, int sign) {
  const ClusterState& s = *in_.snapshot;
  int64_t units = 0;
  std::vector<std::pair<int, int64_t>> per;  // dense kind -> units
  int64_t mem = 0;
  for (const TaskPlacement& t : tasks)
    for (const GpuGrant& g : t.gpus) {
      const KindId k = s.gpu(g.gpu).kind;
      const GpuKind& kind = s.catalog().kind(k);
      const int64_t u = GrantUnits(kind, g, o_.slice_units);
      units += u;
      mem += GrantMemory(kind, g);
      const int d = kind_idx_[k];
      bool found = false;
      for (auto& [dk, du] : per)
        if (dk == d) du += u, found = true;
      if (!found) per.push_back({d, u});
    }
  for (int a = q; a >= 0; a = parent_[a]) {
    alloc_[a] += sign * units;
    for (auto [d, u] : per) res_[a][d] += sign * u;
    res_[a][nk_] += sign * mem;
  }
}

int64_t CycleRun::EstimateUnits(const Request& r) const {
  if (!r.SubGpu()) return int64_t{kMilliPerGpu} * r.TotalGpus();
  if (o_.slice_units == SliceUnits::kCompute) return r.gpu_milli;
  int64_t ref = 0;
  const Catalog& cat = in_.snapshot->catalog();
  for (KindId k = 0; k < static_cast<KindId>(cat.size()); ++k)
    if (kind_gpus_[k] > 0 && r.KindAllowed(k)) ref = std::max(ref, cat.kind(k).memory_mib);
  if (ref <= 0) return r.gpu_milli;
  return std::max<int64_t>(1, (r.gpu_memory_mib * kMilliPerGpu + ref - 1) / ref);
}

double CycleRun::Key(int q) const {
  double dom = 0;
  for (int d = 0; d <= nk_; ++d)
    if (cap_res_[d] > 0) dom = std::max(dom, static_cast<double>(res_[q][d]) / cap_res_[d]);
  return FairShareKey(BlendedShare(dom, hist_share_[q], in_.options.history_weight), fair_[q], capacity_);
}

void CycleRun::Push(std::priority_queue<HeapItem>& heap, int q) {
  if (qnext_[q] >= qjobs_[q].size()) return;
  const int j = qjobs_[q][qnext_[q]];
  const int tier = alloc_[q] + est_units_[j] <= guar_[q] ? 0 : 1;
  const PendingJob& p = in_.pending[j];
  const int prio = p.request.priority;
  const bool gang = p.request.tasks > 1 || p.request.gpus_per_task > 1;
  const int aged = o_.gang_aging_s >= 0 && gang && !p.held && in_.now_s - p.eligible_time_s >= o_.gang_aging_s ? 1 : 0;
  heap.push({prio >= o_.cross_queue_preempt_priority ? 1 : 0, aged, tier, prio, Key(q), q, ++qver_[q]});
}

bool CycleRun::QuotaCheck(int j, int64_t units, PendingStatus* st, bool* invalid, int* blocking) const {
  const int q = st->queue;
  *invalid = false;
  for (int a = q; a >= 0; a = parent_[a]) {
    const std::string& name = a < static_cast<int>(in_.queues.size()) ? in_.queues[a].name : "default";
    const bool no_borrow = !o_.allow_borrowing || no_borrow_[a];
    int64_t cap = limit_[a];
    if (no_borrow && a == q) cap = cap >= 0 ? std::min(cap, guar_[a]) : guar_[a];
    if (cap < 0) continue;
    st->resource = "gpu.milli";
    st->requested = units;
    st->limit = cap;
    st->available = std::max<int64_t>(0, cap - alloc_[a]);
    st->still_needed = std::max<int64_t>(0, units - st->available);
    *blocking = a;
    if (limit_[a] >= 0 && units > limit_[a]) {  // can never run in this queue
      *invalid = true;
      st->category = WaitCategory::kInvalid;
      st->code = "ExceedsQueueLimit";
      st->message = fmt::format("queue {} has a limit of {} GPUs; the job asks for {}", name, Gpus(limit_[a]),
                                Gpus(units));
      return false;
    }
    if (alloc_[a] + units > cap) {
      st->category = WaitCategory::kQuota;
      const bool borrow_limit = cap > guar_[a] || (no_borrow_[a] && o_.allow_borrowing);
      st->code = borrow_limit ? "BorrowLimit" : "TeamQuotaExhausted";
      if (no_borrow_[a] && o_.allow_borrowing && a == q)
        st->message = fmt::format(
            "capacity was reclaimed from queue {} this cycle; it borrows again next cycle (guarantee {} GPUs, {} in "
            "use, {} requested)",
            name, Gpus(guar_[a]), Gpus(alloc_[a]), Gpus(units));
      else if (borrow_limit)
        st->message = fmt::format("borrow limit of queue {} is {} GPUs, {} in use, {} requested", name, Gpus(cap),
                                  Gpus(alloc_[a]), Gpus(units));
      else
        st->message = fmt::format("team quota {} GPUs ({}), {} in use, {} requested", Gpus(cap), name,
                                  Gpus(alloc_[a]), Gpus(units));
      return false;
    }
  }
  return true;
}

int64_t CycleRun::FreeWhole() const {
  int64_t f = 0;
  for (const NodeState& ns : work_.nodes()) f += int64_t{kMilliPerGpu} * (ns.free_whole + ns.idle_mig_gpus);
  return f;
}

bool CycleRun::HeadroomOk(int j, const std::vector<TaskPlacement>& tasks) {
  if (o_.production_headroom_milli <= 0) return true;
  const Request& r = in_.pending[j].request;
  const int q = plan_.pending[j].queue;
  if (r.priority >= o_.cross_queue_preempt_priority) return true;
  int64_t idle_taken = 0;  // idle GPUs this placement would start using
  for (const TaskPlacement& t : tasks)
    for (const GpuGrant& g : t.gpus) idle_taken += work_.gpu(g.gpu).tasks == 0 ? kMilliPerGpu : 0;
  if (idle_taken == 0 || alloc_[q] + UnitsOf(work_, tasks, o_.slice_units) <= guar_[q]) return true;
  const int64_t free = FreeWhole();
  if (free - idle_taken >= o_.production_headroom_milli) return true;
  PendingStatus& st = plan_.pending[j];
  st.category = WaitCategory::kQuota;
  st.code = "BorrowLimit";
  st.resource = "gpu.milli";
  st.requested = idle_taken;
  st.available = std::max<int64_t>(0, free - o_.production_headroom_milli);
  st.limit = -1;
  st.still_needed = idle_taken - st.available;
  st.message = fmt::format("borrowing would leave {} idle GPUs, below the production headroom of {}",
                           Gpus(free - idle_taken), Gpus(o_.production_headroom_milli));
  return false;
}

bool CycleRun::LendingOk(int j, int64_t units, PendingStatus* st) {
  if (lending_queues_.empty()) return true;
  const int q = st->queue;
  const Request& r = in_.pending[j].request;
  if (alloc_[q] + units <= guar_[q] || r.priority >= o_.cross_queue_preempt_priority) return true;
  int64_t kept = 0;  // idle guarantee that other queues keep back from lending
  for (int k : lending_queues_)
    if (k != q) kept += std::max<int64_t>(0, guar_[k] - in_.queues[k].lending_limit_milli - alloc_[k]);
  const int64_t free = FreeAllowedWork(r);
  if (free - units >= kept) return true;
  st->category = WaitCategory::kQuota;
  st->code = "BorrowLimit";
  st->resource = "gpu.milli";
  st->requested = units;
  st->available = std::max<int64_t>(0, free - kept);
  st->limit = -1;
  st->still_needed = units - st->available;
  st->message = fmt::format(
      "borrowing {} GPUs would take idle guarantee that other queues keep back from lending: {} free, {} kept",
      Gpus(units), Gpus(free), Gpus(kept));
  return false;
}

void CycleRun::EmitPreemption(int i, JobId for_job, bool reclaim, std::string reason) {
  const RunningJob& v = in_.running[i];
  const int vq = v.queue >= 0 && v.queue < nq_ ? v.queue : 0;
  const int64_t since = in_.now_s - std::max(v.start_time_s, v.last_checkpoint_s);
  if (v.checkpointable && since >= o_.checkpoint_min_age_s) {
    Action ck;
    ck.kind = ActionKind::kCheckpoint;
    ck.job = v.id;
    ck.for_job = for_job;
    ck.reason = fmt::format("checkpoint before preemption ({} s since the last one)", since);
    plan_.actions.push_back(std::move(ck));
  }
  Action a;
  a.kind = ActionKind::kPreempt;
  a.job = v.id;
  a.for_job = for_job;
  a.units_milli = run_units_[i];
  a.reclaim = reclaim;
  a.reason = std::move(reason);
  plan_.actions.push_back(std::move(a));
  preempted_[i] = true;
  Account(vq, v.tasks, -1);
  if (reclaim) no_borrow_[vq] = true;  // no reclaim loops within a cycle
  ++qver_[vq];
}

void CycleRun::RestoreHeadroom() {
  if (o_.production_headroom_milli <= 0 || !o_.allow_preemption) return;
  auto free_whole = [&]() { return FreeWhole() + in_.vacating_milli; };
  int64_t free = free_whole();
  if (free >= o_.production_headroom_milli) return;
  struct Cand {
    int i;
    VictimCost cost;
  };
  std::vector<Cand> cands;
  // Restoring headroom reclaims borrowed capacity: the reclaim guard applies, not the priority one.
  const Preemptor pre{o_.cross_queue_preempt_priority, -1, true};
  for (size_t i = 0; i < in_.running.size(); ++i) {
    const RunningJob& v = in_.running[i];
    const int vq = v.queue >= 0 && v.queue < nq_ ? v.queue : 0;
    if (preempted_[i] || v.tasks.empty() || !Borrowing(vq)) continue;
    if (MayPreempt(pre, v, true, in_.now_s, o_) == PreemptKind::kNone) continue;
    cands.push_back({static_cast<int>(i), {true, v.priority, LostWorkGpuSeconds(v, run_units_[i], in_.now_s),
                                           static_cast<int>(v.tasks.size()), v.id}});
  }
  std::sort(cands.begin(), cands.end(), [](const Cand& a, const Cand& b) { return CheaperVictim(a.cost, b.cost); });
  for (const Cand& c : cands) {
    if (free >= o_.production_headroom_milli) break;
    const RunningJob& v = in_.running[c.i];
    const int vq = v.queue >= 0 && v.queue < nq_ ? v.queue : 0;
    if (!Borrowing(vq)) continue;  // stopped borrowing after earlier victims
    work_.Release(v.tasks, v.cpu_milli, v.host_memory_mib, v.cls != WorkloadClass::kTraining);
    const int64_t after = free_whole();
    if (after == free) {  // frees no whole GPU (a slice on a shared GPU): keep it
      work_.Apply(Steady(v.tasks), v.cpu_milli, v.host_memory_mib, v.cls != WorkloadClass::kTraining);
      continue;
    }
    free = after;
    EmitPreemption(c.i, -1, true,
                   fmt::format("reclaims {} borrowed GPUs to restore the production headroom of {} GPUs",
                               Gpus(run_units_[c.i]), Gpus(o_.production_headroom_milli)));
    ++work_version_;
  }
}

bool CycleRun::KindLimitsOk(int q, const std::vector<TaskPlacement>& tasks, PendingStatus* st) const {
  if (q >= static_cast<int>(in_.queues.size())) return true;
  for (int a = q; a >= 0; a = parent_[a]) {
    const QueueConfig& qc = in_.queues[a];
    for (const QueueConfig::KindQuota& kq : qc.kinds) {
      if (kq.kind < 0 || kq.kind >= static_cast<KindId>(kind_idx_.size()) || kind_idx_[kq.kind] < 0) continue;
      int64_t cap = kq.limit_milli;
      if (!o_.allow_borrowing || no_borrow_[a]) cap = cap >= 0 ? std::min(cap, kq.guaranteed_milli) : kq.guaranteed_milli;
      if (cap < 0) continue;
      int64_t add = 0;
      for (const TaskPlacement& t : tasks)
        for (const GpuGrant& g : t.gpus)
          if (work_.gpu(g.gpu).kind == kq.kind) add += GrantUnits(work_.kind_of_gpu(g.gpu), g, o_.slice_units);
      const int64_t used = res_[a][kind_idx_[kq.kind]];
      if (add > 0 && used + add > cap) {
        st->category = WaitCategory::kQuota;
        st->code = cap > kq.guaranteed_milli ? "BorrowLimit" : "TeamQuotaExhausted";
        st->message = fmt::format("queue {} may hold {} {} GPUs, {} in use, {} requested", qc.name, Gpus(cap),
                                  work_.catalog().kind(kq.kind).id, Gpus(used), Gpus(add));
        st->resource = "gpu.milli/" + work_.catalog().kind(kq.kind).id;
        st->requested = add;
        st->limit = cap;
        st->available = std::max<int64_t>(0, cap - used);
        st->still_needed = std::max<int64_t>(0, add - st->available);
        return false;
      }
    }
  }
  return true;
}

void CycleRun::Bind(int j, std::vector<TaskPlacement> tasks, std::string reason, int64_t start_s) {
  const PendingJob& p = in_.pending[j];
  const int q = plan_.pending[j].queue;
  work_.Apply(tasks, p.request.cpu_milli, p.request.host_memory_mib, p.request.cls != WorkloadClass::kTraining);
  for (const TaskPlacement& t : tasks)
    work_.ExtendDrain(t.node, p.request.expected_end_s >= 0 ? p.request.expected_end_s : ClusterState::kNever);
  ++work_version_;
  Account(q, tasks, +1);
  Action a;
  a.kind = ActionKind::kBind;
  a.job = p.request.id;
  a.units_milli = UnitsOf(work_, tasks, o_.slice_units);
  a.reason = std::move(reason);
  a.start_s = start_s;
  a.tasks = tasks;
  plan_.actions.push_back(std::move(a));
  bound_.push_back({j, std::move(tasks)});
  out_[j].bound = true;
}

int64_t CycleRun::FreeAllowedWork(const Request& r) {
  for (FreeMemo& m : free_memo_)
    if (m.kind_mask == r.kind_mask && m.tier_mask == r.tier_mask && m.sub == r.SubGpu()) {
      if (m.version != work_version_) {
        m.value = FreeAllowed(work_, r);
        m.version = work_version_;
      }
      return m.value;
    }
  const int64_t v = FreeAllowed(work_, r);
  if (free_memo_.size() < 64) free_memo_.push_back({r.kind_mask, r.tier_mask, r.SubGpu(), work_version_, v});
  return v;
}

int64_t CycleRun::FreeAllowed(const ClusterState& s, const Request& r) const {
  int64_t f = 0;
  for (const NodeState& ns : s.nodes())
    if (ns.gpu_count > 0 && r.KindAllowed(ns.kind) && r.TierAllowed(ns.tier))
      f += int64_t{kMilliPerGpu} * (ns.free_whole + ns.idle_mig_gpus) + (r.SubGpu() ? ns.free_milli_total : 0);
  return f;
}

void CycleRun::SetCapacityStatus(int j, NoFitCode code, std::string reason, int64_t units) {
  const PendingJob& p = in_.pending[j];
  PendingStatus& st = plan_.pending[j];
  const int q = st.queue;
  st.resource = "gpu.milli";
  st.requested = units;
  st.available = FreeAllowedWork(p.request);
  st.limit = limit_[q];
  st.still_needed = std::max<int64_t>(0, units - st.available);
  if (code == NoFitCode::kRequestExceedsCluster || code == NoFitCode::kInvalid) {
    st.category = WaitCategory::kInvalid;
    st.code = NoFitCodeName(code);
    st.message = std::move(reason);
    return;
  }
  st.category = WaitCategory::kCapacity;
  st.code = NoFitCodeName(code);
  if (p.request.tasks > 1 && code == NoFitCode::kResources) st.code = "GangIncomplete";
  // A queue above its fair share waits for queues below theirs before it gets freed capacity.
  if (alloc_[q] + units > fair_[q] && alloc_[q] > guar_[q] && st.still_needed == 0) {
    st.category = WaitCategory::kWaiting;
    st.code = "FairShare";
    st.message = fmt::format("queue uses {} GPUs, above its fair share of {}; {} ({})", Gpus(alloc_[q]),
                             Gpus(fair_[q]), reason, NoFitCodeName(code));
  } else {
    st.message = std::move(reason);
  }
}

bool CycleRun::TryPreempt(int j, int64_t units, int64_t quota_need, PlaceResult* placed) {
  if (!o_.allow_preemption || preempt_attempts_ >= o_.max_preemption_attempts) return false;
  const PendingJob& p = in_.pending[j];
  const int q = plan_.pending[j].queue;
  Preemptor pre{p.request.priority, q, alloc_[q] + units <= guar_[q]};
  struct Cand {
    int i;
    VictimCost cost;
    PreemptKind kind;
  };
  std::vector<Cand> cands;
  for (size_t i = 0; i < in_.running.size(); ++i) {
    if (preempted_[i]) continue;
    const RunningJob& v = in_.running[i];
    const int vq = v.queue >= 0 && v.queue < nq_ ? v.queue : 0;
    if (quota_need > 0 && vq != q) continue;  // quota-blocked: only the queue's own lower priorities help
    PreemptKind k = MayPreempt(pre, v, Borrowing(vq), in_.now_s, o_);
    if (k == PreemptKind::kNone) continue;
    if (quota_need > 0 && k != PreemptKind::kPriority) continue;
    cands.push_back({static_cast<int>(i),
                     {Borrowing(vq), v.priority, LostWorkGpuSeconds(v, run_units_[i], in_.now_s),
                      static_cast<int>(v.tasks.size()), v.id},
                     k});
  }
  if (cands.empty()) return false;
  ++preempt_attempts_;
  std::sort(cands.begin(), cands.end(), [](const Cand& a, const Cand& b) { return CheaperVictim(a.cost, b.cost); });
  // Whole-GPU requests: victims spread over the cluster rarely free a whole node. As kube-scheduler does, pick
  // the nodes where the fewest, cheapest victims make room for a task, and release those victims first.
  if (!p.request.SubGpu()) {
    const int g = p.request.GpusPerTask();
    struct NodePlan {
      int whole = 0;               // whole GPUs free now
      std::vector<size_t> victims; // candidate indices (cost order) with whole GPUs here
      std::vector<int> gpus;       // their whole GPUs here
    };
    std::unordered_map<NodeId, NodePlan> nodes;
    for (size_t c = 0; c < cands.size(); ++c) {
      const RunningJob& v = in_.running[cands[c].i];
      for (const TaskPlacement& tp : v.tasks) {
        int whole = 0;
        for (const GpuGrant& gr : tp.gpus) whole += gr.milli >= kMilliPerGpu && gr.mig_profile < 0;
        if (whole == 0) continue;
        NodePlan& np = nodes[tp.node];
        np.victims.push_back(c);
        np.gpus.push_back(whole);
      }
    }
    struct Choice {
      std::tuple<int, int64_t, NodeId> key;  // victims needed, GPU-seconds lost, node
      std::vector<size_t> victims;
    };
    std::vector<Choice> choices;
    for (auto& [n, np] : nodes) {
      const NodeState& ns = work_.node(n);
      if (!p.request.KindAllowed(ns.kind) || !p.request.TierAllowed(ns.tier) ||
          work_.catalog().kind(ns.kind).memory_mib < p.request.gpu_memory_mib)
        continue;
      int have = ns.free_whole + ns.idle_mig_gpus;
      Choice ch;
      int64_t lost = 0;
      for (size_t k = 0; k < np.victims.size() && have < g; ++k) {
        have += np.gpus[k];
        lost += cands[np.victims[k]].cost.lost_gpu_s;
        ch.victims.push_back(np.victims[k]);
      }
      if (have < g) continue;
      ch.key = {static_cast<int>(ch.victims.size()), lost, n};
      choices.push_back(std::move(ch));
    }
    std::sort(choices.begin(), choices.end(), [](const Choice& a, const Choice& b) { return a.key < b.key; });
    std::vector<bool> first(cands.size(), false);
    std::vector<Cand> order;
    int tasks_covered = 0;
    for (const Choice& ch : choices) {
      if (tasks_covered >= p.request.tasks) break;
      ++tasks_covered;
      for (size_t c : ch.victims)
        if (!first[c]) first[c] = true, order.push_back(cands[c]);
    }
    for (size_t c = 0; c < cands.size(); ++c)
      if (!first[c]) order.push_back(cands[c]);
    cands = std::move(order);
  }
  std::vector<int64_t> tentative = alloc_;
  std::vector<Cand> released;
  int64_t freed_own = 0;
  bool ok = false;
  PlaceResult res;
  auto release = [&](const Cand& c) {
    const RunningJob& v = in_.running[c.i];
    work_.Release(v.tasks, v.cpu_milli, v.host_memory_mib, v.cls != WorkloadClass::kTraining);
  };
  auto reapply = [&](const Cand& c) {
    const RunningJob& v = in_.running[c.i];
    work_.Apply(Steady(v.tasks), v.cpu_milli, v.host_memory_mib, v.cls != WorkloadClass::kTraining);
  };
  // Place is tried only once the free capacity of the allowed kinds plus what was released covers the job.
  const int64_t free0 = FreeAllowedWork(p.request);
  int64_t freed_total = 0;
  int examined = 0;
  for (const Cand& c : cands) {
    if (examined++ >= o_.max_victims_examined) break;
    const RunningJob& v = in_.running[c.i];
    const int vq = v.queue >= 0 && v.queue < nq_ ? v.queue : 0;
    if (c.kind == PreemptKind::kReclaim && tentative[vq] <= guar_[vq]) continue;  // no longer borrowing
    if (v.tasks.empty()) continue;
    release(c);
    released.push_back(c);
    for (int a = vq; a >= 0; a = parent_[a]) tentative[a] -= run_units_[c.i];
    if (vq == q) freed_own += run_units_[c.i];
    if (p.request.kind_mask == 0 || p.request.KindAllowed(work_.gpu(v.tasks[0].gpus.empty() ? 0 : v.tasks[0].gpus[0].gpu).kind))
      freed_total += run_units_[c.i];
    if (freed_own < quota_need) continue;
    if (free0 + freed_total < units) continue;
    res = policy_.Place(work_, p.request);
    if (res.ok) {
      ok = true;
      break;
    }
  }
  if (!ok) {
    for (auto it = released.rbegin(); it != released.rend(); ++it) reapply(*it);
    return false;
  }
  // Spare every victim that is not needed, most expensive first.
  std::vector<bool> spared(released.size(), false);
  for (int k = static_cast<int>(released.size()) - 2; k >= 0; --k) {
    const Cand& c = released[k];
    const int vq = in_.running[c.i].queue;
    if (vq == q && freed_own - run_units_[c.i] < quota_need) continue;
    reapply(c);
    PlaceResult r2 = policy_.Place(work_, p.request);
    if (r2.ok) {
      spared[k] = true;
      res = std::move(r2);
      if (vq == q) freed_own -= run_units_[c.i];
    } else {
      release(c);
    }
  }
  PendingStatus tmp;
  tmp.queue = q;
  if (!KindLimitsOk(q, res.tasks, &tmp)) {
    for (int k = static_cast<int>(released.size()) - 1; k >= 0; --k)
      if (!spared[k]) reapply(released[k]);
    return false;
  }
  const std::string& qname = q < static_cast<int>(in_.queues.size()) ? in_.queues[q].name : "default";
  for (size_t k = 0; k < released.size(); ++k) {
    if (spared[k]) continue;
    const Cand& c = released[k];
    const RunningJob& v = in_.running[c.i];
    const int vq = v.queue >= 0 && v.queue < nq_ ? v.queue : 0;
    const std::string& vname = vq < static_cast<int>(in_.queues.size()) ? in_.queues[vq].name : "default";
    const bool reclaim = c.kind == PreemptKind::kReclaim;
    EmitPreemption(
        c.i, p.request.id, reclaim,
        reclaim ? fmt::format("reclaims {} GPUs borrowed by queue {} for job {} of queue {} (within its guarantee)",
                              Gpus(run_units_[c.i]), vname, p.request.id, qname)
                : fmt::format("preempted for job {} of queue {}: priority {} > {}; {} GPU-s of work lost",
                              p.request.id, qname, p.request.priority, v.priority, c.cost.lost_gpu_s));
  }
  fails_.Clear();
  ++fails_generation_;  // capacity was released
  ++work_version_;
  *placed = std::move(res);
  return true;
}

bool CycleRun::TryReserve(int j) {
  if (reservations_ >= o_.max_reservations) return false;
  const PendingJob& p = in_.pending[j];
  // Only demand within its queue's guarantee (or production-level priority) may hold capacity ahead:
  // a borrowing gang must not block an owner's guaranteed demand.
  const int q = plan_.pending[j].queue;
  if (!o_.reserve_beyond_guarantee && alloc_[q] + est_units_[j] > guar_[q] &&
      p.request.priority < o_.cross_queue_preempt_priority)
    return false;
  scratch_ = work_;  // reuses the buffers of the previous what-if
  ClusterState& w = scratch_;
  // Conservative backfill: an earlier reservation claims its GPUs from the moment they free until its gang is
  // expected to end, so two reservations never count on the same GPUs.
  std::vector<int> claim_of(static_cast<size_t>(w.num_gpus()), -1);
  std::vector<std::vector<TaskPlacement>> claim_holds(phantoms_.size());
  std::vector<bool> claim_over(phantoms_.size(), false);
  if (!running_ends_built_) {  // running work's ends, sorted once per cycle
    running_ends_built_ = true;
    for (size_t i = 0; i < in_.running.size(); ++i) {
      const RunningJob& v = in_.running[i];
      if (v.expected_end_s < 0 || v.tasks.empty()) continue;
      running_ends_.push_back({std::max(v.expected_end_s, in_.now_s), &v.tasks, v.cpu_milli, v.host_memory_mib,
                               v.cls != WorkloadClass::kTraining, -1, static_cast<int>(i)});
    }
    std::stable_sort(running_ends_.begin(), running_ends_.end(),
                     [](const PlannedEnd& a, const PlannedEnd& b) { return a.t < b.t; });
  }
  std::vector<PlannedEnd>& ends = ends_buf_;
  ends.clear();
  for (size_t k = 0; k < phantoms_.size(); ++k) {
    for (const TaskPlacement& tp : phantoms_[k].claim)
      for (const GpuGrant& g : tp.gpus) claim_of[g.gpu] = static_cast<int>(k);
    ends.push_back({phantoms_[k].end_s, nullptr, 0, 0, false, static_cast<int>(k), -1});
  }
  for (const auto& [bj, tasks] : bound_) {
    const PendingJob& b = in_.pending[bj];
    ends.push_back({in_.now_s + (b.expected_duration_s > 0 ? b.expected_duration_s : o_.default_runtime_s), &tasks,
                    b.request.cpu_milli, b.request.host_memory_mib, b.request.cls != WorkloadClass::kTraining, -1, -1});
  }
  auto by_time = [](const PlannedEnd& a, const PlannedEnd& b) { return a.t < b.t; };
  std::stable_sort(ends.begin(), ends.end(), by_time);
  const size_t mid = ends.size();
  for (const PlannedEnd& e : running_ends_)
    if (!preempted_[e.run]) ends.push_back(e);
  std::inplace_merge(ends.begin(), ends.begin() + static_cast<std::ptrdiff_t>(mid), ends.end(), by_time);
  const int64_t need = int64_t{kMilliPerGpu} * p.request.TotalGpus();
  int64_t free_units = FreeAllowed(w, p.request);
  auto count_free = [&](NodeId n, GpuId g) {
    if (p.request.KindAllowed(w.gpu(g).kind) && p.request.TierAllowed(w.node(n).tier) && w.gpu(g).tasks == 0)
      free_units += kMilliPerGpu;
  };
  // A single-task request fits at a new time point only on a node whose capacity grew since the last try.
  const bool one_node = p.request.tasks == 1;
  bool grown = false;
  auto touch = [&](NodeId n) { grown = grown || w.convertible_index()[n] >= p.request.GpusPerTask(); };
  PlaceResult res;
  int64_t t = -1;
  for (size_t e = 0; e < ends.size(); ++e) {
    if (const int k = ends[e].claim; k >= 0) {
      claim_over[k] = true;
      w.Release(claim_holds[k], 0, 0, false);
      w.Release(phantoms_[k].tasks, 0, 0, false);
      for (const auto* list : {&claim_holds[k], &phantoms_[k].tasks})
        for (const TaskPlacement& tp : *list) {
          for (const GpuGrant& g : tp.gpus) count_free(tp.node, g.gpu);
          touch(tp.node);
        }
    } else {
      w.Release(*ends[e].tasks, ends[e].cpu, ends[e].mem, ends[e].inf);
      for (const TaskPlacement& tp : *ends[e].tasks) {
        for (const GpuGrant& g : tp.gpus) {
          const GpuState& gs = w.gpu(g.gpu);
          if (gs.tasks != 0) continue;
          const int k = claim_of[g.gpu];
          if (k < 0 || claim_over[k]) {
            count_free(tp.node, g.gpu);
            continue;
          }
          GpuGrant h;
          h.gpu = g.gpu;
          h.milli = kMilliPerGpu;
          h.disable_mig = gs.mig_enabled;
          TaskPlacement hold{tp.node, {h}};
          if (!w.CanApply({hold}, 0, 0).ok()) continue;
          w.Apply({hold}, 0, 0, false);
          claim_holds[k].push_back(std::move(hold));
        }
        touch(tp.node);
      }
    }
    if (e + 1 < ends.size() && ends[e + 1].t == ends[e].t) continue;
    if (free_units < need) continue;
    if (one_node && !grown) continue;
    grown = false;
    res = policy_.Place(w, p.request);
    if (res.ok) {
      t = ends[e].t;
      break;
    }
  }
  if (t < 0) return false;
  ++reservations_;
  // Hold the GPUs of the reservation that are free now, so backfill cannot delay it.
  Phantom ph;
  for (const TaskPlacement& tp : res.tasks) {
    TaskPlacement hold;
    hold.node = tp.node;
    for (const GpuGrant& g : tp.gpus) {
      const GpuState& gs = work_.gpu(g.gpu);
      if (gs.tasks != 0) continue;
      GpuGrant h;
      h.gpu = g.gpu;
      h.milli = kMilliPerGpu;
      h.memory_mib = 0;
      h.disable_mig = gs.mig_enabled;
      bool dup = false;
      for (const GpuGrant& o : hold.gpus) dup |= o.gpu == h.gpu;
      if (!dup) hold.gpus.push_back(h);
    }
    if (!hold.gpus.empty()) {
      bool merged = false;
      for (TaskPlacement& x : ph.tasks)
        if (x.node == hold.node) {
          for (const GpuGrant& g : hold.gpus) {
            bool dup = false;
            for (const GpuGrant& o : x.gpus) dup |= o.gpu == g.gpu;
            if (!dup) x.gpus.push_back(g);
          }
          merged = true;
        }
      if (!merged) ph.tasks.push_back(std::move(hold));
    }
  }
  const bool held = !ph.tasks.empty() && work_.CanApply(ph.tasks, 0, 0).ok();
  if (held) {
    work_.Apply(ph.tasks, 0, 0, false);
    for (const TaskPlacement& tp : ph.tasks) phantom_units_ += int64_t{kMilliPerGpu} * static_cast<int64_t>(tp.gpus.size());
  }
  if (o_.fence_reserved_nodes) {
    for (const TaskPlacement& tp : res.tasks) {
      bool seen = false;
      for (const Phantom::Fence& f : ph.fences) seen |= f.node == tp.node;
      const NodeState& ns = work_.node(tp.node);
      if (seen || (ns.free_cpu_milli <= 0 && ns.free_memory_mib <= 0)) continue;
      ph.fences.push_back({tp.node, ns.free_cpu_milli, ns.free_memory_mib});
      work_.Apply({TaskPlacement{tp.node, {}}}, ns.free_cpu_milli, ns.free_memory_mib, false);
    }
  }
  if (!held) ph.tasks.clear();
  ph.start_s = t;
  ph.end_s = t + (p.expected_duration_s > 0 ? p.expected_duration_s : o_.default_runtime_s);
  ph.claim = res.tasks;
  ++work_version_;
  phantoms_.push_back(std::move(ph));
  // Holds only shrink free capacity, so cached failures stay valid.
  Action a;
  a.kind = ActionKind::kReserve;
  a.job = p.request.id;
  a.tasks = std::move(res.tasks);
  a.start_s = t;
  a.units_milli = need;
  a.reason = fmt::format("reserved {} GPUs for the head gang from t={} s ({} s from now); backfill may not delay it",
                         p.request.TotalGpus(), t, t - in_.now_s);
  plan_.actions.push_back(std::move(a));
  out_[j].reserved_start = t;
  return true;
}

// Releases (held = false) or re-takes (held = true) a reservation's holds on GPUs that are not in MIG mode, and
// its fences. Re-taking keeps only what is still free.
void CycleRun::SetHolds(Phantom& ph, bool held) {
  for (TaskPlacement& tp : ph.tasks) {
    TaskPlacement t{tp.node, {}};
    std::vector<GpuGrant> kept;
    for (const GpuGrant& g : tp.gpus) {
      if (g.disable_mig) {
        kept.push_back(g);  // MIG GPUs stay held throughout
      } else if (!held) {
        t.gpus.push_back(g);
        kept.push_back(g);
      } else if (work_.gpu(g.gpu).WholeFree()) {
        t.gpus.push_back(g);
        kept.push_back(g);
      }
    }
    tp.gpus = std::move(kept);
    if (t.gpus.empty()) continue;
    const int64_t units = int64_t{kMilliPerGpu} * static_cast<int64_t>(t.gpus.size());
    if (held) {
      work_.Apply({t}, 0, 0, false);
      phantom_units_ += units;
    } else {
      work_.Release({t}, 0, 0, false);
      phantom_units_ -= units;
    }
  }
  for (Phantom::Fence& f : ph.fences) {
    if (held) {
      const NodeState& ns = work_.node(f.node);
      f.cpu_milli = std::max<int64_t>(0, std::min(f.cpu_milli, ns.free_cpu_milli));
      f.memory_mib = std::max<int64_t>(0, std::min(f.memory_mib, ns.free_memory_mib));
      work_.Apply({TaskPlacement{f.node, {}}}, f.cpu_milli, f.memory_mib, false);
    } else {
      work_.Release({TaskPlacement{f.node, {}}}, f.cpu_milli, f.memory_mib, false);
    }
  }
  ++work_version_;
}

// Slurm-style backfill into reservations: a whole-GPU job expected to end no later than a reservation starts
// may use the GPUs, CPU and memory held for it, since it cannot delay it. Sub-GPU work stays out (a MIG
// instance made there would outlive the job).
bool CycleRun::TryBackfillHolds(int j) {
  const PendingJob& p = in_.pending[j];
  const Request& r = p.request;
  if (r.expected_end_s < 0 || r.SubGpu() || phantoms_.empty()) return false;
  std::vector<size_t> open;
  for (size_t i = 0; i < phantoms_.size(); ++i)
    if (phantoms_[i].start_s >= r.expected_end_s) open.push_back(i);
  if (open.empty()) return false;
  for (size_t i : open) SetHolds(phantoms_[i], false);
  PlaceResult res = policy_.Place(work_, r);
  PendingStatus tmp;
  tmp.queue = plan_.pending[j].queue;
  const bool ok = res.ok && KindLimitsOk(tmp.queue, res.tasks, &tmp) && HeadroomOk(j, res.tasks);
  if (ok)
    Bind(j, std::move(res.tasks),
         fmt::format("backfilled into reserved capacity (ends by t={} s, before the reservation starts): {}",
                     r.expected_end_s, res.reason));
  for (size_t i : open) SetHolds(phantoms_[i], true);
  return ok;
}

void CycleRun::Process(int j) {
  const PendingJob& p = in_.pending[j];
  Outcome& oc = out_[j];
  PendingStatus& st = plan_.pending[j];
  oc.examined = true;
  oc.order = seq_++;
  const int q = st.queue;
  const int64_t units = est_units_[j];
  if (p.held) {
    st.category = WaitCategory::kHeld;
    st.code = "Held";
    st.message = "held (by a user, an admin or an unmet dependency); not considered until released";
    return;
  }
  if (!leaf_[q]) {
    st.category = WaitCategory::kInvalid;
    st.code = "QueueNotLeaf";
    st.message = fmt::format("queue {} has sub-queues; jobs go to leaf queues", in_.queues[q].name);
    return;
  }
  const Request& r = p.request;
  // Larger than every allowed GPU of the cluster: can never run.
  if (!r.SubGpu() && r.tasks >= 1 && r.gpus_per_task >= 1) {
    int64_t allowed = 0;
    for (KindId k = 0; k < static_cast<KindId>(kind_gpus_.size()); ++k)
      if (r.KindAllowed(k)) allowed += kind_gpus_[k];
    if (r.TotalGpus() > allowed) {
      st.category = WaitCategory::kInvalid;
      st.code = "RequestExceedsCluster";
      st.message = fmt::format("needs {} GPUs; the cluster has {} of the allowed kinds", r.TotalGpus(), allowed);
      st.resource = "gpu.milli";
      st.requested = units;
      st.available = allowed * kMilliPerGpu;
      st.still_needed = units - st.available;
      return;
    }
  }
  bool invalid = false;
  int blocking = q;
  if (!QuotaCheck(j, units, &st, &invalid, &blocking)) {
    if (invalid) return;
    PlaceResult placed;
    const int64_t need = st.still_needed;
    if (blocking == q && TryPreempt(j, units, need, &placed)) {
      Bind(j, std::move(placed.tasks), "after preempting lower priorities of its own queue: " + placed.reason,
           AfterGrace());
    }
    return;
  }
  if (!LendingOk(j, units, &st)) return;
  if (const FailureCache::Entry* e = fails_.Find(r)) {
    std::string why;
    if (e->tasks == r.tasks && e->gpt == r.gpus_per_task && e->milli == r.gpu_milli && e->mem == r.gpu_memory_mib) {
      why = e->reason;
    } else {
      // One sentence per (shape, cause) and cache generation: many pending jobs share a shape.
      const auto key = std::make_tuple(r.tasks, r.gpus_per_task, r.gpu_milli, r.gpu_memory_mib, e);
      auto it = dominated_msgs_.find(key);
      if (it == dominated_msgs_.end() || it->second.first != fails_generation_) {
        std::string m =
            fmt::format("needs {} x {} GPUs ({} MiB each); a request no larger did not fit this cycle: {}", r.tasks,
                        r.SubGpu() ? Gpus(r.gpu_milli) : Gpus(int64_t{kMilliPerGpu} * r.gpus_per_task),
                        r.gpu_memory_mib, e->reason);
        it = dominated_msgs_.insert_or_assign(key, std::make_pair(fails_generation_, std::move(m))).first;
      }
      why = it->second.second;
    }
    const NoFitCode code = e->code;
    if (TryBackfillHolds(j)) return;
    PlaceResult placed;
    if (TryPreempt(j, units, 0, &placed)) {
      Bind(j, std::move(placed.tasks), "after preemption: " + placed.reason, AfterGrace());
      return;
    }
    SetCapacityStatus(j, code, std::move(why), units);
    if (r.tasks > 1 || r.gpus_per_task > 1) TryReserve(j);
    return;
  }
  PlaceResult res = policy_.Place(work_, r);
  if (res.ok) {
    if (!KindLimitsOk(q, res.tasks, &st) || !HeadroomOk(j, res.tasks)) return;
    Bind(j, std::move(res.tasks), std::move(res.reason));
    return;
  }
  if (!CapacityCode(res.code)) {
    SetCapacityStatus(j, res.code, std::move(res.reason), units);
    return;
  }
  fails_.Add(r, res.code, res.reason);
  if (TryBackfillHolds(j)) return;
  PlaceResult placed;
  if (TryPreempt(j, units, 0, &placed)) {
    Bind(j, std::move(placed.tasks), "after preemption: " + placed.reason, AfterGrace());
    return;
  }
  SetCapacityStatus(j, res.code, std::move(res.reason), units);
  if (r.tasks > 1 || r.gpus_per_task > 1) TryReserve(j);
}

void CycleRun::Estimate(const std::vector<int>& order) {
  if (o_.estimate_limit <= 0) return;
  ClusterState w = work_;
  for (const Phantom& ph : phantoms_) {
    w.Release(ph.tasks, 0, 0, false);
    for (const Phantom::Fence& f : ph.fences) w.Release({TaskPlacement{f.node, {}}}, f.cpu_milli, f.memory_mib, false);
  }
  struct End {
    int64_t t;
    const std::vector<TaskPlacement>* tasks;
    int64_t cpu, mem;
    bool inf;
    bool operator>(const End& b) const { return t > b.t; }
  };
  std::priority_queue<End, std::vector<End>, std::greater<End>> ends;
  for (size_t i = 0; i < in_.running.size(); ++i) {
    const RunningJob& v = in_.running[i];
    if (preempted_[i] || v.expected_end_s < 0 || v.tasks.empty()) continue;
    ends.push({std::max(v.expected_end_s, in_.now_s), &v.tasks, v.cpu_milli, v.host_memory_mib,
               v.cls != WorkloadClass::kTraining});
  }
  for (const auto& [bj, tasks] : bound_) {
    const PendingJob& b = in_.pending[bj];
    ends.push({in_.now_s + (b.expected_duration_s > 0 ? b.expected_duration_s : o_.default_runtime_s), &tasks,
               b.request.cpu_milli, b.request.host_memory_mib, b.request.cls != WorkloadClass::kTraining});
  }
  std::vector<std::vector<TaskPlacement>> placed_store;
  placed_store.reserve(o_.estimate_limit);
  int64_t t = in_.now_s;
  int budget = 2 * o_.estimate_limit + 32;  // Place calls
  int done = 0;
  for (int j : order) {
    if (done >= o_.estimate_limit || budget <= 0) break;
    Outcome& oc = out_[j];
    if (plan_.pending[j].category == WaitCategory::kHeld || plan_.pending[j].category == WaitCategory::kInvalid) continue;
    ++done;
    const PendingJob& p = in_.pending[j];
    if (oc.reserved_start >= 0) {
      plan_.pending[j].estimated_start_s = oc.reserved_start;
      continue;
    }
    while (budget > 0) {
      --budget;
      PlaceResult res = policy_.Place(w, p.request);
      if (res.ok) {
        plan_.pending[j].estimated_start_s = std::max(t, in_.now_s);
        w.Apply(res.tasks, p.request.cpu_milli, p.request.host_memory_mib, p.request.cls != WorkloadClass::kTraining);
        placed_store.push_back(std::move(res.tasks));
        ends.push({plan_.pending[j].estimated_start_s + (p.expected_duration_s > 0 ? p.expected_duration_s : o_.default_runtime_s),
                   &placed_store.back(), p.request.cpu_milli, p.request.host_memory_mib,
                   p.request.cls != WorkloadClass::kTraining});
        break;
      }
      if (ends.empty()) break;
      // Advance to the next end time, releasing everything that ends then.
      t = ends.top().t;
      while (!ends.empty() && ends.top().t == t) {
        End e = ends.top();
        ends.pop();
        w.Release(*e.tasks, e.cpu, e.mem, e.inf);
      }
    }
  }
}

Plan CycleRun::Run() {
  Setup();
  for (size_t j = 0; j < in_.pending.size(); ++j) {
    const int q = in_.pending[j].queue >= 0 && in_.pending[j].queue < nq_ ? in_.pending[j].queue : 0;
    plan_.pending[j].job = in_.pending[j].request.id;
    plan_.pending[j].queue = q;
    plan_.pending[j].waiting_s = std::max<int64_t>(0, in_.now_s - in_.pending[j].eligible_time_s);
  }
  std::priority_queue<HeapItem> heap;
  for (int q = 0; q < nq_; ++q) Push(heap, q);
  std::vector<int> order;
  order.reserve(in_.pending.size());
  while (!heap.empty()) {
    HeapItem it = heap.top();
    heap.pop();
    const int q = it.q;
    if (it.ver != qver_[q]) {  // stale (the queue's allocation changed): re-key
      Push(heap, q);
      continue;
    }
    if (qnext_[q] >= qjobs_[q].size()) continue;
    const int j = qjobs_[q][qnext_[q]++];
    order.push_back(j);
    if (examined_ >= o_.max_backfill_scan) {
      out_[j].examined = true;
      out_[j].order = seq_++;
      PendingStatus& st = plan_.pending[j];
      st.category = WaitCategory::kWaiting;
      st.code = "Priority";
      st.message = fmt::format("not examined this cycle: {} jobs ahead of it in the pool were", o_.max_backfill_scan);
    } else {
      ++examined_;
      const uint32_t before = qver_[q];
      Process(j);
      (void)before;
    }
    Push(heap, q);
    // Preemptions change other queues' keys; their entries are re-keyed lazily through qver_.
  }
  RestoreHeadroom();
  // Positions among jobs still pending, in pool order.
  std::vector<int> team_pos(nq_, 0);
  int pool_pos = 0;
  std::vector<int> still;
  still.reserve(order.size());
  for (int j : order) {
    if (out_[j].bound) continue;
    still.push_back(j);
    PendingStatus& st = plan_.pending[j];
    st.pool_position = ++pool_pos;
    st.team_position = ++team_pos[st.queue];
    // A job behind a reservation that would otherwise fit waits for priority, not capacity.
    if (!phantoms_.empty() && st.category == WaitCategory::kCapacity && st.still_needed <= phantom_units_) {
      st.category = WaitCategory::kWaiting;
      st.code = "Priority";
      st.message = "waits behind a reserved gang; " + st.message;
    }
  }
  Estimate(still);
  size_t keep = 0;
  for (size_t j = 0; j < in_.pending.size(); ++j)
    if (!out_[j].bound) {
      if (keep != j) plan_.pending[keep] = std::move(plan_.pending[j]);
      ++keep;
    }
  plan_.pending.resize(keep);
  plan_.queues.resize(nq_);
  for (int q = 0; q < nq_; ++q) {
    QueueStatus& qs = plan_.queues[q];
    qs.allocated_milli = alloc_[q];
    qs.fair_share_milli = fair_[q];
    qs.demand_milli = demand_[q];
    double dom = 0;
    for (int d = 0; d <= nk_; ++d)
      if (cap_res_[d] > 0) dom = std::max(dom, static_cast<double>(res_[q][d]) / cap_res_[d]);
    qs.dominant_share = dom;
    qs.borrowing = alloc_[q] > guar_[q];
  }
  return std::move(plan_);
}

}  // namespace

int64_t UnitsOf(const ClusterState& s, const std::vector<TaskPlacement>& tasks, SliceUnits mode) {
  int64_t u = 0;
  for (const TaskPlacement& t : tasks)
    for (const GpuGrant& g : t.gpus) u += GrantUnits(s.kind_of_gpu(g.gpu), g, mode);
  return u;
}

double DecayUsage(double usage, double dt_s, double half_life_s, double added) {
  if (half_life_s <= 0) return added;
  return usage * std::exp2(-std::max(0.0, dt_s) / half_life_s) + added;
}

Plan RunCycle(const CycleInput& in, const Policy& policy) {
  TESSERA_CHECK(in.snapshot != nullptr, "RunCycle needs a snapshot");
  CycleRun run(in, policy);
  return run.Run();
}

}  // namespace tessera
