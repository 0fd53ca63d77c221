// LeaderRoom (leader_room.h): waiting for the Lease, keeping it, the store fenced by the database's lease,
// and the waits that a signal cuts short.
#include "k8s/leader_room.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "k8s/scheduler.h"

namespace tessera {
namespace {

int64_t WallUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

double SteadyNowS() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

LeaderRoom::LeaderRoom(K8sScheduler* scheduler) : s_(scheduler) {}

LeaderRoom::~LeaderRoom() { StopRenewing(); }

void LeaderRoom::Init() {
  LeaseOptions lo = s_->options_.lease;
  lo.ns = s_->options_.lease_namespace.empty() ? s_->api_.config().ns : s_->options_.lease_namespace;
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  lo.identity = s_->options_.identity.empty() ? fmt::format("{}_{}", host, getpid()) : s_->options_.identity;
  lease_api_ = std::make_unique<ApiClient>(s_->api_.config());
  lease_api_->set_timeouts(2, 2);  // a renew never outlasts the renew deadline
  elector_ = std::make_unique<LeaderElector>(lease_api_.get(), lo);
}

void LeaderRoom::StopRenewing() {
  { std::lock_guard<std::mutex> l(mu_); }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void LeaderRoom::Release() {
  if (!elector_ || s_->lost_.load() || !elector_->IsLeader()) return;
  const bool released = elector_->Release(WallUs());
  s_->Log(released ? "released the Lease" : "could not release the Lease (it expires on its own)");
  if (db_lease_) (void)db_lease_->Release(db_epoch_);
}

bool LeaderRoom::Cancelled() const {
  return s_->stop_.load() || (s_->options_.cancelled && s_->options_.cancelled());
}

bool LeaderRoom::Pause(double s) {
  const double end = SteadyNowS() + s;
  std::unique_lock<std::mutex> l(mu_);
  while (!Cancelled()) {
    const double left = end - SteadyNowS();
    if (left <= 0) return true;
    cv_.wait_for(l, std::chrono::duration<double>(std::min(left, 0.05)));
  }
  return false;
}

Status LeaderRoom::Await() {
  const LeaseOptions& lo = elector_->options();
  s_->Log(fmt::format("waiting for the Lease {}/{} as {}", lo.ns, lo.name, lo.identity));
  std::string said;
  double backoff_s = lo.renew_s, next_say = 0;
  while (!elector_->TryAcquireOrRenew(WallUs())) {
    const std::string problem = elector_->problem();
    if (problem.empty()) {
      said.clear();
      backoff_s = lo.renew_s;
    } else {
      if (problem != said || SteadyNowS() >= next_say) {
        s_->Log(fmt::format("{}; trying again in {:.0f} s", problem, backoff_s));
        said = problem;
        next_say = SteadyNowS() + 60;
      }
      backoff_s = std::min(backoff_s * 2, 30.0);
    }
    if (!Pause(problem.empty() ? lo.renew_s : backoff_s))
      return Status::Error("stopped before becoming the leader");
  }
  s_->Log("leader: holding the Lease " + lo.ns + "/" + lo.name);
  thread_ = std::thread([this] { RenewLoop(); });
  return Status::Ok();
}

Status LeaderRoom::AwaitSynced(const std::vector<Informer*>& informers) {
  const double end = SteadyNowS() + 60;
  auto synced = [&] {
    return s_->dra_->WaitSynced(0) &&
           std::all_of(informers.begin(), informers.end(), [](Informer* i) { return i->synced(); });
  };
  while (!synced()) {
    if (s_->lost_.load()) return Status::Error("lost the Lease while listing the cluster");
    if (!Pause(0.05)) return Status::Error("stopped while listing the cluster");
    if (SteadyNowS() < end) continue;
    for (Informer* i : informers)
      if (!i->synced()) return Status::Error(fmt::format("{}: could not list it within 60 s", i->path()));
    return Status::Error("resource.k8s.io/v1: could not list it within 60 s");
  }
  return Status::Ok();
}

void LeaderRoom::RenewLoop() {
  const LeaseOptions& lo = elector_->options();
  std::string said;
  while (true) {
    {
      std::unique_lock<std::mutex> l(mu_);
      if (cv_.wait_for(l, std::chrono::seconds(lo.renew_s), [this] { return s_->stop_.load(); })) return;
    }
    const bool leading = elector_->TryAcquireOrRenew(WallUs());
    if (const std::string p = elector_->problem(); !p.empty() && p != said)
      s_->Log("renewing the Lease: " + p);
    said = elector_->problem();
    if (leading && db_lease_) {  // the database's lease goes with the Kubernetes one
      auto renewed = db_lease_->Renew(db_epoch_, lo.duration_s);
      if (renewed.ok() && !*renewed) {
        s_->Log("lost the database's lease (another replica took it); stopping");
        s_->lost_ = true;
        s_->Wake();
        return;
      }
      if (!renewed.ok()) s_->Log("renewing the database's lease: " + renewed.error());
    }
    if (!leading) {
      s_->Log(fmt::format(
          "lost the Lease: no renewal within the renew deadline ({} s); stopping (another replica "
          "takes over)",
          lo.renew_deadline_s));
      s_->lost_ = true;
      s_->Wake();
      return;
    }
  }
}

Result<std::unique_ptr<Store>> LeaderRoom::OpenStore() {
  if (s_->options_.store.empty()) return OpenSqliteStore(s_->options_.db);
  auto pg = OpenPostgresStore(s_->options_.store);
  if (!pg.ok()) return pg.status();
  const std::string id = elector_ ? elector_->options().identity : s_->options_.identity;
  auto lease = LeaderLease::Open(s_->options_.store, id, id);
  if (!lease.ok()) return lease.status();
  const double seconds = elector_ ? elector_->options().duration_s : LeaseOptions{}.duration_s;
  for (bool said = false;;) {
    auto epoch = (*lease)->TryAcquire(seconds);
    if (!epoch.ok()) return epoch.status();
    if (*epoch > 0) {
      db_epoch_ = *epoch;
      break;
    }
    if (!said) s_->Log("waiting for the previous leader's lease in the database to run out");
    said = true;
    if (s_->lost_.load() || !Pause(0.5))
      return Status::Error("stopped while waiting for the database's lease");
  }
  db_lease_ = std::move(lease).value();
  (*pg)->Fence(db_epoch_, [this] {
    s_->Log("the database refused a write: another replica leads; stopping");
    s_->lost_ = true;
    s_->Wake();
  });
  s_->Log(fmt::format("database lease at epoch {}", db_epoch_));
  return std::unique_ptr<Store>(std::move(pg).value());
}

}  // namespace tessera
