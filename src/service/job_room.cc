// Job operations (job_room.h): submit (validation, idempotency, durability), cancel, priority, preempt.
#include "service/job_room.h"

#include <fmt/format.h>

#include <algorithm>
#include <future>
#include <nlohmann/json.hpp>

#include "sched/requests.h"
#include "service/service_driver.h"
#include "service/tokens.h"

namespace tessera {
namespace {

std::string DefaultPriorityClass(WorkloadClass c) {
  return c == WorkloadClass::kInference || c == WorkloadClass::kInteractive ? "inference" : "training";
}

std::string MemoryField(const JobSpec& spec) {
  if (spec.body.contains("memory_mib")) return "memory_mib";
  if (spec.body.contains("memory_gib")) return "memory_gib";
  return "memory";
}

}  // namespace

JobRoom::JobRoom(ServiceDriver* driver) : d_(driver) {}

// Checks the spec against the cluster and tenancy and builds the engine request.
Outcome<Request> JobRoom::BuildRequestLocked(const JobSpec& spec, const std::string& team, int64_t id,
                                             int* queue, std::string* priority_class) const {
  const Workload& w = spec.workload;
  const Catalog& cat = *d_->config_->catalog;
  *priority_class = w.priority_class.empty() ? DefaultPriorityClass(w.cls) : w.priority_class;
  const PriorityClass* pc = d_->config_->tenancy.FindClass(*priority_class);
  if (pc == nullptr) {
    std::string known;
    for (const PriorityClass& p : d_->config_->tenancy.priority_classes)
      known += (known.empty() ? "" : ", ") + p.name;
    return Invalid("priority_class",
                   fmt::format("field 'priority_class': unknown priority class '{}' (known: {})",
                               *priority_class, known));
  }
  auto reqs = ToRequests(w, cat, id);
  if (!reqs.ok()) return Invalid("gpu_kinds", reqs.error());
  Request r = reqs->front();
  const int replicas = w.cls == WorkloadClass::kTraining ? 1 : w.replicas;  // independent one-task requests
  r.id = id;
  r.priority = pc->value;
  r.may_preempt = pc->preempts;
  r.tier_mask = AllowedTiers(w.cls == WorkloadClass::kTraining, w.checkpointable);
  // What the cluster offers, over the kinds the job allows.
  int max_gpus = 0, total_gpus = 0;
  int64_t max_memory = 0;
  uint64_t profile_kinds = 0;
  int64_t profile_mib = 0;
  int profile_milli = 0;
  int named_compute = 0, named_memory = 0;
  int64_t largest_named_mib = 0;  // over the kinds offering the named profile, whatever the job's memory
  for (KindId kid = 0; kid < static_cast<KindId>(d_->nodes_->KindStatsLocked().size()); ++kid) {
    const NodeRoom::KindStats& ks = d_->nodes_->KindStatsLocked()[kid];
    if (ks.total_gpus == 0 || !r.KindAllowed(kid)) continue;
    const GpuKind& k = cat.kind(kid);
    max_gpus = std::max(max_gpus, ks.max_gpus);
    total_gpus += ks.total_gpus;
    max_memory = std::max(max_memory, k.memory_mib);
    if (!spec.mig_profile.empty()) {
      const int p = k.FindProfile(spec.mig_profile);
      if (p >= 0 && kid < 64) largest_named_mib = std::max(largest_named_mib, k.profiles[p].usable_mib);
      // Only kinds whose instance of that name holds the job's memory (a name's memory differs by kind).
      if (p >= 0 && kid < 64 && k.profiles[p].usable_mib >= r.gpu_memory_mib) {
        profile_kinds |= uint64_t{1} << kid;
        named_compute = k.profiles[p].compute_slices;
        named_memory = k.profiles[p].memory_slices;
        profile_mib = std::max(profile_mib, k.profiles[p].usable_mib);
        profile_milli = std::max(profile_milli, k.ProfileComputeMilli(p));
      }
    }
  }
  if (!spec.mig_profile.empty()) {
    if (profile_kinds == 0 && largest_named_mib == 0)
      return Invalid("mig_profile",
                     fmt::format("field 'mig_profile': no GPU in the cluster offers MIG profile '{}'",
                                 spec.mig_profile));
    if (profile_kinds == 0)
      return Invalid(MemoryField(spec),
                     fmt::format("memory of {} MiB is above what a {} instance has ({} MiB)",
                                 r.gpu_memory_mib, spec.mig_profile, largest_named_mib));
    r.kind_mask = profile_kinds;
    r.gpus_per_task = 0;
    r.allow_share = false;
    r.gpu_memory_mib = profile_mib;
    r.gpu_milli = profile_milli;
    r.mig_compute_slices = static_cast<int8_t>(named_compute);
    r.mig_memory_slices = static_cast<int8_t>(named_memory);
  } else {
    if (total_gpus == 0) return Invalid("gpu_kinds", "no GPU in the cluster is of an allowed kind");
    if (r.gpus_per_task > max_gpus)
      return Invalid("gpus_per_worker",
                     fmt::format("field 'gpus_per_worker': no node has {} GPUs (the largest has {})",
                                 r.gpus_per_task, max_gpus));
    if (r.gpu_memory_mib > max_memory)
      return Invalid(MemoryField(spec),
                     fmt::format("memory of {} MiB per GPU is above every GPU's ({} MiB at most)",
                                 r.gpu_memory_mib, max_memory));
    if (r.TotalGpus() * replicas > total_gpus)
      return Invalid(
          w.cls == WorkloadClass::kTraining ? "workers" : "replicas",
          fmt::format("the job asks for {} GPUs; the cluster has {}", r.TotalGpus() * replicas, total_gpus));
  }
  if (queue == nullptr) return r;  // a placement question only (RankNodes): no queue needed
  *queue = d_->config_->tenancy.LeafFor(team, w.project);
  if (*queue < 0) *queue = d_->config_->tenancy.FindQueue(team);
  if (*queue < 0) return Invalid("team", fmt::format("field 'team': team '{}' has no queue", team));
  return r;
}

std::optional<ApiError> JobRoom::UnknownTeamLocked(const std::string& team) const {
  if (d_->identity_->HasTeam(team)) return std::nullopt;
  return Invalid("team", fmt::format("field 'team': unknown team '{}'", team));
}

// A new pending job of `team` from `spec` (its id taken, its Submitted event and audit entry added to `b`);
// nothing is stored or visible yet. Under d_->mu_.
Outcome<JobPtr> JobRoom::NewJobLocked(const Caller& c, const JobSpec& spec, const std::string& team,
                                      const std::string& body, WriteBatch* b) {
  const int64_t id = d_->book_->PeekId();
  int queue = 0;
  std::string pc;
  auto req = BuildRequestLocked(spec, team, id, &queue, &pc);
  if (!req.ok()) return req.error();
  if (auto e = d_->identity_->ClassPolicy(c, team, pc)) return *e;
  d_->book_->TakeId(id);
  auto j = std::make_shared<JobRecord>();
  j->id = id;
  j->version = d_->NextVersion();
  j->user = c.user;
  j->team = team;
  j->project = spec.workload.project;
  j->name = spec.workload.name;
  j->priority_class = pc;
  j->cls = spec.workload.cls;
  j->mig_profile = spec.mig_profile;
  j->duration_s = spec.workload.duration_s;
  j->time_limit_s = spec.workload.time_limit_s;
  j->checkpointable = spec.workload.checkpointable;
  j->spec_json = body;
  j->request = req.value();
  j->replicas = spec.workload.cls == WorkloadClass::kTraining ? 1 : spec.workload.replicas;
  j->queue = queue;
  j->submitted_at = d_->Now();
  b->events.push_back({id, j->submitted_at, "Submitted", "by " + c.user});
  b->audit.push_back(d_->AuditOf(c, "job.submit", fmt::format("job:{}", id), "",
                                 nlohmann::json{{"team", team},
                                                {"name", j->name},
                                                {"project", j->project},
                                                {"priority_class", pc},
                                                {"gpus", TotalGpus(*j)}}
                                     .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
                                 true));
  return JobPtr(j);
}

// Many jobs by one caller in one durable write (no idempotency keys): each refused or accepted as Submit
// would; returns once the accepted are durable (or the write failed).
std::vector<Outcome<JobView>> JobRoom::SubmitAll(const Caller& c, const std::vector<JobSpec>& specs) {
  std::vector<Outcome<JobView>> out;
  out.reserve(specs.size());
  std::vector<JobPtr> made;
  WriteBatch b;
  auto p = std::make_shared<std::promise<Status>>();
  auto f = p->get_future();
  {
    std::unique_lock<std::mutex> lock(d_->mu_);
    for (const JobSpec& spec : specs) {
      auto named = JobBook::SubmitTeam(c, spec.workload.team);
      if (!named.ok()) {
        out.push_back(named.error());
        continue;
      }
      if (auto e = UnknownTeamLocked(named.value())) {
        out.push_back(*e);
        continue;
      }
      auto j = NewJobLocked(c, spec, named.value(), spec.body.dump(), &b);
      if (!j.ok()) {
        out.push_back(j.error());
        continue;
      }
      made.push_back(j.value());
      out.push_back(JobView{j.value(), std::nullopt});
    }
    if (made.empty()) return out;
    d_->PutLocked(made, std::move(b), [p](const Status& st) { p->set_value(st); });
  }
  const Status st = f.get();
  for (Outcome<JobView>& o : out)
    if (o.ok() && !st.ok()) o = ApiError{ErrorCode::kUnavailable, "", "not stored: " + st.message()};
  if (st.ok()) d_->counters_.submissions.fetch_add(made.size(), std::memory_order_relaxed);
  return out;
}

Outcome<JobView> JobRoom::Submit(const Caller& c, const JobSpec& spec, const std::string& idempotency_key,
                                 bool* created, std::function<void(const Status&)> on_durable) {
  if (created) *created = false;
  auto named = JobBook::SubmitTeam(c, spec.workload.team);
  if (!named.ok()) return named.error();
  const std::string& team = named.value();
  const std::string body = spec.body.dump();
  const std::string hash = idempotency_key.empty() ? std::string() : Sha256Hex(body);
  const JobBook::IdemKey key = std::make_pair(c.user, idempotency_key);
  // A key not among those in memory is looked up in the store before the lock (other submissions do not
  // wait for the read); again under it should keys have left memory meanwhile.
  const bool in_store = !idempotency_key.empty() && d_->book_->KeysInStore();
  const uint64_t evicted = in_store ? d_->book_->KeysEvicted() : 0;
  // A key the store cannot hold (the filter says no) is new: no store read. An unreadable store: read it.
  auto maybe_stored = [&] {
    auto m = d_->book_->MaybeStoredKey(key);
    return !m.ok() || *m;
  };
  std::optional<JobBook::IdemEntry> stored;
  auto look_up = [&]() -> std::optional<ApiError> {
    auto s = d_->book_->StoredKey(key);
    if (!s.ok()) return ApiError{ErrorCode::kUnavailable, "", "Idempotency-Key: " + s.error()};
    stored = *s;
    return std::nullopt;
  };
  if (in_store && !d_->book_->FindKey(key) && maybe_stored())
    if (auto e = look_up()) return *e;
  std::unique_lock<std::mutex> lock(d_->mu_);  // once per submission: request threads queue here
  if (auto e = UnknownTeamLocked(team)) return *e;
  if (!idempotency_key.empty()) {
    // Found and put under d_->mu_ (submissions take it in turn): a key makes one job.
    std::optional<JobBook::IdemEntry> found = d_->book_->FindKey(key);
    if (!found && in_store && !stored && d_->book_->KeysEvicted() != evicted && maybe_stored())
      if (auto e = look_up()) return *e;
    if (!found) found = stored;
    if (found) {
      if (found->body_hash != hash)
        return ApiError{ErrorCode::kIdempotencyMismatch, "Idempotency-Key",
                        "this Idempotency-Key was used with a different request body"};
      lock.unlock();
      // Another request with this key is in flight: wait until its job is durable (or was refused).
      for (int i = 0; i < 3000 && !found->durable; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        found = d_->book_->FindKey(key);
        if (!found && in_store) {  // durable, then left memory, or forgotten
          auto s = d_->book_->StoredKey(key);
          if (s.ok()) found = *s;
        }
        if (!found) return ApiError{ErrorCode::kUnavailable, "", "the first request with this key failed"};
      }
      return d_->Get(Caller{"", "", Role::kAdmin}, found->job_id);
    }
  }
  WriteBatch b;
  auto made = NewJobLocked(c, spec, team, body, &b);
  if (!made.ok()) return made.error();
  JobPtr j = made.value();
  const int64_t id = j->id;
  if (!idempotency_key.empty()) {
    b.keys.push_back({c.user, idempotency_key, hash, id});
    d_->book_->PutKey(key, {hash, id, false});
  }
  if (on_durable) {
    d_->PutLocked({j}, std::move(b), [this, key, on_durable = std::move(on_durable)](const Status& st) {
      if (!key.second.empty()) d_->book_->SettleKey(key, st.ok());
      if (st.ok()) d_->counters_.submissions.fetch_add(1, std::memory_order_relaxed);
      on_durable(st);
    });
    if (created) *created = true;
    return JobView{j, std::nullopt};
  }
  auto p = std::make_shared<std::promise<Status>>();
  auto f = p->get_future();
  d_->PutLocked({j}, std::move(b), [this, p, key](const Status& st) {
    if (!key.second.empty()) d_->book_->SettleKey(key, st.ok());
    p->set_value(st);
  });
  lock.unlock();
  const Status st = f.get();
  if (!st.ok()) return ApiError{ErrorCode::kUnavailable, "", "not stored: " + st.message()};
  d_->counters_.submissions.fetch_add(1, std::memory_order_relaxed);
  if (created) *created = true;
  return JobView{j, std::nullopt};
}

JobPtr JobRoom::PageInEnded(int64_t id) const {
  return d_->book_->Current(id) ? nullptr : d_->book_->PageIn(id);
}

JobPtr JobRoom::VisibleLocked(int64_t id, const JobPtr& stored) const {
  JobPtr j = d_->book_->Current(id);
  if (!j) return stored;
  return d_->book_->Visible(id) != nullptr ? j : nullptr;
}

Outcome<JobView> JobRoom::ChangeJob(const Caller& c, int64_t id, const char* verb, const ChangeFn& change) {
  auto p = std::make_shared<std::promise<Status>>();
  auto f = p->get_future();
  const JobPtr stored = PageInEnded(id);
  {
    std::lock_guard<std::mutex> lock(d_->mu_);
    const JobPtr j = VisibleLocked(id, stored);
    if (!j || !JobBook::CanSee(c, *j))
      return ApiError{ErrorCode::kNotFound, "", fmt::format("no job {}", id)};
    if (!JobBook::CanChange(c, *j))
      return ApiError{ErrorCode::kPermissionDenied, "",
                      fmt::format("{} {} may not {} job {}", RoleName(c.role), c.user, verb, id)};
    WriteBatch b;
    auto next = change(*j, &b);
    if (!next.ok()) return next.error();
    if (next.value() == nullptr && b.empty())
      p->set_value(Status::Ok());
    else if (next.value() == nullptr)  // a no-op that is still recorded (its audit entry)
      d_->store_->Write(std::move(b), [p](const Status& st) { p->set_value(st); });
    else
      d_->PutLocked({next.value()}, std::move(b), [p](const Status& st) { p->set_value(st); });
  }
  d_->outbox_->Flush();  // a cancel's stop, without the lock
  d_->Notify();
  const Status st = f.get();
  if (!st.ok()) return ApiError{ErrorCode::kUnavailable, "", st.message()};
  return d_->Get(c, id);
}

// A cancel of a finished job changes nothing and is not counted (its audit entry says so).
Outcome<JobView> JobRoom::Cancel(const Caller& c, int64_t id) {
  bool changed = false;
  auto v = ChangeJob(c, id, "cancel", [&](const JobRecord& j, WriteBatch* b) -> Outcome<JobPtr> {
    const auto state = [](JobState s) { return nlohmann::json{{"state", JobStateName(s)}}.dump(); };
    changed = !Terminal(j.state);
    b->audit.push_back(d_->AuditOf(c, "job.cancel", fmt::format("job:{}", id), state(j.state),
                                   state(changed ? JobState::kCancelled : j.state), changed));
    if (!changed) return JobPtr();
    const int64_t now = d_->Now();
    const bool ran = j.state == JobState::kRunning;
    d_->driver_->Cancel(d_->ReplicasLocked(id).front(), now, "cancelled by " + c.user);
    auto next = d_->reports_->FinishLocked(j, JobState::kCancelled, now, "cancelled by " + c.user, b);
    auto out = std::make_shared<JobRecord>(*next);
    out->stopping = ran && d_->backend_->asynchronous();  // kStopped clears it
    return JobPtr(std::move(out));
  });
  if (v.ok() && changed) d_->counters_.cancelled.fetch_add(1, std::memory_order_relaxed);
  return v;
}

// The preemption a cycle would make, asked for by the backend's owner: the first holding replica is taken
// as the one rule says (a checkpoint first where due, sched/take.h) and the driver takes the rest of its
// group; the capacity is taken at once (no grace period held: the owner has cordoned it), so the job is
// back in the queue when this returns.
Outcome<JobView> JobRoom::Preempt(const Caller& c, int64_t id, const std::string& reason) {
  if (c.role != Role::kAdmin)
    return ApiError{ErrorCode::kPermissionDenied, "", "only an admin preempts jobs"};
  auto p = std::make_shared<std::promise<Status>>();
  auto f = p->get_future();
  const JobPtr stored = PageInEnded(id);
  {
    std::lock_guard<std::mutex> lock(d_->mu_);
    const JobPtr j = VisibleLocked(id, stored);
    if (!j) return ApiError{ErrorCode::kNotFound, "", fmt::format("no job {}", id)};
    Plan plan;
    for (JobSlot s : j->state == JobState::kRunning ? d_->ReplicasLocked(id) : std::vector<JobSlot>{}) {
      const JobPhase phase = d_->loop_->jobs()[s].phase;
      if (phase != JobPhase::kBound && phase != JobPhase::kRunning) continue;
      d_->loop_->AppendTakeOf(s, d_->Now(), reason,
                              &plan);  // a checkpoint first where due; the capacity taken now
      break;
    }
    if (plan.actions.empty()) {
      p->set_value(Status::Ok());
    } else {
      WriteBatch b;
      std::vector<JobPtr> changed;
      d_->reports_->ApplyTakesLocked(plan, d_->Now(), &b, &changed);
      const auto state = [](JobState s) { return nlohmann::json{{"state", JobStateName(s)}}.dump(); };
      const JobPtr now = changed.empty() ? j : changed.back();
      b.audit.push_back(d_->AuditOf(c, "job.preempt", fmt::format("job:{}", id), state(j->state),
                                    state(now->state), !changed.empty()));
      d_->PutLocked(std::move(changed), std::move(b), [p](const Status& st) { p->set_value(st); });
    }
  }
  d_->outbox_->Flush();  // the stop, without the lock
  d_->Notify();
  const Status st = f.get();
  if (!st.ok()) return ApiError{ErrorCode::kUnavailable, "", st.message()};
  return d_->Get(c, id);
}

Outcome<JobView> JobRoom::SetPriority(const Caller& c, int64_t id, const std::string& priority_class) {
  const PriorityClass* pc = d_->config_->tenancy.FindClass(priority_class);
  return ChangeJob(c, id, "change", [&](const JobRecord& j, WriteBatch* b) -> Outcome<JobPtr> {
    if (pc == nullptr)
      return Invalid("priority_class",
                     fmt::format("field 'priority_class': unknown priority class '{}'", priority_class));
    if (Terminal(j.state)) return Invalid("priority_class", fmt::format("job {} has finished", id));
    if (auto e = d_->identity_->ClassPolicy(c, j.team, pc->name)) return *e;
    const auto cls = [](const std::string& n) { return nlohmann::json{{"priority_class", n}}.dump(); };
    b->audit.push_back(d_->AuditOf(c, "job.priority", fmt::format("job:{}", id), cls(j.priority_class),
                                   cls(pc->name), j.priority_class != pc->name));
    auto next = std::make_shared<JobRecord>(j);
    next->version = d_->NextVersion();
    next->priority_class = pc->name;
    next->request.priority = pc->value;
    next->request.may_preempt = pc->preempts;
    for (JobSlot s : d_->ReplicasLocked(id)) {  // the loop decides with it from the next cycle
      d_->loop_->jobs()[s].request.priority = pc->value;
      d_->loop_->jobs()[s].request.may_preempt = pc->preempts;
      d_->loop_->jobs()[s].preemptible = pc->preemptible;
    }
    b->events.push_back({id, d_->Now(), "PriorityChanged",
                         fmt::format("{} -> {} by {}", j.priority_class, pc->name, c.user)});
    return JobPtr(std::move(next));
  });
}

}  // namespace tessera
