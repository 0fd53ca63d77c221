// What-if for a pending job: its earliest start had it asked for a half or a quarter of its GPUs, (when it
// names GPU kinds) any GPU kind, another MIG profile (the soonest, when sooner than as asked), or (training
// that is not checkpointable, where the cluster has spot capacity) to be checkpointable, so that spot
// capacity may take it; each from the scheduling cycle run on a copy of the current state (nothing is
// applied).
#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "service/job_room.h"
#include "service/service_driver.h"
#include "service/workload_json.h"

namespace tessera {
namespace {

// `r` asking for about `fraction` of its GPUs: fewer gang members when it has several, else fewer GPUs
// per task. False when it cannot ask for fewer (one GPU or less).
bool Shrink(Request* r, double fraction) {
  if (fraction >= 1) return true;
  if (r->tasks > 1) {
    const int t = std::max(1, static_cast<int>(std::lround(r->tasks * fraction)));
    if (t == r->tasks) return false;
    r->tasks = t;
    return true;
  }
  if (r->SubGpu() || r->gpus_per_task <= 1) return false;
  const int g = std::max(1, static_cast<int>(std::lround(r->gpus_per_task * fraction)));
  if (g == r->gpus_per_task) return false;
  r->gpus_per_task = g;
  return true;
}

// The earliest start of the job's replicas (`engine_ids`: their request ids in `in`) asking for `asked`,
// from one cycle on a copy of `in`; when the cycle does not place them, its estimate and reason.
void TrialStart(const CycleInput& in, const std::set<JobId>& engine_ids, const Request& asked, int64_t now,
                const Policy& policy, WhatIfOption* o) {
  CycleInput trial = in;
  for (PendingJob& p : trial.pending)
    if (engine_ids.count(p.request.id)) {
      const JobId engine_id = p.request.id;
      const int64_t end = p.request.expected_end_s;
      p.request = asked;
      p.request.id = engine_id;
      p.request.expected_end_s = end;
    }
  const Plan plan = RunCycle(trial, policy);
  o->estimated_start = -1;
  for (const Action& a : plan.actions)
    if (a.kind == ActionKind::kBind && engine_ids.count(a.job)) o->estimated_start = std::max(now, a.start_s);
  if (o->estimated_start >= 0) return;
  for (const PendingStatus& p : plan.pending)
    if (engine_ids.count(p.job)) {
      o->estimated_start = p.estimated_start_s;
      o->code = p.code;
      o->message = p.message;
      return;
    }
}

// Whether option `o` would start the job sooner than `as_asked` (-1: no estimate, i.e. never sooner).
bool Sooner(const WhatIfOption& o, int64_t as_asked) {
  return o.estimated_start >= 0 && (as_asked < 0 || o.estimated_start < as_asked);
}

}  // namespace

std::vector<std::pair<WhatIfOption, Request>> JobRoom::AlternativesLocked(const JobRecord& job) const {
  std::vector<std::pair<WhatIfOption, Request>> out;
  Outcome<JobSpec> spec = ParseJobSpec(nlohmann::json::parse(job.spec_json, nullptr, false));
  if (!spec.ok()) return out;
  auto add = [&](const JobSpec& changed, WhatIfOption o) {
    int queue = 0;
    std::string pc;
    Outcome<Request> r = BuildRequestLocked(changed, job.team, job.request.id, &queue, &pc);
    if (!r.ok()) return;  // e.g. its memory is above what the profile holds
    o.gpus = r.value().TotalGpus() * job.replicas;
    out.push_back({std::move(o), std::move(r).value()});
  };
  if (!job.mig_profile.empty()) {  // every other profile a GPU of the cluster offers
    std::set<std::string> names;
    for (KindId k = 0; k < static_cast<KindId>(d_->nodes_->KindStatsLocked().size()); ++k)
      if (d_->nodes_->KindStatsLocked()[k].total_gpus > 0)
        for (const MigProfile& p : d_->config_->catalog->kind(k).profiles)
          if (p.name != job.mig_profile && p.name.find('+') == std::string::npos) names.insert(p.name);
    for (const std::string& name : names) {
      JobSpec changed = spec.value();
      changed.mig_profile = name;
      add(changed, WhatIfOption{1, "mig_profile", name});
    }
  }
  bool spot = false;
  for (const Node& n : d_->loop_->state().cluster().nodes) spot |= n.tier == Tier::kSpot && n.gpu_count > 0;
  if (spot && job.cls == WorkloadClass::kTraining && !spec.value().workload.checkpointable) {
    JobSpec changed = spec.value();
    changed.workload.checkpointable = true;
    add(changed, WhatIfOption{1, "spot"});
  }
  return out;
}

Outcome<std::vector<WhatIfOption>> JobRoom::WhatIf(const Caller& c, int64_t id) {
  auto v = d_->Get(c, id);
  if (!v.ok()) return v.error();
  const JobRecord& job = *v.value().job;
  if (job.state != JobState::kPending) return Invalid("", "only a pending job has a what-if");
  const uint64_t cycle = d_->snapshot()->cycle;
  {
    std::lock_guard<std::mutex> lock(whatif_mu_);
    auto it = whatif_cache_.find(id);
    if (it != whatif_cache_.end() && it->second.first == cycle) return it->second.second;
  }
  const int64_t now = d_->Now();
  CycleInput in;
  std::unique_ptr<ClusterState> working;
  std::set<JobId> engine_ids;  // the job's replicas, as the cycle names them
  std::vector<std::pair<WhatIfOption, Request>> alternatives;
  {
    std::lock_guard<std::mutex> lock(d_->mu_);
    d_->cycles_->BuildInputLocked(now, &working, &in);
    for (JobSlot s : d_->ReplicasLocked(id)) engine_ids.insert(EngineId(s));
    alternatives = AlternativesLocked(job);
  }
  std::vector<WhatIfOption> out;
  for (double fraction : {1.0, 0.5, 0.25}) {
    WhatIfOption o;
    o.fraction = fraction;
    Request shrunk = job.request;
    if (!Shrink(&shrunk, fraction)) continue;
    o.gpus = shrunk.TotalGpus() * job.replicas;
    if (!out.empty() && out.back().gpus == o.gpus) continue;  // e.g. a quarter of 2 workers is still 1
    TrialStart(in, engine_ids, shrunk, now, *d_->policy_, &o);
    if (fraction == 1.0 && v.value().pending) {  // as asked: the headline estimate, the same for both
      o.estimated_start = v.value().pending->estimated_start;
      o.code = std::string(v.value().pending->code);
      o.message = v.value().pending->message.str();
    }
    out.push_back(std::move(o));
  }
  if (job.request.kind_mask != 0) {  // limited to some GPU kinds: what any kind would give
    WhatIfOption o;
    o.change = "any_gpu_kind";
    Request any = job.request;
    any.kind_mask = 0;
    o.gpus = any.TotalGpus() * job.replicas;
    TrialStart(in, engine_ids, any, now, *d_->policy_, &o);
    out.push_back(std::move(o));
  }
  const int64_t as_asked = out.empty() ? -1 : out.front().estimated_start;
  std::optional<WhatIfOption> best_profile;  // the soonest other MIG profile, when sooner than as asked
  for (auto& [o, r] : alternatives) {
    TrialStart(in, engine_ids, r, now, *d_->policy_, &o);
    if (o.change == "spot") {
      out.push_back(std::move(o));
    } else if (Sooner(o, as_asked) && (!best_profile || o.estimated_start < best_profile->estimated_start)) {
      best_profile = std::move(o);
    }
  }
  if (best_profile) out.push_back(std::move(*best_profile));
  std::lock_guard<std::mutex> lock(whatif_mu_);
  if (whatif_cache_.size() > 1000) whatif_cache_.clear();
  whatif_cache_[id] = {cycle, out};
  return out;
}

}  // namespace tessera
