// Service over a real SQLite file with a manual clock and the simulated backend: submission and
// validation, roles and team isolation, idempotency, scheduling and completion with usage, restart from
// the store alone.
#include "service/service.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "cost/pricebook.h"
#include "manual_clock.h"
#include "service/simulated_backend.h"
#include "service/tokens.h"
#include "testing/paths.h"

namespace tessera {
namespace {

using testing::ManualClock;

constexpr const char* kServiceCluster = R"(name: t
defaults: {gpu: h100-80gb, gpus: 8, cpu: 192, memory_gib: 2048, interconnect: nvswitch, spine: s, tier: reserved}
nodes:
  - {name: node, count: 2, leaf: leaf-0}
  - {name: a100, count: 1, gpu: a100-80gb, leaf: leaf-0, tier: on-demand, mig: {enabled: true, config: all-balanced}}
)";

class ServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("tessera-service-" + std::to_string(getpid()) + "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    Open();
    auto t = svc_->BootstrapAdmin();
    ASSERT_TRUE(t.ok());
    ASSERT_TRUE(svc_->CreateTeam(admin_, TeamRow{"vision", 8000, -1, 1, 0}).ok());
    ASSERT_TRUE(svc_->CreateTeam(admin_, TeamRow{"search", 8000, -1, 1, 0}).ok());
  }
  void TearDown() override {
    svc_.reset();
    std::filesystem::remove_all(dir_);
  }
  void Open() {
    ServiceConfig cfg;
    cfg.catalog = &Catalog::Default();
    auto cl = LoadClusterYaml(cluster_yaml_, "test", Catalog::Default());
    ASSERT_TRUE(cl.ok()) << cl.error();
    cfg.cluster = *cl;
    cfg.background_cycles = false;
    cfg.price_books = books_;
    auto store = OpenSqliteStore((dir_ / db_name_).string());
    ASSERT_TRUE(store.ok());
    auto s = Service::Start(std::move(cfg), std::move(store).value(), &clock_, backend_.get());
    ASSERT_TRUE(s.ok()) << s.error();
    svc_ = std::move(s).value();
  }
  JobSpec Spec(nlohmann::json j) {
    auto s = ParseJobSpec(j);
    EXPECT_TRUE(s.ok()) << s.error().message;
    return s.ok() ? s.value() : JobSpec{};
  }
  JobSpec Training(const std::string& name, int gpus, int duration = 600) {
    return Spec({{"name", name}, {"class", "training"}, {"workers", 1}, {"gpus_per_worker", gpus},
                 {"memory_gib", 40}, {"project", "p"}, {"duration_s", duration}, {"gpu_kinds", {"h100-80gb"}}});
  }
  int64_t SubmitOk(const Caller& c, const JobSpec& s, const std::string& key = "") {
    auto r = svc_->Submit(c, s, key);
    EXPECT_TRUE(r.ok()) << r.error().message;
    return r.ok() ? r->job->id : -1;
  }

  // A service on another cluster, with a fresh store, the same teams and the admin.
  void OpenOn(const std::string& cluster_yaml) {
    svc_.reset();
    cluster_yaml_ = cluster_yaml;
    db_name_ = "other.db";
    Open();
    ASSERT_TRUE(svc_->BootstrapAdmin().ok());
    ASSERT_TRUE(svc_->CreateTeam(admin_, TeamRow{"vision", 8000, -1, 1, 0}).ok());
    ASSERT_TRUE(svc_->CreateTeam(admin_, TeamRow{"search", 8000, -1, 1, 0}).ok());
  }

  std::filesystem::path dir_;
  std::string cluster_yaml_ = kServiceCluster, db_name_ = "t.db";
  std::vector<PriceBook> books_;  // empty: the service's default
  ManualClock clock_;
  std::unique_ptr<SimulatedBackend> backend_ = std::make_unique<SimulatedBackend>(&clock_);
  std::unique_ptr<Service> svc_;
  Caller admin_{"admin", "", Role::kAdmin};
  Caller lead_{"lead", "vision", Role::kTeamLead};
  Caller member_{"ana", "vision", Role::kMember};
  Caller other_member_{"bob", "vision", Role::kMember};
  Caller viewer_{"vic", "vision", Role::kViewer};
  Caller search_lead_{"sam", "search", Role::kTeamLead};
};

