// Service, the facade: wires the rooms (Identity, Chargeback, JobBook, ServiceDriver) and delegates.
#include "service/service.h"

#include <algorithm>

#include "service/service_driver.h"

namespace tessera {

Service::Service(ServiceConfig config, std::unique_ptr<Store> store, Clock* clock, Backend* backend)
    : config_(std::move(config)), store_(std::move(store)), clock_(clock), backend_(backend) {
  if (config_.price_books.empty()) config_.price_books.push_back(PriceBook::Default());
  chargeback_ = std::make_unique<Chargeback>(config_.catalog, &config_.price_books);
  // Paged out with the ended jobs: usage records and idempotency keys are read from the store.
  if (store_ != nullptr && config_.retain_ended_jobs >= 0) chargeback_->UseStore(store_.get());
  // The hook runs with Identity's change lock held and takes the driver's lock (the order in
  // service_driver.h); driver_ is set before any team can change.
  identity_ = std::make_unique<Identity>(
      store_.get(), &config_.tenancy, [this] { return Now(); },
      [this](const TeamRow& row) { driver_->TeamChanged(row); });
  driver_ = std::make_unique<ServiceDriver>(&config_, store_.get(), clock_, backend_, &book_, identity_.get(),
                                            chargeback_.get());
  book_.Page(
      store_.get(), config_.retain_ended_jobs,
      [this](const JobRow& row) { return driver_->restorer().PageIn(row); },
      static_cast<size_t>(std::max<int64_t>(config_.recent_idempotency_keys, 0)));
}

Result<std::unique_ptr<Service>> Service::Start(ServiceConfig config, std::unique_ptr<Store> store,
                                                Clock* clock, Backend* backend) {
  if (config.catalog == nullptr) return Status::Error("service: no GPU catalog");
  if (config.tenancy.priority_classes.empty()) config.tenancy.priority_classes = DefaultPriorityClasses();
  // With ended jobs paged out, the usage records and idempotency keys stay in the store too.
  auto loaded = store->Load(LoadLimits{config.retain_ended_jobs, /*history=*/config.retain_ended_jobs < 0});
  if (!loaded.ok()) return loaded.status();
  if (backend == nullptr) return Status::Error("service: no backend");
  if (Status st = NodeRoom::LoadStoredCluster(*loaded, &config); !st.ok()) return st;
  std::unique_ptr<Service> s(new Service(std::move(config), std::move(store), clock, backend));
  if (Status st = s->driver_->Start(*loaded); !st.ok()) return st;
  return s;
}

Service::~Service() { Stop(); }

void Service::Stop() {
  std::lock_guard<std::mutex> lock(stop_mu_);
  if (stopped_) return;
  stopped_ = true;
  driver_->Stop();
  store_->Close();
}

bool Service::Ready() const { return driver_->Ready(); }
const Counters& Service::counters() const { return driver_->counters(); }
std::shared_ptr<const Snapshot> Service::snapshot() const { return driver_->snapshot(); }

// Jobs: reads from the JobBook alone (a GET never waits for the cycle); writes through the driver.
Outcome<JobView> Service::Get(const Caller& c, int64_t id) const { return book_.Get(c, id, *snapshot()); }

std::vector<JobView> Service::List(const Caller& c, const std::string& state, const std::string& team,
                                   const std::string& project, int64_t after_id, int limit,
                                   bool* more) const {
  return book_.List(c, state, team, project, after_id, limit, more, *snapshot());
}

JobPage Service::ListJobs(const Caller& c, const JobQuery& q) const {
  return book_.ListJobs(c, q, *snapshot());
}

std::vector<QueueEntry> Service::Queue(const Caller& c) const { return book_.Queue(c, *snapshot()); }

Outcome<JobView> Service::Submit(const Caller& c, const JobSpec& spec, const std::string& idempotency_key,
                                 bool* created, std::function<void(const Status&)> on_durable) {
  return driver_->jobs().Submit(c, spec, idempotency_key, created, std::move(on_durable));
}

std::vector<Outcome<JobView>> Service::SubmitAll(const Caller& c, const std::vector<JobSpec>& specs) {
  return driver_->jobs().SubmitAll(c, specs);
}

Outcome<JobView> Service::Cancel(const Caller& c, int64_t id) { return driver_->jobs().Cancel(c, id); }

Outcome<JobView> Service::Preempt(const Caller& c, int64_t id, const std::string& reason) {
  return driver_->jobs().Preempt(c, id, reason);
}

Outcome<JobView> Service::SetPriority(const Caller& c, int64_t id, const std::string& priority_class) {
  return driver_->jobs().SetPriority(c, id, priority_class);
}

Outcome<std::vector<WhatIfOption>> Service::WhatIf(const Caller& c, int64_t id) {
  return driver_->jobs().WhatIf(c, id);
}

Outcome<std::vector<NodeRank>> Service::RankNodes(const Caller& c, const JobSpec& spec,
                                                  const std::vector<std::string>& names, int ranked) const {
  return driver_->jobs().RankNodes(c, spec, names, ranked);
}

std::map<std::string, std::pair<int64_t, int64_t>> Service::JobCountsByTeam() const {
  std::map<std::string, std::pair<int64_t, int64_t>> out;
  for (const TeamView& t : identity_->Teams(Caller{"", "", Role::kAdmin})) out[t.name];
  for (const auto& [team, counts] : book_.ActiveByTeam()) out[team] = counts;
  return out;
}

// Nodes and the loop: the driver's.
Outcome<std::vector<NodeView>> Service::ListNodes(const Caller& c) const { return driver_->nodes().List(c); }
Outcome<NodeView> Service::AddNode(const Caller& c, const std::string& spec_json) {
  return driver_->nodes().Add(c, spec_json);
}
Outcome<NodeView> Service::CordonNode(const Caller& c, const std::string& name) {
  return driver_->nodes().Cordon(c, name);
}
Outcome<NodeView> Service::UncordonNode(const Caller& c, const std::string& name) {
  return driver_->nodes().Uncordon(c, name);
}
Outcome<NodeView> Service::DrainNode(const Caller& c, const std::string& name) {
  return driver_->nodes().Drain(c, name);
}
Outcome<NodeView> Service::RemoveNode(const Caller& c, const std::string& name) {
  return driver_->nodes().Remove(c, name);
}
Outcome<int> Service::HoldGpus(const Caller& c, const std::string& name, int gpus) {
  return driver_->nodes().HoldGpus(c, name, gpus);
}
Outcome<std::pair<int64_t, int64_t>> Service::HoldHost(const Caller& c, const std::string& name,
                                                       int64_t cpu_milli, int64_t memory_mib) {
  return driver_->nodes().HoldHost(c, name, cpu_milli, memory_mib);
}
std::vector<std::string> Service::NodeStates() const { return driver_->nodes().States(); }

void Service::RunCycleNow() { driver_->cycles().RunCycleNow(); }
int64_t Service::NextInstant(int64_t now, int64_t owner_next_s, int64_t horizon_s, bool* tick) const {
  return driver_->cycles().NextInstant(now, owner_next_s, horizon_s, tick);
}
bool Service::RunInstant(int64_t now, bool tick, InstantSource& arrivals) {
  return driver_->cycles().RunInstant(now, tick, arrivals);
}
size_t Service::WaitingJobs() const { return driver_->cycles().WaitingJobs(); }
std::vector<std::string> Service::TakeDecisionLines() { return driver_->TakeDecisionLines(); }
std::vector<JobSlot> Service::LoopSlotsOf(int64_t id) const { return driver_->LoopSlotsOf(id); }
JobPtr Service::JobOfSlot(JobSlot slot) const { return driver_->JobOfSlot(slot); }
std::optional<bool> Service::MayPreemptFor(JobSlot victim, int64_t for_id) const {
  return driver_->MayPreemptFor(victim, for_id);
}
std::optional<bool> Service::MayPreemptFor(JobSlot victim, const JobSpec& spec) const {
  return driver_->MayPreemptFor(victim, spec);
}
std::string Service::NodeName(NodeId n) const { return driver_->nodes().Name(n); }
void Service::SetEvictionBlocked(std::set<int64_t> ids) {
  driver_->cycles().SetEvictionBlocked(std::move(ids));
}
void Service::SetJobNodes(std::map<int64_t, NodeNames> nodes, bool absent_nowhere) {
  driver_->cycles().SetJobNodes(std::move(nodes), absent_nowhere);
}

}  // namespace tessera
