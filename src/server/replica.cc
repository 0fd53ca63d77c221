// Replica (replica.h): the lease loop, the leader's term, the followers' views.
#include "server/replica.h"

#include <fmt/format.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <random>

namespace tessera {
namespace {

double ReplicaSteadyNow() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Names this process among the lease's holders (a restarted replica is a new holder).
std::string InstanceId(const std::string& url) {
  std::random_device rd;
  return fmt::format("{}#{}-{:08x}", url, getpid(), rd());
}

// The leader stops counting its term this long before the lease's end by its own clock: room for the two
// clocks' rates to differ.
constexpr double kTermMargin = 0.25;

}  // namespace

Replica::Replica(ReplicaOptions options)
    : o_(std::move(options)), tick_s_(std::clamp(o_.lease_s / 5, 0.05, 0.5)) {}

Replica::~Replica() { Stop(); }

Result<std::unique_ptr<Replica>> Replica::Start(ReplicaOptions options) {
  if (options.lease_s <= 0) return Status::Error("--lease-seconds must be positive");
  std::unique_ptr<Replica> r(new Replica(std::move(options)));
  auto reader = OpenPostgresStore(r->o_.store_uri);
  if (!reader.ok()) return reader.status();
  r->reader_ = std::move(reader).value();
  auto lease = LeaderLease::Open(r->o_.store_uri, InstanceId(r->o_.self_url), r->o_.self_url);
  if (!lease.ok()) return lease.status();
  r->lease_ = std::move(lease).value();
  auto view =
      r->o_.make_service(ReadOnlyView(r->reader_.get(), "this replica follows: it writes nothing"), true);
  if (!view.ok()) return view.status();
  r->slot_ = std::make_unique<ServiceSlot>(std::move(view).value());
  r->next_view_ = ReplicaSteadyNow() + r->o_.view_refresh_s;
  Replica* self = r.get();
  r->loop_ = std::thread([self] { self->Loop(); });
  return r;
}

void Replica::Stop() {
  {
    std::lock_guard<std::mutex> lock(stop_mu_);
    if (stop_) return;
    stop_ = true;
    stop_cv_.notify_all();
  }
  if (loop_.joinable()) loop_.join();
  if (leading_.exchange(false)) {
    if (leader_service_) leader_service_->Stop();  // its last writes land while the lease is still ours
    int64_t epoch;
    {
      std::lock_guard<std::mutex> lock(mu_);
      epoch = epoch_;
    }
    if (Status st = lease_->Release(epoch); !st.ok()) Log(st.message());
  }
  leader_service_.reset();
}

bool Replica::Leading() const { return leading_.load() && ReplicaSteadyNow() < deadline_.load(); }

LeaderInfo Replica::Info() const {
  std::lock_guard<std::mutex> lock(mu_);
  LeaderInfo i{leader_url_, epoch_, o_.self_url, Leading()};
  if (!i.leading && i.leader == o_.self_url) i.leader.clear();  // deposed: who leads now is not known yet
  return i;
}

void Replica::Log(const std::string& line) const {
  if (o_.log) o_.log(line);
}

void Replica::Loop() {
  pthread_setname_np(pthread_self(), "tessera-lease");
  for (;;) {
    if (leading_.load())
      LeaderTick();
    else
      FollowerTick();
    std::unique_lock<std::mutex> lock(stop_mu_);
    stop_cv_.wait_for(lock, std::chrono::duration<double>(tick_s_), [&] { return stop_ || fenced_.load(); });
    if (stop_) return;
  }
}

void Replica::LeaderTick() {
  if (fenced_.load()) return StepDown("the database refused a write: another replica took the lease");
  int64_t epoch;
  {
    std::lock_guard<std::mutex> lock(mu_);
    epoch = epoch_;
  }
  const double t0 = ReplicaSteadyNow();
  auto renewed = lease_->Renew(epoch, o_.lease_s);
  if (renewed.ok() && *renewed) {
    deadline_.store(t0 + o_.lease_s - kTermMargin);
    return;
  }
  if (renewed.ok()) return StepDown("the lease is no longer ours");
  if (ReplicaSteadyNow() >= deadline_.load()) StepDown("the lease ran out: " + renewed.error());
}

void Replica::FollowerTick() {
  auto state = lease_->Read();
  if (!state.ok()) return Log(state.error());
  {
    std::lock_guard<std::mutex> lock(mu_);
    epoch_ = std::max(epoch_, state->epoch);
    leader_url_ = state->live ? state->url : "";
  }
  if (!state->live) {
    const double t0 = ReplicaSteadyNow();
    auto acquired = lease_->TryAcquire(o_.lease_s);
    if (!acquired.ok()) return Log(acquired.error());
    if (*acquired > 0) return Lead(*acquired, t0);
  }
  if (ReplicaSteadyNow() >= next_view_) {
    if (Status st = RefreshView(); !st.ok()) Log("follower view: " + st.message());
    next_view_ = ReplicaSteadyNow() + o_.view_refresh_s;
  }
}

void Replica::Lead(int64_t epoch, double t0) {
  auto store = OpenPostgresStore(o_.store_uri);
  if (!store.ok()) {
    Log("cannot lead: " + store.error());
    (void)lease_->Release(epoch);
    return;
  }
  fenced_.store(false);
  (*store)->Fence(epoch, [this] {
    fenced_.store(true);
    std::lock_guard<std::mutex> lock(stop_mu_);
    stop_cv_.notify_all();
  });
  auto svc = o_.make_service(std::move(store).value(), false);
  if (!svc.ok()) {
    Log("cannot lead: " + svc.error());
    (void)lease_->Release(epoch);
    return;
  }
  leader_service_ = std::move(svc).value();
  {
    std::lock_guard<std::mutex> lock(mu_);
    epoch_ = epoch;
    leader_url_ = o_.self_url;
  }
  deadline_.store(t0 + o_.lease_s - kTermMargin);
  slot_->Replace(leader_service_);
  leading_.store(true);
  Log(fmt::format("leading at epoch {} ({})", epoch, o_.self_url));
  if (o_.on_lead) o_.on_lead(*leader_service_);
}

void Replica::StepDown(const std::string& why) {
  leading_.store(false);
  Log("following: " + why);
  {
    std::lock_guard<std::mutex> lock(mu_);
    leader_url_.clear();
  }
  // The term's service stops first (its cycles end; its writes are refused by the fence anyway).
  if (leader_service_) leader_service_->Stop();
  leader_service_.reset();
  if (Status st = RefreshView(); !st.ok()) Log("follower view: " + st.message());
  next_view_ = ReplicaSteadyNow() + o_.view_refresh_s;
}

Status Replica::RefreshView() {
  auto view = o_.make_service(ReadOnlyView(reader_.get(), "this replica follows: it writes nothing"), true);
  if (!view.ok()) return view.status();
  slot_->Replace(std::move(view).value());
  return Status::Ok();
}

}  // namespace tessera