TEST_F(ServiceTest, BadInputNamesTheFieldAndStoresNothing) {
  struct Case {
    nlohmann::json body;
    std::string field;
  };
  const std::vector<Case> cases = {
      {{{"name", "x"}, {"class", "training"}, {"gpus_per_worker", 9}}, "gpus_per_worker"},
      {{{"name", "x"}, {"class", "training"}, {"memory_gib", 100000}}, "memory_gib"},
      {{{"name", "x"}, {"class", "inference"}, {"mig_profile", "9g.999gb"}}, "mig_profile"},
      {{{"name", "x"}, {"class", "training"}, {"priority_class", "ultra"}}, "priority_class"},
      {{{"name", "x"}, {"class", "training"}, {"workers", 4}, {"gpus_per_worker", 8}}, "workers"},
      {{{"name", "x"}, {"class", "training"}, {"team", "nope"}}, "team"},
  };
  for (const Case& c : cases) {
    auto spec = ParseJobSpec(c.body);
    ASSERT_TRUE(spec.ok()) << c.body.dump();
    auto r = svc_->Submit(c.field == "team" ? admin_ : member_, spec.value(), "");
    ASSERT_FALSE(r.ok()) << c.body.dump();
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
    EXPECT_EQ(r.error().field, c.field) << r.error().message;
  }
  const std::vector<Case> parse_cases = {
      {{{"name", "x"}, {"bogus", 1}}, "bogus"},
      {{{"name", "x"}, {"workers", "two"}}, "workers"},
      {{{"name", "x"}, {"workers", -1}}, "workers"},
      {{{"class", "training"}}, "name"},
      {{{"name", "x"}, {"class", "quantum"}}, "class"},
      {{{"name", "x"}, {"gpu_fraction", 1.5}}, "gpu_fraction"},
      {{{"name", "x"}, {"replicas", 0}}, "replicas"},
      {{{"name", "x"}, {"duration_s", -5}}, "duration_s"},
  };
  for (const Case& c : parse_cases) {
    auto spec = ParseJobSpec(c.body);
    ASSERT_FALSE(spec.ok()) << c.body.dump();
    EXPECT_EQ(spec.error().field, c.field) << spec.error().message;
  }
  bool more = true;
  EXPECT_TRUE(svc_->List(admin_, "", "", "", 0, 100, &more).empty());
}

TEST_F(ServiceTest, RolesAndTeamIsolation) {
  EXPECT_EQ(svc_->Submit(viewer_, Training("v", 1), "").error().code, ErrorCode::kPermissionDenied);
  const int64_t id = SubmitOk(member_, Training("a", 1));
  EXPECT_TRUE(svc_->Get(viewer_, id).ok());
  EXPECT_EQ(svc_->Get(search_lead_, id).error().code, ErrorCode::kNotFound);
  EXPECT_EQ(svc_->Cancel(search_lead_, id).error().code, ErrorCode::kNotFound);
  EXPECT_EQ(svc_->SetPriority(search_lead_, id, "training-high").error().code, ErrorCode::kNotFound);
  EXPECT_EQ(svc_->SetPriority(viewer_, id, "training-high").error().code, ErrorCode::kPermissionDenied);
  EXPECT_EQ(svc_->Cancel(other_member_, id).error().code, ErrorCode::kPermissionDenied);
  auto p = svc_->SetPriority(lead_, id, "training-high");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(svc_->Get(member_, id)->job->priority_class, "training-high");
  EXPECT_EQ(svc_->SetPriority(lead_, id, "ultra").error().field, "priority_class");
  bool more = false;
  EXPECT_TRUE(svc_->List(search_lead_, "", "", "", 0, 100, &more).empty());
  EXPECT_EQ(svc_->List(viewer_, "", "", "", 0, 100, &more).size(), 1u);
  auto c = svc_->Cancel(member_, id);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->job->state, JobState::kCancelled);
  // Users: a team lead creates users of its own team only.
  EXPECT_TRUE(svc_->CreateUser(lead_, "newbie", "vision", "member").ok());
  EXPECT_EQ(svc_->CreateUser(lead_, "intruder", "search", "member").error().code, ErrorCode::kPermissionDenied);
  EXPECT_EQ(svc_->CreateUser(member_, "x", "vision", "member").error().code, ErrorCode::kPermissionDenied);
  EXPECT_EQ(svc_->CreateTeam(lead_, TeamRow{"t", 0, -1, 1, 0}).error().code, ErrorCode::kPermissionDenied);
}

TEST_F(ServiceTest, TokensAuthenticateByHash) {
  auto u = svc_->CreateUser(admin_, "ana", "vision", "member");
  ASSERT_TRUE(u.ok());
  ASSERT_EQ(u->token.size(), 36u);  // tsr_ + 128 bits in hex
  auto c = svc_->Authenticate(u->token);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->team, "vision");
  EXPECT_EQ(c->role, Role::kMember);
  EXPECT_FALSE(svc_->Authenticate(u->token + "x").has_value());
  EXPECT_FALSE(svc_->Authenticate("").has_value());
  EXPECT_EQ(svc_->CreateUser(admin_, "ana", "vision", "member").error().code, ErrorCode::kAlreadyExists);
  EXPECT_NE(NewToken().value(), NewToken().value());
}

// Authentication reads the user table under its own lock while users are created and tokens replaced
// (ASan and UBSan run this too): a replaced token stops working at once, the new one works, and a token
// nobody was given never authenticates.
TEST_F(ServiceTest, TokensStayConsistentWhileUsersChange) {
  auto first = svc_->CreateUser(admin_, "ana", "vision", "member");
  ASSERT_TRUE(first.ok());
  std::atomic<bool> stop{false};
  std::atomic<int> wrong{0}, checks{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 3; ++t)
    readers.emplace_back([&] {
      while (!stop) {
        if (svc_->Authenticate("tsr_00000000000000000000000000000000").has_value()) ++wrong;
        if (auto c = svc_->Authenticate(first->token); c && c->team != "vision") ++wrong;
        ++checks;
      }
    });
  std::vector<std::string> tokens;
  for (int i = 0; i < 20; ++i) {
    auto u = svc_->CreateUser(admin_, "user" + std::to_string(i), i % 2 ? "vision" : "search", "viewer");
    ASSERT_TRUE(u.ok());
    tokens.push_back(u->token);
  }
  auto replaced = svc_->ReplaceToken(admin_, "ana", false);
  ASSERT_TRUE(replaced.ok());
  stop = true;
  for (std::thread& r : readers) r.join();
  EXPECT_EQ(wrong, 0);
  EXPECT_GT(checks, 0);
  EXPECT_FALSE(svc_->Authenticate(first->token).has_value());
  EXPECT_TRUE(svc_->Authenticate(replaced->token).has_value());
  for (size_t i = 0; i < tokens.size(); ++i) {
    auto c = svc_->Authenticate(tokens[i]);
    ASSERT_TRUE(c.has_value()) << i;
    EXPECT_EQ(c->team, i % 2 ? "vision" : "search");
  }
}

