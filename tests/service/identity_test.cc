// The identity room on its own: teams, users, tokens and their audit entries, durable before visible, with
// concurrent changes serialised (none lost) and a restart reading back exactly what was acknowledged.
#include "service/identity.h"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <thread>

namespace tessera {
namespace {

class IdentityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("tessera-identity-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    tenancy_.priority_classes = DefaultPriorityClasses();
    Open();
  }
  void TearDown() override {
    identity_.reset();
    if (store_) store_->Close();
    std::filesystem::remove_all(dir_);
  }
  void Open() {
    identity_.reset();
    if (store_) store_->Close();
    auto s = OpenSqliteStore((dir_ / "t.db").string());
    ASSERT_TRUE(s.ok()) << s.error();
    store_ = std::move(s).value();
    auto loaded = store_->Load();
    ASSERT_TRUE(loaded.ok());
    changed_.clear();
    identity_ = std::make_unique<Identity>(
        store_.get(), &tenancy_, [this] { return now_.load(); },
        [this](const TeamRow& t) { changed_.push_back(t.name); });
    restored_ = identity_->Restore(*loaded);
  }

  std::filesystem::path dir_;
  TenancyConfig tenancy_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Identity> identity_;
  std::atomic<int64_t> now_{1000};
  std::vector<std::string> changed_;
  std::vector<TeamRow> restored_;
  const Caller admin_{"admin", "", Role::kAdmin};
};

TEST_F(IdentityTest, TeamsAndUsersAreDurableAndAudited) {
  TeamRow t;
  t.name = "vision";
  t.guaranteed_milli = 8000;
  ASSERT_TRUE(identity_->CreateTeam(admin_, t).ok());
  EXPECT_EQ(changed_, std::vector<std::string>{"vision"});
  EXPECT_EQ(identity_->CreateTeam(admin_, t).error().code, ErrorCode::kAlreadyExists);
  auto ana = identity_->CreateUser(admin_, "ana", "vision", "team-lead");
  ASSERT_TRUE(ana.ok());
  auto who = identity_->Authenticate(ana->token);
  ASSERT_TRUE(who.has_value());
  EXPECT_EQ(who->team, "vision");
  EXPECT_EQ(who->role, Role::kTeamLead);
  EXPECT_EQ(identity_->CreateUser(admin_, "bo", "nope", "member").error().field, "team");
  TeamChange weight;
  weight.over_quota_weight = 3;
  ASSERT_TRUE(identity_->UpdateTeam(admin_, "vision", weight).ok());
  Open();  // a restart reads back what was acknowledged
  ASSERT_EQ(restored_.size(), 1u);
  EXPECT_EQ(restored_[0].over_quota_weight, 3);
  EXPECT_EQ(restored_[0].guaranteed_milli, 8000);
  EXPECT_TRUE(identity_->Authenticate(ana->token).has_value());
  bool more = false;
  auto audit = identity_->Audit(admin_, AuditQuery{}, &more);
  ASSERT_TRUE(audit.ok());
  std::vector<std::string> actions;
  for (const AuditRow& a : audit.value()) actions.push_back(a.action);
  EXPECT_EQ(actions, (std::vector<std::string>{"team.create", "user.create", "team.update"}));
  EXPECT_EQ(identity_->Audit(Caller{"ana", "vision", Role::kTeamLead}, AuditQuery{}, &more).error().code,
            ErrorCode::kPermissionDenied);
}

TEST_F(IdentityTest, ConcurrentChangesAreNeitherLostNorInterleaved) {
  TeamRow t;
  t.name = "vision";
  ASSERT_TRUE(identity_->CreateTeam(admin_, t).ok());
  auto ana = identity_->CreateUser(admin_, "ana", "vision", "member");
  ASSERT_TRUE(ana.ok());
  std::vector<std::string> tokens(8);
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i)
    threads.emplace_back([&, i] {
      if (i % 2 == 0) {
        tokens[i] = identity_->ReplaceToken(admin_, "ana", false)->token;
      } else {
        TeamChange c;
        if (i == 1) c.guaranteed_milli = 4000;
        if (i == 3) c.limit_milli = 16000;
        if (i == 5) c.over_quota_weight = 2;
        if (i == 7) c.allowed_classes = std::vector<std::string>{"training"};
        ASSERT_TRUE(identity_->UpdateTeam(admin_, "vision", c).ok());
      }
    });
  for (auto& th : threads) th.join();
  int working = 0;
  for (int i = 0; i < 8; i += 2) working += identity_->Authenticate(tokens[i]).has_value();
  EXPECT_EQ(working, 1) << "exactly the last token issued works";
  EXPECT_FALSE(identity_->Authenticate(ana->token).has_value());
  const TeamView v = identity_->Teams(admin_).at(0);
  EXPECT_EQ(v.guaranteed_milli, 4000);
  EXPECT_EQ(v.limit_milli, 16000);
  EXPECT_EQ(v.over_quota_weight, 2);
  EXPECT_EQ(v.allowed_classes, std::vector<std::string>{"training"});
  EXPECT_EQ(v.version, 5u);
  EXPECT_EQ(identity_->Users(admin_).size(), 1u);
  EXPECT_TRUE(
      identity_->ClassPolicy(Caller{"ana", "vision", Role::kMember}, "vision", "inference").has_value());
  EXPECT_FALSE(
      identity_->ClassPolicy(Caller{"ana", "vision", Role::kMember}, "vision", "training").has_value());
}

TEST_F(IdentityTest, CheckTokenTellsAReplacedOrRevokedTokenFromANeverIssuedOne) {
  TeamRow t;
  t.name = "vision";
  ASSERT_TRUE(identity_->CreateTeam(admin_, t).ok());
  const std::string first = identity_->CreateUser(admin_, "ana", "vision", "member")->token;
  const std::string second = identity_->ReplaceToken(admin_, "ana", false)->token;
  TokenCheck now = identity_->CheckToken(second);
  ASSERT_TRUE(now.caller);
  EXPECT_EQ(now.caller->user, "ana");
  EXPECT_FALSE(now.retired);
  EXPECT_TRUE(identity_->CheckToken(first).retired);
  EXPECT_FALSE(identity_->CheckToken(first).caller);
  ASSERT_TRUE(identity_->ReplaceToken(admin_, "ana", true).ok());  // revoked
  EXPECT_TRUE(identity_->CheckToken(second).retired);
  EXPECT_FALSE(identity_->CheckToken("tsr_00000000000000000000000000000000").retired);
  EXPECT_FALSE(identity_->CheckToken("").retired);
}

TEST_F(IdentityTest, RecordAuditWritesAnEntryWithoutAChange) {
  const Caller ana{"ana", "vision", Role::kMember, "192.0.2.7"};
  ASSERT_TRUE(identity_->RecordAudit(ana, "request.denied", "team:vision", R"({"status":403})", false).ok());
  AuditQuery q;
  q.actor = "ana";
  bool more = false;
  auto rows = identity_->Audit(admin_, q, &more);
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows.value().size(), 1u);
  const AuditRow& a = rows.value()[0];
  EXPECT_EQ(a.action, "request.denied");
  EXPECT_EQ(a.target, "team:vision");
  EXPECT_EQ(a.source, "192.0.2.7");
  EXPECT_FALSE(a.changed);
}

}  // namespace
}  // namespace tessera
