#include "service/simulated_backend.h"

#include <chrono>

#include "control/loop.h"

namespace tessera {

SimulatedBackend::SimulatedBackend(const Clock* clock, double latency_s, double failure_probability, uint64_t seed)
    : clock_(clock), latency_s_(latency_s), failure_probability_(failure_probability), rng_(seed) {
  if (latency_s_ > 0) worker_ = std::thread([this] { Worker(); });
}

SimulatedBackend::~SimulatedBackend() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();
}

double SimulatedBackend::WallNow() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void SimulatedBackend::OnEvents(std::function<void()> wake) {
  std::lock_guard<std::mutex> lock(mu_);
  wake_ = std::move(wake);
}

LaunchAck SimulatedBackend::Launch(const LaunchSpec& spec, int64_t now) {
  std::lock_guard<std::mutex> lock(mu_);
  if (latency_s_ > 0) {
    calls_.push_back({WallNow() + latency_s_, BackendEventKind::kStarted, spec.slot, spec.run, spec.work_s, kNone});
    cv_.notify_all();
    return {false, "", 1.0, /*in_flight=*/true};
  }
  if (failure_probability_ > 0 && std::uniform_real_distribution<double>(0, 1)(rng_) < failure_probability_) {
    inbox_.push_back({BackendEventKind::kLaunchFailed, spec.slot, spec.run, now, kNone,
                      "the simulated backend injected a launch failure"});
    return {false, "", 1.0, true};
  }
  runs_[spec.slot] = {spec.run, now};
  const int64_t end = RunEnd(now, spec.work_s, 1.0);
  if (end >= 0) ends_.emplace(end, std::make_pair(spec.slot, spec.run));
  return {};
}

bool SimulatedBackend::Adopt(const LaunchSpec& spec, int64_t started_at, int64_t now) {
  std::lock_guard<std::mutex> lock(mu_);
  runs_[spec.slot] = {spec.run, started_at};
  const int64_t end = RunEnd(started_at, spec.work_s, 1.0);
  if (end >= 0) ends_.emplace(std::max(end, now), std::make_pair(spec.slot, spec.run));
  return true;
}

void SimulatedBackend::Stop(JobSlot slot, uint32_t run, int64_t grace_s, std::string_view reason, int64_t now) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = runs_.find(slot);
  if (it != runs_.end() && it->second.first == run) runs_.erase(it);
  for (auto e = ends_.begin(); e != ends_.end();)
    e = e->second == std::make_pair(slot, run) ? ends_.erase(e) : std::next(e);
  if (latency_s_ > 0) {
    calls_.push_back({WallNow() + latency_s_, BackendEventKind::kStopped, slot, run, -1, kNone});
    cv_.notify_all();
  }
}

void SimulatedBackend::Checkpoint(JobSlot slot, uint32_t run, int64_t now) {
  std::lock_guard<std::mutex> lock(mu_);
  if (latency_s_ <= 0) return;
  calls_.push_back({WallNow() + latency_s_, BackendEventKind::kCheckpointed, slot, run, -1, kNone});
  cv_.notify_all();
}

void SimulatedBackend::Reconfigure(GpuId gpu, const std::string& layout, int64_t now) {
  std::lock_guard<std::mutex> lock(mu_);
  const bool fail = failure_probability_ > 0 && std::uniform_real_distribution<double>(0, 1)(rng_) < failure_probability_;
  if (latency_s_ <= 0) {
    if (fail)
      inbox_.push_back({BackendEventKind::kReconfigureFailed, kNoSlot, 0, now, gpu, "injected failure"});
    return;
  }
  calls_.push_back({WallNow() + latency_s_,
                    fail ? BackendEventKind::kReconfigureFailed : BackendEventKind::kCheckpointed, kNoSlot, 0,
                    -1, fail ? gpu : kNone});
  cv_.notify_all();
}

// The worker completes calls in order once their latency has passed (the caller never waits for it).
void SimulatedBackend::Worker() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    if (calls_.empty()) {
      cv_.wait(lock);
      continue;
    }
    const double wait = calls_.front().due_wall - WallNow();
    if (wait > 0) {
      cv_.wait_for(lock, std::chrono::duration<double>(wait));
      continue;
    }
    const Call c = calls_.front();
    calls_.pop_front();
    Complete(c);
    if (wake_) {
      auto wake = wake_;
      lock.unlock();
      wake();
      lock.lock();
    }
  }
}

void SimulatedBackend::Complete(const Call& c) {
  const int64_t now = static_cast<int64_t>(clock_->Now());
  if (c.done == BackendEventKind::kStarted) {
    if (failure_probability_ > 0 && std::uniform_real_distribution<double>(0, 1)(rng_) < failure_probability_) {
      inbox_.push_back({BackendEventKind::kLaunchFailed, c.slot, c.run, now, kNone,
                        "the simulated backend injected a launch failure"});
      return;
    }
    runs_[c.slot] = {c.run, now};
    const int64_t end = RunEnd(now, c.work_s, 1.0);
    if (end >= 0) ends_.emplace(end, std::make_pair(c.slot, c.run));
  }
  if (c.done == BackendEventKind::kCheckpointed && c.slot == kNoSlot)
    return;  // a reconfiguration that worked
  inbox_.push_back({c.done, c.slot, c.run, now, c.gpu, c.done == BackendEventKind::kReconfigureFailed ? "injected failure" : ""});
}

std::vector<BackendEvent> SimulatedBackend::Poll(int64_t now) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<BackendEvent> out = std::move(inbox_);
  inbox_.clear();
  while (!ends_.empty() && ends_.begin()->first <= now) {
    const auto [slot, run] = ends_.begin()->second;
    out.push_back({BackendEventKind::kEnded, slot, run, ends_.begin()->first, kNone, "completed"});
    auto it = runs_.find(slot);
    if (it != runs_.end() && it->second.first == run) runs_.erase(it);
    ends_.erase(ends_.begin());
  }
  return out;
}

int64_t SimulatedBackend::NextEventS() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!inbox_.empty()) return 0;
  return ends_.empty() ? -1 : ends_.begin()->first;
}

std::vector<BackendRun> SimulatedBackend::Running() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<BackendRun> out;
  for (const auto& [slot, r] : runs_) out.push_back({slot, r.first, r.second});
  return out;
}

size_t SimulatedBackend::running() const {
  std::lock_guard<std::mutex> lock(mu_);
  return runs_.size();
}

}  // namespace tessera
