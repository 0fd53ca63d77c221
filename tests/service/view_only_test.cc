// A follower's view (ServiceConfig::view_only over store/ReadOnlyView): built from what is stored, it
// writes nothing (not even on an empty store or at stop), runs no cycle, and refuses writes.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "service/manual_clock.h"
#include "service/service.h"
#include "service/simulated_backend.h"

namespace tessera {
namespace {

class ViewOnlyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (std::filesystem::temp_directory_path() / ("tessera-view-" + std::to_string(getpid()) + ".db"))
                .string();
    std::filesystem::remove(path_);
    auto s = OpenSqliteStore(path_);
    ASSERT_TRUE(s.ok());
    base_ = std::move(s).value();
  }
  void TearDown() override {
    base_.reset();
    for (const char* x : {"", "-wal", "-shm"}) std::filesystem::remove(path_ + x);
  }
  Result<std::unique_ptr<Service>> Start(bool view) {
    ServiceConfig cfg;
    cfg.catalog = &Catalog::Default();
    auto cl = LoadClusterYaml(
        "name: t\ndefaults: {gpu: h100-80gb, gpus: 8, cpu: 192, memory_gib: 2048, interconnect: nvswitch, "
        "spine: "
        "s, tier: reserved}\nnodes:\n  - {name: node, count: 2, leaf: leaf-0}\n",
        "test", Catalog::Default());
    cfg.cluster = *cl;
    cfg.view_only = view;
    cfg.background_cycles = !view;
    std::unique_ptr<Store> store =
        view ? ReadOnlyView(base_.get(), "a follower writes nothing") : ReadOnlyView(base_.get(), "unused");
    if (!view) {
      auto own = OpenSqliteStore(path_);
      if (!own.ok()) return own.status();
      store = std::move(own).value();
    }
    backends_.push_back(std::make_unique<SimulatedBackend>(&clock_));  // each service its own, as a replica's
    return Service::Start(std::move(cfg), std::move(store), &clock_, backends_.back().get());
  }
  std::string path_;
  testing::ManualClock clock_;
  std::unique_ptr<Store> base_;
  std::vector<std::unique_ptr<SimulatedBackend>> backends_;
};

TEST_F(ViewOnlyTest, AViewOfAnEmptyStoreWritesNothing) {
  auto view = Start(true);
  ASSERT_TRUE(view.ok()) << view.error();
  EXPECT_EQ((*view)->cluster().nodes.size(), 2u);  // the configured cluster, not stored
  (*view)->Stop();
  auto st = base_->Load();
  ASSERT_TRUE(st.ok());
  EXPECT_TRUE(st->nodes.empty());
  EXPECT_TRUE(st->meta.empty());  // no ledger start, no clock
  EXPECT_TRUE(st->users.empty());
}

TEST_F(ViewOnlyTest, AViewShowsTheStoredStateAndRefusesWrites) {
  const Caller admin{"admin", "", Role::kAdmin};
  {
    auto leader = Start(false);
    ASSERT_TRUE(leader.ok()) << leader.error();
    ASSERT_TRUE((*leader)->BootstrapAdmin().ok());
    ASSERT_TRUE((*leader)->CreateTeam(admin, TeamRow{"vision", 8000, -1, 1, 0}).ok());
    auto spec = ParseJobSpec({{"name", "j"},
                              {"class", "training"},
                              {"gpus_per_worker", 1},
                              {"memory_gib", 40},
                              {"duration_s", 600},
                              {"team", "vision"}});
    ASSERT_TRUE(spec.ok());
    ASSERT_TRUE((*leader)->Submit(admin, spec.value(), "k").ok());
  }
  auto view = Start(true);
  ASSERT_TRUE(view.ok()) << view.error();
  bool more = false;
  auto jobs = (*view)->List(admin, "", "", "", 0, 100, &more);
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].job->name, "j");
  EXPECT_EQ((*view)->Teams(admin).size(), 1u);
  auto spec = ParseJobSpec({{"name", "k"},
                            {"class", "training"},
                            {"gpus_per_worker", 1},
                            {"memory_gib", 40},
                            {"duration_s", 600},
                            {"team", "vision"}});
  auto refused = (*view)->Submit(admin, spec.value(), "");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::kUnavailable);
  EXPECT_FALSE((*view)->CreateTeam(admin, TeamRow{"search", 8000, -1, 1, 0}).ok());
  (*view)->Stop();
  auto st = base_->Load();
  ASSERT_EQ(st->jobs.size(), 1u);
  EXPECT_EQ(st->teams.size(), 1u);
}

}  // namespace
}  // namespace tessera
