#include "service/demo.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace tessera {

const char* DemoClusterYaml() {
  return R"(name: tessera-demo
defaults: {gpus: 8, cpu: 192, memory_gib: 2048, interconnect: nvswitch, spine: spine-0, tier: reserved}
nodes:
  - {name: h100, count: 4, gpu: h100-80gb, leaf: leaf-0, price_per_gpu_hour: 4.916}
  - {name: a100, count: 2, gpu: a100-80gb, leaf: leaf-1, price_per_gpu_hour: 2.5}
  - {name: a100-mig, count: 2, gpu: a100-80gb, leaf: leaf-1, price_per_gpu_hour: 2.5, mig: {enabled: true, config: all-balanced}}
)";
}

namespace {

struct DemoTeam {
  const char* name;
  int guaranteed, limit;
  bool production_inference;  // an admin allowed it production-inference
};
constexpr DemoTeam kTeams[] = {{"vision", 24, 48, false}, {"language", 24, 48, false}, {"platform", 8, 32, true}};

}  // namespace

Result<std::vector<DemoUser>> SetUpDemo(Service& service) {
  const Caller admin{"admin", "", Role::kAdmin};
  std::vector<DemoUser> out;
  for (const DemoTeam& t : kTeams) {
    TeamRow row{t.name, t.guaranteed * 1000, t.limit * 1000, 1, 0};
    if (t.production_inference) {  // every class; the other teams keep the default (all but this one)
      row.allowed_classes.emplace();
      for (const PriorityClass& p : service.priority_classes()) row.allowed_classes->push_back(p.name);
    }
    auto r = service.CreateTeam(admin, row);
    if (!r.ok() && r.error().code != ErrorCode::kAlreadyExists) return Status::Error("demo team: " + r.error().message);
    for (const char* role : {"team-lead", "member"}) {
      const std::string name = fmt::format("{}-{}", t.name, role == std::string("member") ? "member" : "lead");
      auto u = service.CreateUser(admin, name, t.name, role);
      if (u.ok()) out.push_back({name, t.name, role, u->token});
      else if (u.error().code == ErrorCode::kAlreadyExists) out.push_back({name, t.name, role, ""});
      else return Status::Error("demo user: " + u.error().message);
    }
  }
  return out;
}

DemoStream::DemoStream(Service* service, uint64_t seed, int burst, double every_s)
    : service_(service), rng_(seed), burst_(burst), every_s_(every_s) {
  thread_ = std::thread([this] { Run(); });
}

DemoStream::~DemoStream() { Stop(); }

void DemoStream::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    cv_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
}

void DemoStream::Run() {
  for (int i = 0; i < burst_; ++i) SubmitOne();
  for (;;) {
    std::unique_lock<std::mutex> lock(mu_);
    if (cv_.wait_for(lock, std::chrono::duration<double>(every_s_), [&] { return stop_; })) return;
    lock.unlock();
    SubmitOne();
  }
}

bool DemoStream::SubmitOne() {
  const DemoTeam& t = kTeams[std::uniform_int_distribution<int>(0, 2)(rng_)];
  const int n = submitted_.load();
  const int kind = std::uniform_int_distribution<int>(0, 9)(rng_);
  const int minutes = std::uniform_int_distribution<int>(10, 90)(rng_);
  nlohmann::json j = {{"project", kind < 5 ? "research" : "serving"}, {"duration_s", minutes * 60}};
  if (kind < 2) {  // a gang of 2 x 8 GPUs
    j.update({{"name", fmt::format("pretrain-{}", n)}, {"class", "training"}, {"workers", 2}, {"gpus_per_worker", 8},
              {"memory_gib", 70}, {"checkpoint_interval_s", 1800}});
  } else if (kind < 5) {  // fine-tuning on 1-4 GPUs
    j.update({{"name", fmt::format("finetune-{}", n)}, {"class", "training"}, {"workers", 1},
              {"gpus_per_worker", 1 << std::uniform_int_distribution<int>(0, 2)(rng_)}, {"memory_gib", 60}});
  } else if (kind < 8) {  // inference replicas on MIG slices
    j.update({{"name", fmt::format("serve-{}", n)}, {"class", "inference"},
              {"replicas", std::uniform_int_distribution<int>(1, 3)(rng_)},
              {"mig_profile", kind == 7 ? "3g.40gb" : "1g.10gb"}, {"memory_gib", 8}});
  } else {  // inference on whole GPUs
    j.update({{"name", fmt::format("llm-{}", n)}, {"class", "inference"}, {"replicas", 2}, {"gpus_per_worker", 1},
              {"memory_gib", 40},
              {"priority_class", t.production_inference ? "production-inference" : "inference"}});
  }
  auto spec = ParseJobSpec(j);
  if (!spec.ok()) return false;
  const Caller member{fmt::format("{}-member", t.name), t.name, Role::kMember};
  const bool ok = service_->Submit(member, spec.value(), "").ok();
  if (ok) submitted_.fetch_add(1);
  return ok;
}

}  // namespace tessera
