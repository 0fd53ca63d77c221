#pragma once
// The demo: an embedded cluster (32 H100 on one leaf, 32 A100 on another, half of the A100 in MIG mode),
// three teams with guarantees, a lead and a member per team, and a stream of jobs (training gangs, whole-GPU
// and MIG inference) submitted through the Service as those users, so queues move and GPUs fill.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "service/service.h"

namespace tessera {

const char* DemoClusterYaml();

struct DemoUser {
  std::string name, team, role, token;  // token empty when the user existed already
};

// Creates the demo teams and users that do not exist yet.
Result<std::vector<DemoUser>> SetUpDemo(Service& service);

// Submits demo jobs: `burst` at once, then one every `every_s` wall seconds, until Stop().
class DemoStream {
 public:
  DemoStream(Service* service, uint64_t seed, int burst = 24, double every_s = 1.5);
  ~DemoStream();
  void Stop();
  int submitted() const { return submitted_.load(); }

 private:
  void Run();
  bool SubmitOne();
  Service* service_;
  std::mt19937_64 rng_;
  int burst_;
  double every_s_;
  std::atomic<int> submitted_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace tessera
