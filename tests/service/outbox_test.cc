// The outbox keeps an asynchronous backend's calls out of the service lock: queued until Flush, made once
// and in order; a synchronous backend is called at once (the driver needs its answer).
#include "service/outbox.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

class Recording final : public Backend {
 public:
  explicit Recording(bool async) : async_(async) {}
  LaunchAck Launch(const LaunchSpec& spec, int64_t) override {
    calls.push_back("launch " + std::to_string(spec.slot.value()));
    return {false, "", 0.5, false};
  }
  void Stop(JobSlot slot, uint32_t, int64_t, std::string_view reason, int64_t) override {
    calls.push_back("stop " + std::to_string(slot.value()) + " " + std::string(reason));
  }
  void Reconfigure(GpuId gpu, const std::string& layout, int64_t) override {
    calls.push_back("reconfigure " + std::to_string(gpu) + " " + layout);
  }
  std::vector<BackendEvent> Poll(int64_t) override { return {}; }
  int64_t NextEventS() const override { return -1; }
  bool asynchronous() const override { return async_; }
  std::vector<std::string> calls;

 private:
  bool async_;
};

TEST(Outbox, QueuesAnAsynchronousBackendsCallsUntilFlush) {
  Recording inner(true);
  OutboxBackend out(&inner);
  const LaunchAck ack = out.Launch({JobSlot(7), 0, {}, 10, "", {}}, 0);
  EXPECT_TRUE(ack.in_flight);
  out.Reconfigure(3, "3g.40gb@4", 0);
  std::string reason = "cancelled by a";
  out.Stop(JobSlot(7), 0, 30, reason, 1);
  reason = "changed";  // the queued call kept its own copy
  EXPECT_TRUE(inner.calls.empty());
  EXPECT_EQ(out.queued(), 3u);
  EXPECT_EQ(out.Flush(), 3u);
  EXPECT_EQ(inner.calls, (std::vector<std::string>{"launch 7", "reconfigure 3 3g.40gb@4", "stop 7 cancelled by a"}));
  EXPECT_EQ(out.Flush(), 0u);  // each call once
}

TEST(Outbox, CallsASynchronousBackendAtOnce) {
  Recording inner(false);
  OutboxBackend out(&inner);
  const LaunchAck ack = out.Launch({JobSlot(2), 0, {}, 10, "", {}}, 0);
  EXPECT_FALSE(ack.in_flight);
  EXPECT_EQ(ack.efficiency, 0.5);  // the backend's own answer
  EXPECT_EQ(inner.calls, std::vector<std::string>{"launch 2"});
  EXPECT_EQ(out.queued(), 0u);
}

}  // namespace
}  // namespace tessera
