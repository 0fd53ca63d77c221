// The service's cycles (cycle_room.h): when one runs (the cycle thread, RunCycleNow, a driver's instants),
// its input, the decision without the lock and the plan applied in slices.
#include "service/cycle_room.h"

#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <unordered_map>

#include "base/thread_priority.h"
#include "service/service_driver.h"

namespace tessera {
namespace {

double SecondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

CycleRoom::CycleRoom(ServiceDriver* driver) : d_(driver) {}

CycleRoom::~CycleRoom() { Stop(); }

void CycleRoom::StartThread() {
  thread_ = std::thread([this] { CycleLoop(); });
}

void CycleRoom::Stop() {
  {
    std::lock_guard<std::mutex> lock(wake_mu_);
    stop_ = true;
    wake_cv_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
}

void CycleRoom::Notify() {
  // A wake posted and not yet taken covers this one: the cycle reads the job table after taking it. Without
  // this, every submission during a cycle's spacing woke the cycle thread for nothing (thousands a second).
  if (wake_posted_.exchange(true)) return;
  std::lock_guard<std::mutex> lock(wake_mu_);
  wake_ = true;
  wake_cv_.notify_one();
}

void CycleRoom::CycleLoop() {
  pthread_setname_np(pthread_self(), "tessera-cycle");  // what top -H and perf show
  using Wall = std::chrono::steady_clock;
  double last_cost_s = 0;
  auto last = Wall::now();
  for (;;) {
    double wait_s = d_->config_->tick_s;
    {
      std::lock_guard<std::mutex> lock(d_->mu_);
      const int64_t next = d_->driver_->NextEventS();
      if (next != INT64_MAX) wait_s = std::min(wait_s, d_->clock_->WallSecondsUntil(static_cast<double>(next)));
    }
    {
      std::unique_lock<std::mutex> lock(wake_mu_);
      wake_cv_.wait_for(lock, std::chrono::duration<double>(std::max(wait_s, 0.0)),
                        [&] { return wake_ || stop_; });
      if (stop_) return;
      wake_ = false;
      wake_posted_ = false;  // under wake_mu_: a notifier that set it sets wake_ before it takes the lock
    }
    // Event-driven cycles are spaced by at least min_cycle_gap_s and four times the last cycle's cost, so
    // that a burst of submissions is batched into few cycles.
    const double gap = std::min(1.0, std::max(d_->config_->min_cycle_gap_s, 8 * last_cost_s));
    const double since = std::chrono::duration<double>(Wall::now() - last).count();
    if (since < gap) {
      std::unique_lock<std::mutex> lock(wake_mu_);
      if (wake_cv_.wait_for(lock, std::chrono::duration<double>(gap - since), [&] { return stop_; })) return;
    }
    const auto t0 = Wall::now();
    RunOneCycle();
    last = Wall::now();
    last_cost_s = std::chrono::duration<double>(last - t0).count();
  }
}

void CycleRoom::RunCycleNow() {
  RunOneCycle();
  // Batches commit (and their effects apply) in order: once an empty one is done, the cycle's are too.
  (void)d_->store_->WriteAndWait(WriteBatch());
}

void CycleRoom::BuildInputLocked(int64_t now, std::unique_ptr<ClusterState>* working, CycleInput* in) {
  d_->loop_->BuildInput(now, in);
  if (!eviction_blocked_.empty())
    for (RunningJob& r : in->running) {
      const JobSlot slot = SlotOf(r.id);
      if (d_->HasSlotLocked(slot) && eviction_blocked_.count(d_->IdOfSlotLocked(slot))) r.preemptible = false;
    }
  ApplyJobNodesLocked(in);
  // Assigning into a kept state reuses its memory: a fresh copy of a large cluster costs milliseconds of
  // page faults, all of them under the lock that requests wait for.
  if (*working)
    **working = d_->loop_->state();
  else
    *working = std::make_unique<ClusterState>(d_->loop_->state());
  in->snapshot = working->get();
}

void CycleRoom::ApplyJobNodesLocked(CycleInput* in) const {
  if (job_nodes_.empty() && !job_nodes_strict_) return;
  const std::vector<Node>& nodes = d_->loop_->state().cluster().nodes;
  std::map<const std::set<std::string>*, std::shared_ptr<const std::vector<bool>>> masks;  // one per shared set
  // Strict: a job not judged yet (submitted since the last SetJobNodes) sits this cycle out, without a
  // verdict: "fits nowhere" would be a reason it does not have.
  if (job_nodes_strict_)
    std::erase_if(in->pending, [&](const PendingJob& p) {
      const JobSlot slot = SlotOf(p.request.id);
      return d_->HasSlotLocked(slot) && !job_nodes_.count(d_->IdOfSlotLocked(slot));
    });
  for (PendingJob& p : in->pending) {
    const JobSlot slot = SlotOf(p.request.id);
    if (!d_->HasSlotLocked(slot)) continue;
    auto it = job_nodes_.find(d_->IdOfSlotLocked(slot));
    const std::set<std::string>* names = it != job_nodes_.end() ? it->second.get() : nullptr;
    if (names == nullptr) continue;
    auto& mask = masks[names];
    if (mask == nullptr) {
      auto m = std::make_shared<std::vector<bool>>(nodes.size(), false);
      for (size_t n = 0; n < nodes.size(); ++n) (*m)[n] = names->count(nodes[n].name) > 0;
      mask = std::move(m);
    }
    p.request.nodes = mask;
  }
}

void CycleRoom::SetJobNodes(std::map<int64_t, std::shared_ptr<const std::set<std::string>>> nodes,
                                bool absent_nowhere) {
  {
    std::lock_guard<std::mutex> lock(d_->mu_);
    const bool same = job_nodes_strict_ == absent_nowhere && job_nodes_.size() == nodes.size() &&
                      std::equal(job_nodes_.begin(), job_nodes_.end(), nodes.begin(), [](const auto& a, const auto& b) {
                        return a.first == b.first && (a.second == b.second || (a.second && b.second && *a.second == *b.second));
                      });
    job_nodes_ = std::move(nodes);
    job_nodes_strict_ = absent_nowhere;
    if (same) return;
  }
  Notify();  // jobs may go where they could not: a cycle looks again
}

void CycleRoom::SetEvictionBlocked(std::set<int64_t> ids) {
  std::lock_guard<std::mutex> lock(d_->mu_);
  eviction_blocked_ = std::move(ids);
}

// The decision is pure and holds no lock, so it may run at a lower CPU priority than the request threads
// and the store's writer without delaying them (Linux: nice values are per thread, and threads the engine
// starts inherit it); the lock-holding parts of the cycle keep the process's priority.
Plan CycleRoom::DecideInBackground(const CycleInput& in) const {
  if (d_->config_->decide_nice <= 0) return RunCycle(in, *d_->policy_);
  Plan plan;
  std::thread t([&] {
    pthread_setname_np(pthread_self(), "tessera-decide");
    LowerThreadPriority(d_->config_->decide_nice);
    plan = RunCycle(in, *d_->policy_);
  });
  t.join();
  return plan;
}

std::vector<size_t> CycleRoom::SliceCuts(const Plan& plan) const {
  constexpr size_t kSlice = 256;  // actions applied under one hold of the lock (about a millisecond)
  std::vector<size_t> cuts = {0};
  std::unordered_map<int64_t, size_t> last;  // job -> index of its last action
  {
    std::lock_guard<std::mutex> lock(d_->mu_);
    for (size_t i = 0; i < plan.actions.size(); ++i) {
      const JobSlot s = SlotOf(plan.actions[i].job);
      if (d_->HasSlotLocked(s)) last[d_->IdOfSlotLocked(s)] = i;
    }
    size_t reach = 0;  // the furthest action of a job seen in this slice
    for (size_t i = 0; i < plan.actions.size(); ++i) {
      const JobSlot s = SlotOf(plan.actions[i].job);
      if (d_->HasSlotLocked(s)) reach = std::max(reach, last[d_->IdOfSlotLocked(s)]);
      if (i + 1 - cuts.back() >= kSlice && reach <= i) cuts.push_back(i + 1);
    }
  }
  if (cuts.back() != plan.actions.size()) cuts.push_back(plan.actions.size());
  if (cuts.size() == 1) cuts.push_back(0);  // an empty plan: one empty slice
  return cuts;
}

void CycleRoom::RunOneCycle() {
  const int64_t now = d_->Now();
  {
    std::lock_guard<std::mutex> lock(d_->mu_);
    d_->reports_->DueLocked(now);
  }
  d_->outbox_->Flush();
  CycleAt(now, /*paced=*/true);
}

int CycleRoom::CycleAt(int64_t now, bool paced) {
  const auto t0 = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> one_cycle(cycle_mu_);
  CycleInput& in = cycle_in_;
  std::unique_ptr<ClusterState>& working = cycle_working_;
  {
    size_t pending, holding;
    {
      std::lock_guard<std::mutex> lock(d_->mu_);
      pending = d_->loop_->jobs().pending().size();
      holding = d_->loop_->jobs().holding().size();
    }
    // Memory the input grows into is mapped here, not under the lock (ControlLoop::ReserveInput), with
    // room for the jobs that arrive meanwhile.
    ControlLoop::ReserveInput(&in, pending + pending / 4 + 256, holding + holding / 4 + 256);
  }
  {
    std::lock_guard<std::mutex> lock(d_->mu_);
    const auto held = std::chrono::steady_clock::now();
    BuildInputLocked(now, &working, &in);
    d_->counters_.lock_input.Observe(SecondsSince(held));
  }
  Plan plan = DecideInBackground(in);
  std::shared_ptr<Snapshot> snap;
  std::vector<SnapshotRoom::PendingRef> snap_jobs(
      plan.pending.size());  // mapped before the lock, like the input
  snap_jobs.clear();
  int binds = 0;
  // A large plan is applied in slices, the lock released between them, so that requests wait for one
  // slice at most; a slice ends only where no job has actions left further on (a job starts whole).
  const std::vector<size_t> cuts = SliceCuts(plan);
  // Each slice's writes commit before the next slice is applied, so that a submission waits behind one
  // slice's rows in the store, not behind the whole plan's.
  for (size_t k = 0; k + 1 < cuts.size(); ++k) {
    Plan part;
    part.actions.assign(plan.actions.begin() + cuts[k], plan.actions.begin() + cuts[k + 1]);
    const bool last = k + 2 == cuts.size();
    const auto slice_t0 = std::chrono::steady_clock::now();
    bool wrote = false;
    {
      std::lock_guard<std::mutex> lock(d_->mu_);
      const auto held = std::chrono::steady_clock::now();
      binds += d_->reports_->ApplySliceLocked(part, now, last, &wrote);
      if (last) snap = d_->snapshots_->BeginLocked(&plan, now, &snap_jobs);
      d_->counters_.lock_apply.Observe(SecondsSince(held));
    }
    d_->outbox_->Flush();  // the slice's launches and stops, without the lock
    if (wrote && !last) {
      (void)d_->store_->WriteAndWait(WriteBatch());
      // Paced: requests get twice the slice's time before the next, so that a large plan (thousands of
      // starts) takes at most a third of the service while it is applied instead of queueing every request
      // behind it slice after slice; its last jobs start that much later (docs/benchmarks.md).
      if (paced) {
        const auto took = 2 * (std::chrono::steady_clock::now() - slice_t0);
        std::unique_lock<std::mutex> lock(wake_mu_);
        wake_cv_.wait_for(lock, took, [&] { return stop_; });
      }
    }
  }
  d_->snapshots_->Finish(std::move(snap), &plan, snap_jobs);
  d_->counters_.cycles.fetch_add(1, std::memory_order_relaxed);
  d_->ready_.store(true);
  d_->counters_.cycle.Observe(SecondsSince(t0));
  return binds;
}

int64_t CycleRoom::NextInstant(int64_t now, int64_t owner_next_s, int64_t horizon_s, bool* tick) const {
  std::lock_guard<std::mutex> lock(d_->mu_);
  return d_->driver_->NextInstant(now, owner_next_s, horizon_s, tick);
}

size_t CycleRoom::WaitingJobs() const {
  std::lock_guard<std::mutex> lock(d_->mu_);
  return d_->loop_->jobs().pending().size();
}

// One instant of the driver rules: the service's own parts (backend events under the lock, cycles) with
// the caller's arrivals.
bool CycleRoom::RunInstant(int64_t now, bool tick, InstantSource& arrivals) {
  class Source final : public InstantSource {
   public:
    Source(CycleRoom* s, InstantSource* a) : s_(s), a_(a) {}
    bool Due(Driver&, int64_t now) override {
      bool changed = false;
      {
        std::lock_guard<std::mutex> lock(s_->d_->mu_);
        changed = s_->d_->reports_->DueLocked(now);
      }
      s_->d_->outbox_->Flush();
      return changed;
    }
    size_t Waiting() const override { return s_->WaitingJobs(); }
    bool Arrive(int64_t now) override { return a_->Arrive(now); }
    int ReleaseBacklog(int64_t now) override { return a_->ReleaseBacklog(now); }
    bool backlog() const override { return a_->backlog(); }
    bool External(int64_t now) override { return a_->External(now); }
    int Cycle(int64_t now) override { return s_->CycleAt(now); }

   private:
    CycleRoom* s_;
    InstantSource* a_;
  } source(this, &arrivals);
  const bool changed = d_->driver_->RunInstant(now, tick, source);
  (void)d_->store_->WriteAndWait(WriteBatch());  // the instant's writes are visible before the next
  return changed;
}


}  // namespace tessera
