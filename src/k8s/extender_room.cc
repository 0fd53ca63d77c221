// ExtenderRoom (extender_room.h): the extender's verbs from the loop's view.
#include "k8s/extender_room.h"

#include <fmt/format.h>

#include <ctime>

#include "k8s/scheduler.h"
#include "service/workload_json.h"

namespace tessera {

using json = nlohmann::json;

ExtenderRoom::ExtenderRoom(K8sScheduler* scheduler) : s_(scheduler) {}

ExtenderRoom::~ExtenderRoom() { Stop(); }

Status ExtenderRoom::Start(ExtenderServerOptions options) {
  ExtenderOptions eo{&Catalog::Default(), s_->options_.leaf_label, s_->options_.spine_label};
  eo.min_runtime_s = s_->options_.min_runtime_s;
  eo.now_s = [] { return static_cast<int64_t>(std::time(nullptr)); };
  eo.loop_view = [this](const json& pod, const std::vector<std::string>& nodes) { return Fits(pod, nodes); };
  eo.loop_victim = [this](const json& pod, const json& victim) { return MayTake(pod, victim); };
  extender_ = std::make_unique<Extender>(std::move(eo));
  server_ = std::make_unique<ExtenderServer>(extender_.get(), std::move(options));
  if (Status st = server_->Bind(); !st.ok()) return st;
  s_->Log("extender verbs (from the loop's view) at " + server_->url());
  thread_ = std::thread([this] { server_->Serve(); });
  return Status::Ok();
}

void ExtenderRoom::Stop() {
  if (server_) server_->Stop();
  if (thread_.joinable()) thread_.join();
}

Result<JobSpec> ExtenderRoom::SpecOf(const json& pod) const {
  auto demand = ReadPodDemand(pod);
  if (!demand.ok()) return demand.status();
  const JobKey key{"pod", Meta(pod, "namespace").empty() ? "default" : Meta(pod, "namespace"),
                   Meta(pod, "name").empty() ? "pod" : Meta(pod, "name")};
  auto spec = JobSpecFor(key, {*demand}, 1, s_->PriorityClassOf(pod), key.ns);
  if (!spec.ok()) return Status::Error(fmt::format("{}: {}", key.name, spec.error()));
  return spec;
}

std::optional<bool> ExtenderRoom::MayTake(const json& pod, const json& victim) const {
  const auto run = s_->backend_ ? s_->backend_->RunOfPod(Meta(victim, "uid")) : std::nullopt;
  if (!run || run->stopping || !s_->service_) return std::nullopt;
  auto spec = SpecOf(pod);
  if (!spec.ok()) return std::nullopt;
  return s_->service_->MayPreemptFor(run->slot, *spec);
}

Result<std::vector<LoopFit>> ExtenderRoom::Fits(const json& pod,
                                                const std::vector<std::string>& nodes) const {
  auto spec = SpecOf(pod);
  if (!spec.ok()) return spec.status();
  auto fits = s_->service_->RankNodes(s_->admin_, *spec, nodes, kRanked);
  if (!fits.ok()) return Status::Error(fits.error().message);
  std::vector<LoopFit> out;
  for (const NodeRank& f : fits.value()) out.push_back({f.node, f.fits, f.rank, f.reason});
  return out;
}

}  // namespace tessera
