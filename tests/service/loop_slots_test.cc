// The driver's jobs in the loop (service/loop_slots.cc): the name a driver gives a job's replicas
// (ServiceConfig::external_keys) goes with every launch of them, and with their adoption after a restart.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "manual_clock.h"
#include "service/service.h"
#include "service/simulated_backend.h"
#include "service/workload_json.h"

namespace tessera {
namespace {

using testing::ManualClock;

// The simulated backend behind a front that notes each launch's and adoption's key and node names.
class KeyNotingBackend final : public Backend {
 public:
  explicit KeyNotingBackend(const Clock* clock) : inner_(clock) {}
  LaunchAck Launch(const LaunchSpec& spec, int64_t now) override {
    launched.push_back(spec);
    return inner_.Launch(spec, now);
  }
  void Stop(JobSlot slot, uint32_t run, int64_t grace_s, std::string_view reason, int64_t now) override {
    inner_.Stop(slot, run, grace_s, reason, now);
  }
  std::vector<BackendEvent> Poll(int64_t now) override { return inner_.Poll(now); }
  int64_t NextEventS() const override { return inner_.NextEventS(); }
  bool Adopt(const LaunchSpec& spec, int64_t started_at, int64_t now) override {
    adopted.push_back(spec);
    return true;  // a real backend finds the run again (this one starts empty after the restart)
  }
  std::vector<LaunchSpec> launched, adopted;

 private:
  SimulatedBackend inner_;
};

constexpr const char* kCluster = R"(name: t
defaults: {gpu: h100-80gb, gpus: 8, cpu: 192, memory_gib: 2048, interconnect: nvswitch, spine: s, tier: reserved}
nodes:
  - {name: node, count: 2, leaf: leaf-0}
)";

class LoopSlotsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("tessera-loop-slots-" + std::to_string(getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    svc_.reset();
    std::filesystem::remove_all(dir_);
  }
  void Open(KeyNotingBackend* backend) {
    ServiceConfig cfg;
    cfg.catalog = &Catalog::Default();
    auto cl = LoadClusterYaml(kCluster, "test", Catalog::Default());
    ASSERT_TRUE(cl.ok()) << cl.error();
    cfg.cluster = *cl;
    cfg.background_cycles = false;
    cfg.external_keys = [](const JobRecord& j) {
      std::vector<std::string> keys;
      for (int r = 0; r < j.replicas && j.name != "anonymous"; ++r)
        keys.push_back("key/" + j.name + "/" + std::to_string(r));
      return keys;
    };
    auto store = OpenSqliteStore((dir_ / "t.db").string());
    ASSERT_TRUE(store.ok());
    auto s = Service::Start(std::move(cfg), std::move(store).value(), &clock_, backend);
    ASSERT_TRUE(s.ok()) << s.error();
    svc_ = std::move(s).value();
  }
  void Submit(const std::string& name, int replicas) {
    auto spec = ParseJobSpec({{"name", name},
                              {"class", "inference"},
                              {"replicas", replicas},
                              {"memory_gib", 60},
                              {"project", "p"},
                              {"team", "vision"}});
    ASSERT_TRUE(spec.ok()) << spec.error().message;
    auto r = svc_->Submit(admin_, spec.value(), "");
    ASSERT_TRUE(r.ok()) << r.error().message;
  }
  std::filesystem::path dir_;
  ManualClock clock_;
  Caller admin_{"root", "", Role::kAdmin, ""};
  std::unique_ptr<Service> svc_;
};

TEST_F(LoopSlotsTest, TheDriversKeyGoesWithEveryLaunchAndAdoption) {
  KeyNotingBackend first(&clock_);
  Open(&first);
  ASSERT_TRUE(svc_->CreateTeam(admin_, TeamRow{"vision", 16000, -1, 1, 0}).ok());
  Submit("chat", 2);
  Submit("anonymous", 1);
  svc_->RunCycleNow();
  std::multiset<std::string> keys;
  for (const LaunchSpec& s : first.launched) {
    keys.insert(s.key);
    ASSERT_EQ(s.node_names.size(), s.tasks.size());
    for (const std::string& n : s.node_names) EXPECT_TRUE(n == "node-000" || n == "node-001") << n;
  }
  EXPECT_EQ(keys, (std::multiset<std::string>{"key/chat/0", "key/chat/1", ""}));
  svc_->Stop();
  svc_.reset();
  KeyNotingBackend second(&clock_);
  Open(&second);
  keys.clear();
  for (const LaunchSpec& s : second.adopted) {
    keys.insert(s.key);
    EXPECT_EQ(s.node_names.size(), s.tasks.size());
  }
  EXPECT_EQ(keys, (std::multiset<std::string>{"key/chat/0", "key/chat/1", ""}));
}

}  // namespace
}  // namespace tessera
