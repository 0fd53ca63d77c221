#include "service/outbox.h"

namespace tessera {

void OutboxBackend::Queue(std::function<void()> call) {
  std::lock_guard<std::mutex> lock(mu_);
  calls_.push_back(std::move(call));
}

LaunchAck OutboxBackend::Launch(const LaunchSpec& spec, int64_t now) {
  if (!inner_->asynchronous()) return inner_->Launch(spec, now);
  Queue([this, spec, now] { (void)inner_->Launch(spec, now); });  // its result comes back as an event
  return {false, "", 1.0, /*in_flight=*/true};
}

void OutboxBackend::Stop(JobSlot slot, uint32_t run, int64_t grace_s, std::string_view reason, int64_t now) {
  if (!inner_->asynchronous()) return inner_->Stop(slot, run, grace_s, reason, now);
  Queue([this, slot, run, grace_s, r = std::string(reason), now] { inner_->Stop(slot, run, grace_s, r, now); });
}

void OutboxBackend::Checkpoint(JobSlot slot, uint32_t run, int64_t now) {
  if (!inner_->asynchronous()) return inner_->Checkpoint(slot, run, now);
  Queue([this, slot, run, now] { inner_->Checkpoint(slot, run, now); });
}

void OutboxBackend::Reconfigure(GpuId gpu, const std::string& layout, int64_t now) {
  if (!inner_->asynchronous()) return inner_->Reconfigure(gpu, layout, now);
  Queue([this, gpu, layout, now] { inner_->Reconfigure(gpu, layout, now); });
}

size_t OutboxBackend::Flush() {
  std::lock_guard<std::mutex> order(flush_mu_);
  std::deque<std::function<void()>> calls;
  {
    std::lock_guard<std::mutex> lock(mu_);
    calls.swap(calls_);
  }
  for (auto& c : calls) c();
  return calls.size();
}

size_t OutboxBackend::queued() const {
  std::lock_guard<std::mutex> lock(mu_);
  return calls_.size();
}

}  // namespace tessera
