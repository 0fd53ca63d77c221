#include "k8s/scheduler.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <nlohmann/json.hpp>

#include "k8s/cluster_view.h"
#include "k8s/dra/dra_binder.h"
#include "sched/policy.h"
#include "service/workload_json.h"
#include "store/store.h"

namespace tessera {

using json = nlohmann::json;

namespace {

int64_t NowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The priority classes the loop knows: Tessera's defaults, every Kubernetes PriorityClass (by name and
// value; PreemptLowerPriority, the default, may preempt lower priorities of any team; Never never preempts:
// its pods wait for capacity), and "kubernetes-default" (0).
std::vector<PriorityClass> ClassesOf(const ObjectMap& k8s_classes) {
  std::vector<PriorityClass> out = DefaultPriorityClasses();
  auto put = [&](PriorityClass pc) {
    auto it = std::find_if(out.begin(), out.end(), [&](const PriorityClass& p) { return p.name == pc.name; });
    if (it != out.end()) *it = pc;
    else out.push_back(pc);
  };
  put({"kubernetes-default", 0, true, true, false});
  for (const auto& [name, pc] : k8s_classes) {
    const json* v = Field(pc, "value");
    if (v == nullptr || !v->is_number_integer()) continue;
    const json* policy = Field(pc, "preemptionPolicy");
    const bool preempts = policy == nullptr || !policy->is_string() || *policy != "Never";
    put({name, v->get<int>(), true, true, preempts, preempts});
  }
  return out;
}

}  // namespace

K8sScheduler::K8sScheduler(KubeConfig kube, SchedulerOptions options)
    : options_(std::move(options)), api_(std::move(kube)) {}

K8sScheduler::~K8sScheduler() { Stop(); }

void K8sScheduler::Log(const std::string& s) const {
  if (options_.log) options_.log(s);
}

Result<std::unique_ptr<K8sScheduler>> K8sScheduler::Start(KubeConfig kube, SchedulerOptions options) {
  std::unique_ptr<K8sScheduler> s(new K8sScheduler(std::move(kube), std::move(options)));
  if (Status st = s->Init(); !st.ok()) return st;
  return s;
}

Status K8sScheduler::Init() {
  if (const std::string& cm = options_.mig_config_map; !cm.empty()) {
    const size_t slash = cm.find('/');
    if (slash == std::string::npos || slash == 0 || slash + 1 == cm.size() || cm.find('/', slash + 1) != std::string::npos)
      return Status::Error(fmt::format("--mig-config-map: expected NAMESPACE/NAME, got '{}'", cm));
  }
  leader_ = std::make_unique<LeaderRoom>(this);
  group_room_ = std::make_unique<GroupRoom>(this);
  teams_ = std::make_unique<TeamRoom>(this);
  leader_->Init();
  api_.set_write_guard([this] { return !scheduling_stopped_.load() && leader_->IsLeader(); });
  if (options_.kube_api_qps > 0) {
    const int burst = options_.kube_api_burst > 0 ? options_.kube_api_burst
                                                  : std::max(1, static_cast<int>(2 * options_.kube_api_qps));
    api_.set_rate_limit(options_.kube_api_qps, burst);
  }
  if (Status st = leader_->Await(); !st.ok()) return st;
  auto log = [this](const std::string& s) { Log(s); };
  auto wake = [this](WatchEvent, const json&) { Wake(); };
  classes_ = std::make_unique<Informer>(&api_, "/apis/scheduling.k8s.io/v1/priorityclasses", wake, log);
  groups_ = std::make_unique<Informer>(&api_, "/apis/scheduling.x-k8s.io/v1alpha1/podgroups", wake, log);
  volcano_groups_ = std::make_unique<Informer>(&api_, "/apis/scheduling.volcano.sh/v1beta1/podgroups", wake, log);
  kai_groups_ = std::make_unique<Informer>(&api_, "/apis/scheduling.run.ai/v2alpha2/podgroups", wake, log);
  volcano_queues_ = std::make_unique<Informer>(&api_, "/apis/scheduling.volcano.sh/v1beta1/queues", wake, log);
  kai_queues_ = std::make_unique<Informer>(&api_, "/apis/scheduling.run.ai/v2/queues", wake, log);
  budgets_ = std::make_unique<Informer>(&api_, "/apis/policy/v1/poddisruptionbudgets", wake, log);
  nodes_ = std::make_unique<Informer>(&api_, "/api/v1/nodes", wake, log);
  dra_ = std::make_unique<DraRoom>(this);
  filters_ = std::make_unique<FilterRoom>(this);
  cluster_ = std::make_unique<ClusterRoom>(this);
  api_jobs_ = std::make_unique<ApiJobRoom>(this);
  dra_->Start([this] { Wake(); }, log);
  pods_ = std::make_unique<Informer>(&api_, "/api/v1/pods", [this](WatchEvent e, const json& p) { OnPod(e, p); }, log);
  const std::vector<Informer*> informers = {classes_.get(),        groups_.get(),     volcano_groups_.get(),
                                            kai_groups_.get(),     volcano_queues_.get(), kai_queues_.get(),
                                            budgets_.get(),        nodes_.get(),          pods_.get()};
  for (Informer* i : informers) i->Start();
  if (Status st = leader_->AwaitSynced(informers); !st.ok()) return st;
  if (!dra_->WaitSynced(10)) Log("the DRA informers have not listed within 10 s; DRA nodes join the loop later");
  if (Status st = StartService(); !st.ok()) return st;
  if (options_.extender) {
    extender_ = std::make_unique<ExtenderRoom>(this);
    if (Status st = extender_->Start(*options_.extender); !st.ok())
      return Status::Error("--extender-listen: " + st.message());
  }
  if (!options_.mig_config_map.empty()) {
    MigRepartitionOptions mo;
    mo.config_map = options_.mig_config_map;
    mo.scheduler_name = options_.scheduler_name;
    mo.drain_timeout_s = options_.mig_drain_timeout_s;
    mo.catalog = &Catalog::Default();
    mo.loop_rule = [this](const GpuPod& p, int64_t for_job) { return LoopMayPreempt(p, for_job); };
    mig_ = std::make_unique<MigRepartitioner>(
        &api_, mo, log,
        [this](const GpuPod& p, const std::string& node, const std::string& why) {
          return PreemptPod(p, node, why);
        },
        [this] { return cluster_->MigWaiting(); });
  }
  loop_thread_ = std::thread([this] { Loop(); });
  return Status::Ok();
}

Status K8sScheduler::StartService() {
  std::vector<const json*> foreign;
  const auto pods_snap = pods_->Snapshot();
  const auto& pods = *pods_snap;
  for (const auto& [k, p] : pods)
    if (!PodIsOurs(p, options_.scheduler_name)) foreign.push_back(&p);
  auto used = UsageByNode(foreign);
  for (auto& [node, use] : used)  // held GPU by GPU, CPU and memory likewise, once the Service runs
    use.gpus = use.cpu_milli = use.memory_bytes = 0;     // (HoldForeignGpus, HoldForeignHost)
  dra_->Classify();
  std::vector<json> specs;
  cluster_->LoadMigSources(/*now=*/true);
  const auto nodes_snap = nodes_->Snapshot();
  for (const auto& [name, node] : *nodes_snap) {
    NodeModel model;
    auto spec = cluster_->NodeSpecOf(node, used, &model);
    if (spec.ok()) specs.push_back(*spec);
    else if (!cluster_->Reported(Meta(node, "name")))
      Log(spec.error());  // else reported on the node already
  }
  ServiceConfig cfg;
  cfg.catalog = &Catalog::Default();
  std::vector<std::string> skipped;
  cfg.cluster = ClusterFromSpecs(specs, *cfg.catalog, &skipped);
  for (const std::string& s : skipped) Log(s);
  cfg.tenancy.priority_classes = ClassesOf(classes_->Objects());
  cfg.tenancy.options.min_runtime_s = options_.min_runtime_s;
  // Tessera's policy without the loop's per-GPU repartitioning: a MIG GPU's instances are what the GPU
  // Operator made (mig_repartitioner.h changes them, node by node), a MIG-enabled GPU is never taken whole
  // (its nvidia.com/gpu is not offered), and a MIG pod gets exactly the profile it asks for (its
  // nvidia.com/mig-<profile> is that resource, not a larger one).
  PolicyOptions po;
  po.fixed_mig = true;
  auto policy = MakePolicy("tessera", po);
  if (!policy.ok()) return policy.status();
  cfg.policy = std::shared_ptr<const Policy>(std::move(policy).value());
  cfg.setup.mig_instance_delay_s = 0;  // the GPU Operator's MIG manager owns repartitioning (not done yet)
  cfg.setup.mig_mode_delay_s = 0;
  cfg.log = [this](const std::string& s) { Log(s); };
  // A pod job's key goes with its launches (LaunchSpec::key): the backend binds without asking the Service.
  // An API job's pods are made later (ApiJobRoom), with the names its key gives.
  cfg.external_keys = [this](const JobRecord& j) { return api_jobs_->KeysFor(j); };
  auto store = leader_->OpenStore();
  if (!store.ok()) return store.status();
  clock_ = std::make_unique<ScaledClock>(static_cast<double>(std::time(nullptr)), 1.0);
  K8sBackendHooks hooks;
  hooks.pods = [this](const JobKey& k) { return PodsOf(k); };
  hooks.log = [this](const std::string& s) { Log(s); };
  hooks.admit = [this](const PodRef& p, const std::string& node) { return filters_->Admit(p, node); };
  hooks.forget = [this](const PodRef& p) { filters_->Forget(p); };
  hooks.leading = [this] { return !scheduling_stopped_.load() && leader_->IsLeader(); };
  hooks.preemptor_on = [this](const std::set<std::string>& nodes) { return PreemptorOn(nodes); };
  hooks.cancel = [this](JobSlot s, const std::string& why) { CancelJobOfSlot(s, why); };
  hooks.bind = [this](const PodRef& p, const std::string& node) { return dra_->BindPod(p, node); };
  events_ = std::make_unique<EventRecorder>(&api_, "tessera");
  hooks.event = [this](const json& o, const std::string& type, const std::string& reason, const std::string& m) {
    events_->Record(o, type, reason, m);
  };
  backend_ = std::make_unique<K8sBackend>(&api_, hooks);
  auto svc = Service::Start(std::move(cfg), std::move(store).value(), clock_.get(), backend_.get());
  if (!svc.ok()) return svc.status();
  service_ = std::move(svc).value();
  service_->SetJobNodes({}, /*absent_nowhere=*/true);  // no job runs before FilterRoom::Sync judged it
  bool more = false;
  for (const JobView& v : service_->List(admin_, "", "", "", 0, 1 << 30, &more))
    if (auto key = KeyOfJob(v.job->project, v.job->team, v.job->name);
        key && v.job->user == admin_.user && !Terminal(v.job->state))
      job_of_key_[key->str()] = v.job->id;
  teams_->Load();
  Log(fmt::format("scheduling for '{}' on {} nodes ({} GPUs)", options_.scheduler_name,
                  service_->cluster().nodes.size(), service_->cluster().TotalGpus()));
  backend_->PodsChanged();  // adopted runs find their pods
  return Status::Ok();
}

void K8sScheduler::StopScheduling() {
  if (scheduling_stopped_.exchange(true)) return;
  stop_ = true;
  Wake();
  if (extender_) extender_->Stop();
  if (backend_) backend_->Shutdown();
  if (loop_thread_.joinable()) loop_thread_.join();
  if (events_) events_->Stop();
  if (leader_) leader_->StopRenewing();
  if (leader_) leader_->Release();
}

void K8sScheduler::Stop() {
  StopScheduling();
  for (auto* i : {&pods_, &nodes_, &groups_, &volcano_groups_, &kai_groups_, &volcano_queues_, &kai_queues_, &budgets_, &classes_})
    if (*i) (*i)->Stop();
  if (dra_) dra_->Stop();
  if (service_) service_->Stop();
}

void K8sScheduler::Wake() {
  {
    std::lock_guard<std::mutex> l(wake_mu_);
    wake_ = true;
  }
  wake_cv_.notify_all();
}

void K8sScheduler::OnPod(WatchEvent e, const json& pod) {
  const JobKey key = JobKeyOf(pod);
  if (PodIsOurs(pod,
                options_.scheduler_name)) {  // with claims too: SyncJobs keeps the loop's (DraRoom::Classify)
    const std::string name = Meta(pod, "name"), ns_name = Meta(pod, "namespace") + "/" + name;
    std::lock_guard<std::mutex> l(pods_mu_);
    auto& m = pods_by_key_[key.str()];
    if (e == WatchEvent::kDeleted)
      m.Erase(name);
    else
      m.Put(name, pod);
    if (e != WatchEvent::kDeleted && PodUsesDra(pod))
      dra_pods_.Put(ns_name, m.Get(name));
    else
      dra_pods_.Erase(ns_name);  // a pod's claims never change: only its deletion takes it out
    if (m.empty()) pods_by_key_.erase(key.str());
  }
  if (backend_ && service_) backend_->PodsChanged(Meta(pod, "uid"));
  Wake();
}

std::vector<json> K8sScheduler::PodsOf(const JobKey& key) const {
  std::lock_guard<std::mutex> l(pods_mu_);
  std::vector<json> out;
  auto it = pods_by_key_.find(key.str());
  if (it != pods_by_key_.end())
    for (const auto& [name, p] : it->second) out.push_back(p);
  if (it == pods_by_key_.end() && key.kind == "pod")  // a PodGroup member that is a job of its own
    for (const auto& [k, m] : pods_by_key_)
      if (auto p = m.find(key.name); p != m.end() && Meta(p->second, "namespace") == key.ns) out.push_back(p->second);
  return out;
}

void K8sScheduler::Loop() {
  while (!stop_.load()) {
    const int64_t start_us = NowUs();
    if (leader_->IsLeader()) Reconcile();  // a replica that stopped leading writes nothing
    const int64_t pass_us = NowUs() - start_us;
    std::unique_lock<std::mutex> l(wake_mu_);
    wake_cv_.wait_for(l, std::chrono::seconds(1), [this] { return wake_ || stop_.load(); });
    wake_ = false;
    l.unlock();
    // A burst of changes makes one pass; passes take at most about half the loop thread's time, so that
    // the bindings they start get the CPU to go out.
    std::this_thread::sleep_for(std::chrono::microseconds(std::clamp<int64_t>(pass_us, 50'000, 500'000)));
  }
}

void K8sScheduler::Reconcile() {
  filters_->RefreshPassWorld(NowUs());
  // Watch events look at their own pod's run only (PodsChanged(uid)); every run is looked at now and then,
  // for an event that came before its run was recorded.
  if (const int64_t now_us = NowUs(); backend_ && now_us - all_runs_seen_us_ > 5'000'000) {
    all_runs_seen_us_ = now_us;
    backend_->PodsChanged();
  }
  if (mig_) {
    const auto now = std::chrono::steady_clock::now().time_since_epoch();
    mig_->Step(*nodes_->Snapshot(), *pods_->Snapshot(), std::chrono::duration_cast<std::chrono::seconds>(now).count());
  }
  cluster_->LoadMigSources(/*now=*/false);
  // Each step timed: a slow pass says where its time went (what delays every waiting pod).
  std::vector<std::pair<const char*, int64_t>> steps;
  int64_t at_us = NowUs();
  auto step = [&](const char* name, auto&& fn) {
    fn();
    const int64_t now_us = NowUs();
    steps.push_back({name, now_us - at_us});
    at_us = now_us;
  };
  // The DRA path first, so that the loop's nodes this pass already lack what it just allocated.
  step("dra", [&] {
    dra_->Classify();
    dra_->Sync();
    dra_->Classify();
  });
  step("nodes", [&] { cluster_->Sync(); });
  step("queues", [&] { teams_->Sync(); });
  step("jobs", [&] { SyncJobs(); });
  step("api-jobs", [&] { api_jobs_->Sync(); });
  step("budgets", [&] { SyncBudgets(); });
  step("filters", [&] { filters_->Sync(); });
  step("reasons", [&] { WriteReasons(); });
  step("groups", [&] { group_room_->SyncStatus(); });
  int64_t total_us = 0;
  for (const auto& [name, us] : steps) total_us += us;
  constexpr int64_t kSlowPassUs = 250'000;
  if (total_us < kSlowPassUs) return;
  std::string parts;
  for (const auto& [name, us] : steps) parts += fmt::format(" {} {} ms", name, us / 1000);
  Log(fmt::format("slow pass: {} ms:{}", total_us / 1000, parts));
}

}  // namespace tessera