TEST_F(ServiceTest, IdempotencyKeyMakesOneJob) {
  const int64_t a = SubmitOk(member_, Training("a", 1), "k1");
  const int64_t b = SubmitOk(member_, Training("a", 1), "k1");
  EXPECT_EQ(a, b);
  auto diff = svc_->Submit(member_, Training("other", 1), "k1");
  ASSERT_FALSE(diff.ok());
  EXPECT_EQ(diff.error().code, ErrorCode::kIdempotencyMismatch);
  EXPECT_NE(SubmitOk(other_member_, Training("a", 1), "k1"), a);  // keys are per user
  bool more = false;
  EXPECT_EQ(svc_->List(admin_, "", "", "", 0, 100, &more).size(), 2u);
}

// With on_durable, a new job is returned once its write is queued and the callback comes once, after the
// job is visible; a replay of its key and a refusal make no callback.
TEST_F(ServiceTest, OnDurableIsCalledOnceTheNewJobIsStoredAndVisible) {
  std::promise<std::pair<Status, bool>> told;
  std::atomic<int> calls{0};
  bool created = false;
  Outcome<JobView> r = svc_->Submit(member_, Training("a", 1), "k1", &created, [&](const Status& st) {
    bool more = false;
    const bool visible = svc_->List(admin_, "", "", "", 0, 100, &more).size() == 1;
    if (calls.fetch_add(1) == 0) told.set_value({st, visible});
  });
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(created);
  const int64_t id = r->job->id;
  auto f = told.get_future();
  ASSERT_EQ(f.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  const auto [status, visible] = f.get();
  EXPECT_TRUE(status.ok());
  EXPECT_TRUE(visible) << "visible before the callback";
  EXPECT_TRUE(svc_->Get(member_, id).ok());
  bool again = true;
  int replay_calls = 0;
  auto replay = svc_->Submit(member_, Training("a", 1), "k1", &again, [&](const Status&) { ++replay_calls; });
  ASSERT_TRUE(replay.ok());
  EXPECT_FALSE(again);
  EXPECT_EQ(replay->job->id, id);
  auto refused = svc_->Submit(viewer_, Training("b", 1), "", nullptr, [&](const Status&) { ++replay_calls; });
  EXPECT_FALSE(refused.ok());
  EXPECT_EQ(replay_calls, 0);
  EXPECT_EQ(calls.load(), 1);
}

TEST_F(ServiceTest, SchedulesRunsFinishesAndCharges) {
  const int64_t a = SubmitOk(member_, Training("a", 8, 600));
  const int64_t b = SubmitOk(member_, Training("b", 8, 600));
  const int64_t c = SubmitOk(member_, Training("c", 8, 600));
  svc_->RunCycleNow();
  int running = 0;
  for (int64_t id : {a, b, c}) running += svc_->Get(admin_, id)->job->state == JobState::kRunning;
  EXPECT_EQ(running, 2);
  auto waiting = svc_->Get(admin_, c);
  ASSERT_EQ(waiting->job->state, JobState::kPending);
  ASSERT_TRUE(waiting->pending.has_value());
  EXPECT_GE(waiting->pending->pool_position, 1);
  EXPECT_FALSE(waiting->pending->code.empty());
  EXPECT_EQ(svc_->Queue(lead_).size(), 1u);
  EXPECT_TRUE(svc_->Queue(search_lead_).empty());
  const auto& placed = svc_->Get(admin_, a)->job->placements;
  ASSERT_EQ(placed.size(), 1u);
  EXPECT_EQ(placed[0].gpus.size(), 8u);
  clock_.now_ += 601;
  svc_->RunCycleNow();  // a and b end; c starts
  svc_->RunCycleNow();
  EXPECT_EQ(svc_->Get(admin_, a)->job->state, JobState::kSucceeded);
  EXPECT_EQ(svc_->Get(admin_, c)->job->state, JobState::kRunning);
  auto usage = svc_->Usage(lead_, UsageQuery{-1, -1, "job"});
  ASSERT_TRUE(usage.ok()) << usage.error().message;
  double hours_a = 0;
  for (const UsageRow& r : usage.value())
    if (r.job == std::to_string(a)) hours_a += r.gpu_hours;
  EXPECT_NEAR(hours_a, 8 * 600 / 3600.0, 1e-9);
  EXPECT_TRUE(svc_->Usage(search_lead_, UsageQuery{-1, -1, "team"}).value().empty());
}

// Snapshots reuse cluster buffers that nobody holds any more: a snapshot a reader still holds keeps the
// allocation it was published with through later cycles, and each new one shows the current allocation.
TEST_F(ServiceTest, HeldSnapshotsKeepTheirAllocationWhileBuffersAreReused) {
  svc_->RunCycleNow();
  auto idle = svc_->snapshot();
  const auto free_gpus = [](const ClusterState& s) {
    int n = 0;
    for (const GpuState& g : s.gpus()) n += g.WholeFree();
    return n;
  };
  const int all_free = free_gpus(*idle->cluster);
  std::vector<std::shared_ptr<const Snapshot>> held;
  for (int i = 1; i <= 2; ++i) {
    SubmitOk(member_, Training("j" + std::to_string(i), 8, 600));
    for (int k = 0; k < 6; ++k) svc_->RunCycleNow();  // more cycles than spare buffers
    held.push_back(svc_->snapshot());
    EXPECT_EQ(free_gpus(*held.back()->cluster), all_free - 8 * i);
  }
  EXPECT_EQ(free_gpus(*idle->cluster), all_free);
  EXPECT_EQ(free_gpus(*held[0]->cluster), all_free - 8);
}

// Usage is priced with the book valid at its time: a job running across the June 2025 cut is charged the
// 2024 list price before it and the 2025 one after, in two rows that name their book's date, and the FOCUS
// export dates each row by its book.
TEST_F(ServiceTest, UsageIsPricedWithTheBookValidAtItsTime) {
  std::ifstream in(std::string(::tessera::testing::SourceDir()) + "/examples/cost/prices-2025.yaml");
  std::stringstream text;
  text << in.rdbuf();
  auto b2025 = PriceBook::FromYaml(text.str(), "prices-2025.yaml");
  ASSERT_TRUE(b2025.ok()) << b2025.error();
  books_ = {PriceBook::Default(), *b2025};
  svc_.reset();
  const int64_t cut = 1748736000;  // 2025-06-01T00:00:00Z, where the 2024 book's window ends
  clock_.now_ = cut - 1800;
  Open();
  const int64_t v = SubmitOk(member_, Training("v", 8, 3600));
  svc_->RunCycleNow();
  ASSERT_EQ(svc_->Get(admin_, v)->job->state, JobState::kRunning);
  const int64_t start = static_cast<int64_t>(clock_.now_);
  clock_.now_ += 3601;
  svc_->RunCycleNow();
  auto rows = svc_->Usage(lead_, UsageQuery{start, start + 3600, "team"});
  ASSERT_TRUE(rows.ok()) << rows.error().message;
  std::map<std::string, UsageRow> by_date;
  for (const UsageRow& r : rows.value())
    if (!r.idle) by_date[r.price_book_date] = r;
  ASSERT_EQ(by_date.size(), 2u);
  const double before_h = (cut - start) * 8 / 3600.0, after_h = 8 - before_h;
  EXPECT_NEAR(by_date["2024-12-31"].gpu_hours, before_h, 1e-9);
  EXPECT_NEAR(by_date["2025-07-01"].gpu_hours, after_h, 1e-9);
  // The eight GPUs' records summed per book's window, each sum rounded to the cent half up once.
  auto cents = [](double usd) { return std::floor(usd * 100 + 0.5) / 100; };
  EXPECT_NEAR(by_date["2024-12-31"].cost, cents(before_h * 12.29), 1e-9);  // the 2024 list price
  EXPECT_NEAR(by_date["2025-07-01"].cost, cents(after_h * 6.7595), 1e-9);  // after the cut
  auto csv = svc_->UsageFocusCsv(admin_, UsageQuery{start, start + 3600, "team"});
  ASSERT_TRUE(csv.ok()) << csv.error().message;
  EXPECT_NE(csv.value().find(",2024-12-31"), std::string::npos);
  EXPECT_NE(csv.value().find(",2025-07-01"), std::string::npos);
}

// A team's usage and FOCUS views carry only its share of idle: capacity another team held is not idle, and
// the idle of a pool the team did not use (the A100 node) is the platform's, not the team's.
TEST_F(ServiceTest, TeamViewsChargeOnlyTheTeamsShareOfIdle) {
  const int64_t v = SubmitOk(member_, Training("v", 8, 600));
  const int64_t s = SubmitOk(search_lead_, Training("s", 4, 600));
  svc_->RunCycleNow();
  ASSERT_EQ(svc_->Get(admin_, v)->job->state, JobState::kRunning);
  ASSERT_EQ(svc_->Get(admin_, s)->job->state, JobState::kRunning);
  clock_.now_ += 601;
  svc_->RunCycleNow();
  ASSERT_EQ(svc_->Get(admin_, v)->job->state, JobState::kSucceeded);
  const UsageQuery q{-1, -1, "team"};
  auto all = svc_->Usage(admin_, q);
  ASSERT_TRUE(all.ok()) << all.error().message;
  double pool_idle_h = 0;  // the H100 pool's idle over the interval (the A100 pool's is all idle)
  for (const UsageRow& r : all.value())
    if (r.idle && r.tier == "reserved") pool_idle_h += r.gpu_hours;
  ASSERT_GT(pool_idle_h, 0);
  auto mine = svc_->Usage(lead_, q);
  ASSERT_TRUE(mine.ok());
  double idle_h = 0, idle_cost = 0, share_cost = 0;
  for (const UsageRow& r : mine.value()) {
    EXPECT_EQ(r.team, "vision");
    if (r.idle) idle_h += r.gpu_hours, idle_cost += r.cost;
    else share_cost += r.idle_share_cost;
  }
  // Vision held 8 of the 12 GPUs held in the H100 pool: two thirds of that pool's idle, nothing of the A100's.
  // (The hours follow the team's share of the idle cents, split to the cent by largest remainder.)
  EXPECT_NEAR(idle_h, pool_idle_h * 8 / 12, 1e-3 * pool_idle_h);
  EXPECT_NEAR(idle_cost, share_cost, 1e-6);
  auto csv = svc_->UsageFocusCsv(lead_, q);
  ASSERT_TRUE(csv.ok()) << csv.error().message;
  EXPECT_EQ(csv.value().find("search"), std::string::npos);
  EXPECT_EQ(csv.value().find("a100"), std::string::npos) << "the idle A100 node is not vision's";
  const size_t idle_row = csv.value().find("Idle GPU capacity");
  ASSERT_NE(idle_row, std::string::npos);
  EXPECT_EQ(csv.value().find("Idle GPU capacity", idle_row + 1), std::string::npos) << "one idle row: its share";
  auto admin_csv = svc_->UsageFocusCsv(admin_, q);
  ASSERT_TRUE(admin_csv.ok());
  EXPECT_NE(admin_csv.value().find("a100"), std::string::npos);
  EXPECT_NE(admin_csv.value().find("search"), std::string::npos);
}

TEST_F(ServiceTest, MigReplicasGetInstances) {
  const int64_t id = SubmitOk(member_, Spec({{"name", "serve"}, {"class", "inference"}, {"replicas", 3},
                                              {"mig_profile", "1g.10gb"}, {"memory_gib", 5}}));
  svc_->RunCycleNow();
  auto j = svc_->Get(admin_, id);
  ASSERT_EQ(j->job->state, JobState::kRunning) << (j->pending ? j->pending->message : "");
  ASSERT_EQ(j->job->placements.size(), 3u);
  for (const TaskPlacement& t : j->job->placements) {
    ASSERT_EQ(t.gpus.size(), 1u);
    EXPECT_GE(t.gpus[0].mig_profile, 0);
  }
}

TEST_F(ServiceTest, RestartRebuildsFromTheStoreAlone) {
  const int64_t a = SubmitOk(member_, Training("a", 8, 3600));
  const int64_t b = SubmitOk(member_, Training("b", 4, 3600));
  const int64_t mig = SubmitOk(member_, Spec({{"name", "m"}, {"class", "inference"}, {"mig_profile", "3g.40gb"},
                                               {"memory_gib", 20}, {"duration_s", 3600}}));
  svc_->RunCycleNow();
  const int64_t c = SubmitOk(member_, Training("c", 8, 3600));  // waits: 4 + 8 + 8 > 16
  svc_->RunCycleNow();
  std::map<int64_t, std::vector<TaskPlacement>> before;
  for (int64_t id : {a, b, mig}) {
    auto j = svc_->Get(admin_, id);
    ASSERT_EQ(j->job->state, JobState::kRunning);
    before[id] = j->job->placements;
  }
  ASSERT_EQ(svc_->Get(admin_, c)->job->state, JobState::kPending);
  svc_->Stop();
  svc_.reset();
  backend_ = std::make_unique<SimulatedBackend>(&clock_);
  Open();
  for (int64_t id : {a, b, mig}) {
    auto j = svc_->Get(admin_, id);
    ASSERT_TRUE(j.ok());
    EXPECT_EQ(j->job->state, JobState::kRunning);
    ASSERT_EQ(j->job->placements.size(), before[id].size());
    for (size_t t = 0; t < before[id].size(); ++t) {
      EXPECT_EQ(j->job->placements[t].node, before[id][t].node);
      ASSERT_EQ(j->job->placements[t].gpus.size(), before[id][t].gpus.size());
      for (size_t g = 0; g < before[id][t].gpus.size(); ++g) {
        EXPECT_EQ(j->job->placements[t].gpus[g].gpu, before[id][t].gpus[g].gpu);
        EXPECT_EQ(j->job->placements[t].gpus[g].mig_start, before[id][t].gpus[g].mig_start);
      }
    }
  }
  svc_->RunCycleNow();  // nothing allocated twice: c still does not fit
  EXPECT_EQ(svc_->Get(admin_, c)->job->state, JobState::kPending);
  EXPECT_TRUE(svc_->Authenticate("not-a-token") == std::nullopt);
  clock_.now_ += 3601;
  svc_->RunCycleNow();
  svc_->RunCycleNow();
  EXPECT_EQ(svc_->Get(admin_, a)->job->state, JobState::kSucceeded);
  EXPECT_EQ(svc_->Get(admin_, c)->job->state, JobState::kRunning);
}

// Fair share sees each queue's decayed usage, and that history is kept in the store: after a restart the
// team that used the cluster yields to one that did not, although it asked first.
TEST_F(ServiceTest, DecayedUsageSurvivesARestart) {
  auto gang = [&](const std::string& name) {
    return Spec({{"name", name}, {"class", "training"}, {"workers", 2}, {"gpus_per_worker", 8}, {"memory_gib", 40},
                 {"duration_s", 7200}, {"gpu_kinds", {"h100-80gb"}}});
  };
  const int64_t used = SubmitOk(member_, gang("used"));
  svc_->RunCycleNow();
  ASSERT_EQ(svc_->Get(admin_, used)->job->state, JobState::kRunning);
  clock_.now_ += 7201;
  svc_->RunCycleNow();
  ASSERT_EQ(svc_->Get(admin_, used)->job->state, JobState::kSucceeded);
  svc_->Stop();
  svc_.reset();
  backend_ = std::make_unique<SimulatedBackend>(&clock_);
  Open();
  clock_.now_ += 10;
  const int64_t first = SubmitOk(member_, gang("first"));
  clock_.now_ += 10;
  const int64_t second = SubmitOk(search_lead_, gang("second"));
  svc_->RunCycleNow();
  EXPECT_EQ(svc_->Get(admin_, second)->job->state, JobState::kRunning);
  EXPECT_EQ(svc_->Get(admin_, first)->job->state, JobState::kPending);
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

// A job that names GPU kinds and waits for them is told what any kind would give: the what-if's
// any_gpu_kind option starts it now on the other kind, while as asked it still waits.
TEST_F(ServiceTest, WhatIfSaysWhatAnyGpuKindWouldGive) {
  auto a100 = [&](const std::string& name) {
    return Spec({{"name", name}, {"class", "training"}, {"workers", 1}, {"gpus_per_worker", 8}, {"memory_gib", 40},
                 {"project", "p"}, {"duration_s", 3600}, {"gpu_kinds", {"a100-80gb"}}});
  };
  const int64_t first = SubmitOk(member_, a100("a100-first"));
  for (int i = 0; i < 3; ++i) svc_->RunCycleNow();
  ASSERT_EQ(svc_->Get(admin_, first)->job->state, JobState::kRunning);  // the one A100 node, MIG switched off
  const int64_t id = SubmitOk(member_, a100("a100-second"));
  svc_->RunCycleNow();
  ASSERT_EQ(svc_->Get(admin_, id)->job->state, JobState::kPending);
  auto w = svc_->WhatIf(lead_, id);
  ASSERT_TRUE(w.ok()) << w.error().message;
  const WhatIfOption* any = nullptr;
  for (const WhatIfOption& o : w.value())
    if (o.change == "any_gpu_kind") any = &o;
  ASSERT_NE(any, nullptr);
  EXPECT_EQ(any->gpus, 8);
  EXPECT_TRUE(any->code.empty()) << any->message;  // two H100 nodes are free
  EXPECT_EQ(any->estimated_start, static_cast<int64_t>(clock_.now_));
  EXPECT_FALSE(w.value().front().code.empty());  // as asked: it waits for the busy A100 node
  // A job that names no kind gets no such option.
  const int64_t free_kind = SubmitOk(member_, Spec({{"name", "any"}, {"class", "training"}, {"workers", 3},
                                                    {"gpus_per_worker", 8}, {"project", "p"}, {"duration_s", 600}}));
  svc_->RunCycleNow();
  auto w2 = svc_->WhatIf(lead_, free_kind);
  ASSERT_TRUE(w2.ok()) << w2.error().message;
  for (const WhatIfOption& o : w2.value()) EXPECT_TRUE(o.change.empty());
}

// A MIG job whose profile only busy GPUs offer is told which other profile would start it now: the only
// A100 GPU has its seven 1g.10gb instances busy, the H200 offers no 1g.10gb but an idle 1g.18gb.
TEST_F(ServiceTest, WhatIfNamesAnotherMigProfileThatStartsSooner) {
  OpenOn(R"(name: t
defaults: {gpus: 1, cpu: 192, memory_gib: 2048, interconnect: nvswitch, spine: s, leaf: leaf-0, tier: reserved}
nodes:
  - {name: a100, gpu: a100-80gb, mig: {enabled: true, config: all-1g.10gb}}
  - {name: h200, gpu: h200-141gb, mig: {enabled: true, config: all-balanced}}
)");
  auto slice = [&](const std::string& name) {
    return Spec({{"name", name},
                 {"class", "training"},
                 {"mig_profile", "1g.10gb"},
                 {"memory_gib", 8},
                 {"project", "p"},
                 {"duration_s", 36000}});
  };
  for (int i = 0; i < 7; ++i) SubmitOk(member_, slice("fill-" + std::to_string(i)));
  svc_->RunCycleNow();
  const int64_t id = SubmitOk(member_, slice("waits"));
  svc_->RunCycleNow();
  ASSERT_EQ(svc_->Get(admin_, id)->job->state, JobState::kPending);
  auto w = svc_->WhatIf(lead_, id);
  ASSERT_TRUE(w.ok()) << w.error().message;
  const WhatIfOption* other = nullptr;
  for (const WhatIfOption& o : w.value())
    if (o.change == "mig_profile") other = &o;
  ASSERT_NE(other, nullptr);
  EXPECT_EQ(other->mig_profile, "1g.18gb");
  EXPECT_EQ(other->estimated_start, static_cast<int64_t>(clock_.now_));
  EXPECT_TRUE(other->code.empty()) << other->message;
  EXPECT_NE(w.value().front().estimated_start, static_cast<int64_t>(clock_.now_));  // as asked it waits
}

// Spot capacity takes only checkpointable training: a training job that is not checkpointable waits for
// the busy reserved node although the spot node is idle, and its what-if says that as a checkpointable
// job it would start now; a checkpointable one starts on spot.
TEST_F(ServiceTest, SpotTakesOnlyCheckpointableTraining) {
  OpenOn(R"(name: t
defaults: {gpu: h100-80gb, gpus: 8, cpu: 192, memory_gib: 2048, interconnect: nvswitch, spine: s, leaf: leaf-0}
nodes:
  - {name: reserved, tier: reserved}
  - {name: spot, tier: spot}
)");
  auto job = [&](const std::string& name, const std::string& cls, bool checkpointable) {
    nlohmann::json j = {{"name", name},   {"class", cls},       {"memory_gib", 40},
                        {"project", "p"}, {"duration_s", 3600}, {"checkpointable", checkpointable}};
    if (cls == "training")
      j["gpus_per_worker"] = 8;
    else
      j["replicas"] = 1;
    return Spec(j);
  };
  const int64_t first = SubmitOk(member_, job("first", "training", false));
  svc_->RunCycleNow();
  ASSERT_EQ(svc_->Get(admin_, first)->job->state, JobState::kRunning);
  EXPECT_EQ(svc_->Get(admin_, first)->job->placements.front().node, 0) << "not on spot";
  const int64_t second = SubmitOk(member_, job("second", "training", false));
  const int64_t serve = SubmitOk(member_, job("serve", "inference", false));
  svc_->RunCycleNow();
  EXPECT_EQ(svc_->Get(admin_, second)->job->state, JobState::kPending);
  EXPECT_EQ(svc_->Get(admin_, serve)->job->state, JobState::kPending) << "inference never runs on spot";
  auto w = svc_->WhatIf(lead_, second);
  ASSERT_TRUE(w.ok()) << w.error().message;
  const WhatIfOption* spot = nullptr;
  for (const WhatIfOption& o : w.value())
    if (o.change == "spot") spot = &o;
  ASSERT_NE(spot, nullptr);
  EXPECT_EQ(spot->gpus, 8);
  EXPECT_EQ(spot->estimated_start, static_cast<int64_t>(clock_.now_));
  auto ws = svc_->WhatIf(lead_, serve);
  ASSERT_TRUE(ws.ok());
  for (const WhatIfOption& o : ws.value()) EXPECT_NE(o.change, "spot") << "inference is not offered spot";
  const int64_t ckpt = SubmitOk(member_, job("ckpt", "training", true));
  svc_->RunCycleNow();
  ASSERT_EQ(svc_->Get(admin_, ckpt)->job->state, JobState::kRunning);
  EXPECT_EQ(svc_->Get(admin_, ckpt)->job->placements.front().node, 1) << "on spot";
}

// A job that would fit but for the GPUs held for a gang's reservation is told which gang it waits behind:
// the reason names the gang's job, and the reason's `reservation` carries its id, name and start.
TEST_F(ServiceTest, AJobBehindAReservationNamesTheGang) {
  const int64_t running = SubmitOk(member_, Training("running", 8, 3600));
  const int64_t half = SubmitOk(member_, Training("half", 4, 3600));
  svc_->RunCycleNow();
  ASSERT_EQ(svc_->Get(admin_, running)->job->state, JobState::kRunning);
  ASSERT_EQ(svc_->Get(admin_, half)->job->state, JobState::kRunning);
  clock_.now_ += 10;
  Service::TeamChange more;  // the gang's team is within its guarantee: its head gang gets a reservation
  more.guaranteed_milli = 16000;
  ASSERT_TRUE(svc_->UpdateTeam(admin_, "search", more).ok());
  const int64_t gang = SubmitOk(search_lead_, Spec({{"name", "gang"},
                                                    {"class", "training"},
                                                    {"workers", 2},
                                                    {"gpus_per_worker", 8},
                                                    {"memory_gib", 40},
                                                    {"project", "p"},
                                                    {"duration_s", 3600},
                                                    {"gpu_kinds", {"h100-80gb"}}}));
  clock_.now_ += 10;
  const int64_t behind = SubmitOk(member_, Training("behind", 4, 7200));  // too long to backfill
  svc_->RunCycleNow();
  svc_->RunCycleNow();
  ASSERT_EQ(svc_->Get(admin_, gang)->job->state, JobState::kPending);
  auto v = svc_->Get(admin_, behind);
  ASSERT_EQ(v->job->state, JobState::kPending);
  ASSERT_TRUE(v->pending.has_value());
  ASSERT_NE(v->pending->reservation, nullptr) << v->pending->message.str();
  EXPECT_EQ(v->pending->reservation->id, gang);
  EXPECT_GT(v->pending->reservation_start, static_cast<int64_t>(clock_.now_));
  EXPECT_NE(v->pending->message.str().find(fmt::format("reservation of job {} (gang, 16 GPUs from ", gang)),
            std::string::npos)
      << v->pending->message.str();
}

// A running job that cannot be evicted now (a disruption budget refuses it) is never chosen as a victim;
// once it can be, it is.
TEST_F(ServiceTest, JobsWhoseEvictionIsBlockedAreNoVictims) {
  auto with_class = [&](const std::string& name, const std::string& pc) {
    nlohmann::json body = Training(name, 8, 36000).body;
    body["priority_class"] = pc;
    return Spec(body);
  };
  const int64_t a = SubmitOk(member_, with_class("a", "best-effort"));
  const int64_t b = SubmitOk(member_, with_class("b", "best-effort"));
  svc_->RunCycleNow();
  ASSERT_EQ(svc_->Get(admin_, a)->job->state, JobState::kRunning);
  ASSERT_EQ(svc_->Get(admin_, b)->job->state, JobState::kRunning);
  svc_->SetEvictionBlocked({a, b});
  const int64_t u = SubmitOk(member_, with_class("urgent", "training-high"));
  auto cycles = [&] {
    for (int i = 0; i < 6; ++i) {
      svc_->RunCycleNow();
      clock_.now_ += 60;
    }
  };
  cycles();
  EXPECT_EQ(svc_->Get(admin_, a)->job->state, JobState::kRunning);
  EXPECT_EQ(svc_->Get(admin_, b)->job->state, JobState::kRunning);
  EXPECT_EQ(svc_->Get(admin_, u)->job->state, JobState::kPending);
  svc_->SetEvictionBlocked({a});
  cycles();
  EXPECT_EQ(svc_->Get(admin_, a)->job->state, JobState::kRunning);
  EXPECT_NE(svc_->Get(admin_, b)->job->state, JobState::kRunning);
  EXPECT_EQ(svc_->Get(admin_, u)->job->state, JobState::kRunning);
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

// The loop's view of one task of a job it does not run (the Kubernetes extender's): each node's fit on the
// allocation now, with the policy's reason where not, and the policy's order among those that fit; its
// first choice is where the cycle puts the same job once submitted, and nothing is submitted by asking.
TEST_F(ServiceTest, RankNodesJudgesOneTaskOnTheAllocationNow) {
  const int64_t big = SubmitOk(member_, Training("six", 6, 3600));
  svc_->RunCycleNow();
  ASSERT_EQ(svc_->Get(admin_, big)->job->state, JobState::kRunning);
  const std::string busy = svc_->NodeName(svc_->Get(admin_, big)->job->placements.front().node);
  std::string idle, a100;
  const auto views = svc_->ListNodes(admin_);
  ASSERT_TRUE(views.ok());
  for (const NodeView& v : views.value()) {
    if (v.name.rfind("node", 0) == 0 && v.name != busy) idle = v.name;
    if (v.name.rfind("a100", 0) == 0) a100 = v.name;
  }
  ASSERT_FALSE(idle.empty() || a100.empty());
  const std::vector<std::string> names = {busy, idle, a100, "ghost"};
  bool more = false;
  const size_t jobs_before = svc_->List(admin_, "", "", "", 0, 1000, &more).size();

  auto four = svc_->RankNodes(admin_, Training("four", 4), names, 8);
  ASSERT_TRUE(four.ok()) << four.error().message;
  ASSERT_EQ(four.value().size(), names.size());
  std::map<std::string, NodeRank> by_name;
  for (const NodeRank& f : four.value()) by_name[f.node] = f;
  EXPECT_FALSE(by_name[busy].fits) << "2 of its 8 GPUs are free";
  EXPECT_FALSE(by_name[busy].reason.empty());
  EXPECT_TRUE(by_name[idle].fits) << by_name[idle].reason;
  EXPECT_EQ(by_name[idle].rank, 0);
  EXPECT_FALSE(by_name[a100].fits) << "the job names h100-80gb";
  EXPECT_FALSE(by_name["ghost"].fits);
  EXPECT_NE(by_name["ghost"].reason.find("not a node"), std::string::npos) << by_name["ghost"].reason;

  auto two = svc_->RankNodes(admin_, Training("two", 2), names, 8);
  ASSERT_TRUE(two.ok()) << two.error().message;
  std::string first;
  int fitting = 0;
  for (const NodeRank& f : two.value()) {
    fitting += f.fits;
    if (f.rank == 0) first = f.node;
    if (f.fits) {
      EXPECT_GE(f.rank, 0) << f.node << ": every fitting node is ranked when 8 ranks are asked";
    }
  }
  EXPECT_EQ(fitting, 2);
  EXPECT_EQ(svc_->List(admin_, "", "", "", 0, 1000, &more).size(), jobs_before) << "asking submits nothing";
  const int64_t two_id = SubmitOk(member_, Training("two", 2));
  svc_->RunCycleNow();
  ASSERT_EQ(svc_->Get(admin_, two_id)->job->state, JobState::kRunning);
  EXPECT_EQ(svc_->NodeName(svc_->Get(admin_, two_id)->job->placements.front().node), first)
      << "the first choice is where the cycle places it";

  // A node named twice is judged once, ranked at its first entry.
  auto twice = svc_->RankNodes(admin_, Training("x", 1), {idle, idle, "ghost"}, 8);
  ASSERT_TRUE(twice.ok()) << twice.error().message;
  ASSERT_EQ(twice.value().size(), 3u);
  EXPECT_TRUE(twice.value()[0].fits && twice.value()[1].fits);
  EXPECT_EQ(twice.value()[0].rank, 0);
  EXPECT_EQ(twice.value()[1].rank, -1);

  auto denied = svc_->RankNodes(member_, Training("x", 1), names, 8);
  ASSERT_FALSE(denied.ok());
  EXPECT_EQ(denied.error().code, ErrorCode::kPermissionDenied);
  auto invalid = svc_->RankNodes(admin_, Training("x", 9), names, 8);
  ASSERT_FALSE(invalid.ok()) << "9 GPUs per worker: no node has them";
}

}  // namespace
}  // namespace tessera
