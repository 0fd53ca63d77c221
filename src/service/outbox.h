#pragma once
// OutboxBackend: the service's driver runs under the service lock; this wrapper keeps the backend's calls
// out of it. Under the lock the driver's calls to an asynchronous backend (Backend::asynchronous) are only
// queued (a launch is answered in flight, its result comes back as an event); Flush, called by the service
// after it releases the lock, makes them, in order, so a slow backend never stalls the API. A synchronous
// backend (the simulated cluster of a replay, whose answer the driver needs at once) is called directly.
//
// Thread safety: Flush may run on another thread than the queuing calls; each call is made exactly once.

#include <deque>
#include <functional>
#include <mutex>

#include "control/backend.h"

namespace tessera {

class OutboxBackend final : public Backend {
 public:
  explicit OutboxBackend(Backend* inner) : inner_(inner) {}

  LaunchAck Launch(const LaunchSpec& spec, int64_t now) override;
  void Stop(JobSlot slot, uint32_t run, int64_t grace_s, std::string_view reason, int64_t now) override;
  void Checkpoint(JobSlot slot, uint32_t run, int64_t now) override;
  void Reconfigure(GpuId gpu, const std::string& layout, int64_t now) override;
  bool Adopt(const LaunchSpec& spec, int64_t started_at, int64_t now) override {
    return inner_->Adopt(spec, started_at, now);
  }
  std::vector<BackendEvent> Poll(int64_t now) override { return inner_->Poll(now); }
  int64_t NextEventS() const override { return inner_->NextEventS(); }
  std::vector<BackendRun> Running() const override { return inner_->Running(); }
  bool asynchronous() const override { return inner_->asynchronous(); }
  void OnEvents(std::function<void()> wake) override { inner_->OnEvents(std::move(wake)); }

  // Makes the queued calls (without the caller's lock held). Returns how many.
  size_t Flush();
  size_t queued() const;

 private:
  void Queue(std::function<void()> call);

  Backend* inner_;
  mutable std::mutex mu_;
  std::deque<std::function<void()>> calls_;
  std::mutex flush_mu_;  // one flush at a time keeps the calls in order
};

}  // namespace tessera
