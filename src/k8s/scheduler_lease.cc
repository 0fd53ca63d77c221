// K8sScheduler's leadership: waiting for the Lease (configuration problems said, with back-off), keeping it
// (renewals every retry period; leading ends at the renew deadline), and the waits that a signal cuts short.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "k8s/scheduler.h"

namespace tessera {
namespace {

int64_t WallUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

double SteadyNowS() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

bool K8sScheduler::Cancelled() const {
  return stop_.load() || (options_.cancelled && options_.cancelled());
}

bool K8sScheduler::Pause(double s) {
  const double end = SteadyNowS() + s;
  std::unique_lock<std::mutex> l(lease_mu_);
  while (!Cancelled()) {
    const double left = end - SteadyNowS();
    if (left <= 0) return true;
    lease_cv_.wait_for(l, std::chrono::duration<double>(std::min(left, 0.05)));
  }
  return false;
}

Status K8sScheduler::AwaitLeadership() {
  const LeaseOptions& lo = elector_->options();
  Log(fmt::format("waiting for the Lease {}/{} as {}", lo.ns, lo.name, lo.identity));
  std::string said;
  double backoff_s = lo.renew_s, next_say = 0;
  while (!elector_->TryAcquireOrRenew(WallUs())) {
    const std::string problem = elector_->problem();
    if (problem.empty()) {
      said.clear();
      backoff_s = lo.renew_s;
    } else {
      if (problem != said || SteadyNowS() >= next_say) {
        Log(fmt::format("{}; trying again in {:.0f} s", problem, backoff_s));
        said = problem;
        next_say = SteadyNowS() + 60;
      }
      backoff_s = std::min(backoff_s * 2, 30.0);
    }
    if (!Pause(problem.empty() ? lo.renew_s : backoff_s)) return Status::Error("stopped before becoming the leader");
  }
  Log("leader: holding the Lease " + lo.ns + "/" + lo.name);
  return Status::Ok();
}

Status K8sScheduler::AwaitSynced(const std::vector<Informer*>& informers) {
  const double end = SteadyNowS() + 60;
  auto synced = [&] {
    return dra_->WaitSynced(0) &&
           std::all_of(informers.begin(), informers.end(), [](Informer* i) { return i->synced(); });
  };
  while (!synced()) {
    if (lost_.load()) return Status::Error("lost the Lease while listing the cluster");
    if (!Pause(0.05)) return Status::Error("stopped while listing the cluster");
    if (SteadyNowS() < end) continue;
    for (Informer* i : informers)
      if (!i->synced()) return Status::Error(fmt::format("{}: could not list it within 60 s", i->path()));
    return Status::Error("resource.k8s.io/v1: could not list it within 60 s");
  }
  return Status::Ok();
}

// Renews every retry period. Leading ends once no renew succeeded within the renew deadline (IsLeader
// checks the time, so the backend stops writing then even while a renew hangs); the process then ends.
void K8sScheduler::LeaseLoop() {
  const LeaseOptions& lo = elector_->options();
  std::string said;
  while (true) {
    {
      std::unique_lock<std::mutex> l(lease_mu_);
      if (lease_cv_.wait_for(l, std::chrono::seconds(lo.renew_s), [this] { return stop_.load(); })) return;
    }
    const bool leading = elector_->TryAcquireOrRenew(WallUs());
    if (const std::string p = elector_->problem(); !p.empty() && p != said) Log("renewing the Lease: " + p);
    said = elector_->problem();
    if (leading && db_lease_) {  // the database's lease goes with the Kubernetes one
      auto renewed = db_lease_->Renew(db_epoch_, lo.duration_s);
      if (renewed.ok() && !*renewed) {
        Log("lost the database's lease (another replica took it); stopping");
        lost_ = true;
        Wake();
        return;
      }
      if (!renewed.ok()) Log("renewing the database's lease: " + renewed.error());
    }
    if (!leading) {
      Log(fmt::format("lost the Lease: no renewal within the renew deadline ({} s); stopping (another replica "
                      "takes over)", lo.renew_deadline_s));
      lost_ = true;
      Wake();
      return;
    }
  }
}

}  // namespace tessera
