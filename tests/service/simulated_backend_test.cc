// The service's simulated backend: runs end after their work on the service clock; with latency every call
// completes later on the backend's own thread (the caller never waits), reported as events; injected
// failures requeue launches; adoption after a restart.
#include "service/simulated_backend.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace tessera {
namespace {

LaunchSpec Spec(JobSlot slot, double work_s, uint32_t run = 0) { return {slot, run, {}, work_s, "", {}}; }

std::vector<BackendEvent> PollUntil(SimulatedBackend& b, const VirtualClock& clock, size_t n, double timeout_s) {
  std::vector<BackendEvent> out;
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (out.size() < n && std::chrono::steady_clock::now() < end) {
    for (BackendEvent& e : b.Poll(static_cast<int64_t>(clock.Now()))) out.push_back(std::move(e));
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return out;
}

TEST(SimulatedBackend, RunsEndAfterTheirWork) {
  VirtualClock clock(100);
  SimulatedBackend b(&clock);
  const LaunchAck ack = b.Launch(Spec(JobSlot(3), 50), 100);
  EXPECT_FALSE(ack.failed);
  EXPECT_FALSE(ack.in_flight);
  EXPECT_EQ(b.NextEventS(), 150);
  EXPECT_TRUE(b.Poll(149).empty());
  const auto ev = b.Poll(150);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, BackendEventKind::kEnded);
  EXPECT_EQ(ev[0].slot, JobSlot(3));
  EXPECT_EQ(ev[0].at, 150);
  // A stopped run never ends.
  b.Launch(Spec(JobSlot(4), 10), 200);
  b.Stop(JobSlot(4), 0, 0, "cancelled", 205);
  EXPECT_TRUE(b.Poll(1000).empty());
}

TEST(SimulatedBackend, WithLatencyCallsCompleteLaterAndNeverBlockTheCaller) {
  VirtualClock clock(0);
  SimulatedBackend b(&clock, /*latency_s=*/1.0);
  std::atomic<int> wakes{0};
  b.OnEvents([&] { ++wakes; });
  const auto t0 = std::chrono::steady_clock::now();
  const LaunchAck ack = b.Launch(Spec(JobSlot(1), 30), 0);
  b.Stop(JobSlot(2), 0, 0, "cancelled", 0);
  // The calls return long before their latency has passed (they only queue the work).
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 0.5);
  EXPECT_TRUE(ack.in_flight);
  EXPECT_TRUE(b.Poll(0).empty());  // nothing yet
  const auto ev = PollUntil(b, clock, 2, 10);
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].kind, BackendEventKind::kStarted);
  EXPECT_EQ(ev[1].kind, BackendEventKind::kStopped);
  EXPECT_GE(wakes.load(), 2);
  clock.Set(30);
  const auto end = b.Poll(30);
  ASSERT_EQ(end.size(), 1u);
  EXPECT_EQ(end[0].kind, BackendEventKind::kEnded);
}

TEST(SimulatedBackend, InjectedFailuresRequeueLaunches) {
  VirtualClock clock(0);
  SimulatedBackend b(&clock, 0, /*failure_probability=*/1.0, 7);
  const LaunchAck ack = b.Launch(Spec(JobSlot(5), 30), 0);
  EXPECT_FALSE(ack.failed);  // not a failure of the job: the launch did not happen
  const auto ev = b.Poll(0);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, BackendEventKind::kLaunchFailed);
  EXPECT_FALSE(ev[0].message.empty());
}

TEST(SimulatedBackend, AdoptsARunThatStartedBeforeARestart) {
  VirtualClock clock(1000);
  SimulatedBackend b(&clock);
  EXPECT_TRUE(b.Adopt(Spec(JobSlot(9), 600, 2), /*started_at=*/700, 1000));
  ASSERT_EQ(b.Running().size(), 1u);
  EXPECT_EQ(b.Running()[0].run, 2u);
  EXPECT_EQ(b.NextEventS(), 1300);
}

}  // namespace
}  // namespace tessera
