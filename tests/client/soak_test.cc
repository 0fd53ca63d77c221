// The soak's verdict (VerifySoak) on hand-made end states, and its load against two loopback replicas.
#include "client/soak.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

namespace tessera::client {
namespace {

nlohmann::json SoakJob(const std::string& id, const std::string& name, int64_t gpus, const char* started,
                       const char* finished, const std::string& state = "Succeeded") {
  return {{"id", id},
          {"name", name},
          {"gpus", gpus},
          {"state", state},
          {"priority_class", "training"},
          {"submitted_at", "2026-12-06T10:00:00Z"},
          {"started_at", started ? nlohmann::json(started) : nlohmann::json()},
          {"finished_at", finished ? nlohmann::json(finished) : nlohmann::json()},
          {"message", ""}};
}

// 2026-12-06T10:01:00Z.
constexpr int64_t kTenOhOne = 1796551260;

// Two jobs, both acknowledged: one ran 10:00:10-10:00:40 on 2 GPUs, one runs since 10:00:50 on 1 GPU.
struct SoakCase {
  SoakLedger ledger;
  SoakFinalState final_state;
  SoakCase() {
    ledger.acked = {{"p-0-0", "1"}, {"p-0-1", "2"}};
    final_state.jobs = {SoakJob("1", "p-0-0", 2, "2026-12-06T10:00:10Z", "2026-12-06T10:00:40Z"),
                        SoakJob("2", "p-0-1", 1, "2026-12-06T10:00:50Z", nullptr, "Running")};
    final_state.to = kTenOhOne;
    final_state.milli_gpu_s = {{"1", 2 * 1000 * 30}, {"2", 1000 * 10}};
  }
};

TEST(SoakVerdictTest, AConsistentEndStateHolds) {
  SoakCase c;
  const SoakVerdict v = VerifySoak(c.ledger, "p-", c.final_state);
  EXPECT_TRUE(v.failures.empty()) << v.failures.front();
  EXPECT_EQ(v.acked_checked, 2);
  EXPECT_EQ(v.usage_checked, 2);
  EXPECT_EQ(v.max_usage_diff_milli_s, 0);
}

TEST(SoakVerdictTest, ALostOrDuplicatedOrRenumberedSubmissionFails) {
  SoakCase lost;
  lost.final_state.jobs.pop_back();
  lost.final_state.milli_gpu_s.erase("2");
  ASSERT_EQ(VerifySoak(lost.ledger, "p-", lost.final_state).failures.size(), 1u);
  EXPECT_NE(VerifySoak(lost.ledger, "p-", lost.final_state).failures[0].find("missing"), std::string::npos);

  SoakCase twice;
  twice.final_state.jobs.push_back(SoakJob("3", "p-0-0", 2, nullptr, nullptr, "Pending"));
  EXPECT_FALSE(VerifySoak(twice.ledger, "p-", twice.final_state).failures.empty());

  SoakCase renumbered;
  renumbered.ledger.acked["p-0-1"] = "7";
  EXPECT_FALSE(VerifySoak(renumbered.ledger, "p-", renumbered.final_state).failures.empty());
}

TEST(SoakVerdictTest, AnAcknowledgedChangeMustHoldUnlessItWentUnanswered) {
  SoakCase c;
  c.ledger.priority["2"] = "training-high";
  c.ledger.ended["1"] = "Cancelled";
  EXPECT_EQ(VerifySoak(c.ledger, "p-", c.final_state).failures.size(), 2u);
  c.final_state.jobs[1]["priority_class"] = "training-high";
  c.final_state.jobs[0]["state"] = "Cancelled";
  const SoakVerdict v = VerifySoak(c.ledger, "p-", c.final_state);
  EXPECT_TRUE(v.failures.empty());
  EXPECT_EQ(v.changes_checked, 2);
  c.final_state.jobs[1]["priority_class"] = "best-effort";
  c.ledger.ambiguous.insert("2");
  EXPECT_TRUE(VerifySoak(c.ledger, "p-", c.final_state).failures.empty());
}

TEST(SoakVerdictTest, UsageMustMatchTheRunIntervalClippedAtTo) {
  SoakCase twice;
  twice.final_state.milli_gpu_s["1"] *= 2;  // counted twice
  EXPECT_EQ(VerifySoak(twice.ledger, "p-", twice.final_state).failures.size(), 1u);
  SoakCase unclipped;
  unclipped.final_state.milli_gpu_s["2"] = 1000 * 40;  // as if it ran to a later "now"
  EXPECT_EQ(VerifySoak(unclipped.ledger, "p-", unclipped.final_state).failures.size(), 1u);
  SoakCase never_ran;
  never_ran.final_state.jobs.push_back(SoakJob("3", "p-0-2", 1, nullptr, nullptr, "Cancelled"));
  never_ran.final_state.milli_gpu_s["3"] = 5000;
  EXPECT_EQ(VerifySoak(never_ran.ledger, "p-", never_ran.final_state).failures.size(), 1u);
  SoakCase within;  // less than a second per GPU off: the times are whole seconds
  within.final_state.milli_gpu_s["1"] += 1500;
  const SoakVerdict v = VerifySoak(within.ledger, "p-", within.final_state);
  EXPECT_TRUE(v.failures.empty());
  EXPECT_EQ(v.max_usage_diff_milli_s, 1500);
}

// A loopback replica: `leader` acknowledges writes (a new id per new key, the same one for a key seen), a
// follower answers them 503 naming the leader's URL.
class SoakTestReplica {
 public:
  explicit SoakTestReplica(const std::string* leader_url) : leader_url_(leader_url) {
    auto write = [this](const httplib::Request& req, httplib::Response& res) {
      ++writes;
      if (leader_url_ != nullptr) {
        res.status = 503;
        res.set_header("Retry-After", "1");
        res.set_header("Tessera-Leader", *leader_url_);
        return;
      }
      std::lock_guard<std::mutex> lock(mu_);
      const std::string key = req.get_header_value("Idempotency-Key");
      std::string id = req.matches.size() > 1 ? req.matches[1].str() : "";
      if (id.empty()) id = ids_.emplace(key, std::to_string(ids_.size() + 1)).first->second;
      res.set_content(
          nlohmann::json({{"id", id}, {"state", "Pending"}, {"priority_class", "training"}}).dump(),
          "application/json");
    };
    server_.Post("/api/v1/jobs", write);
    server_.Post(R"(/api/v1/jobs/([^/:]+):cancel)", write);
    server_.Patch(R"(/api/v1/jobs/([^/:]+))", write);
    server_.Get(R"(/api/v1/.*)", [this](const httplib::Request&, httplib::Response& res) {
      ++reads;
      res.set_content("{}", "application/json");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~SoakTestReplica() {
    server_.stop();
    thread_.join();
  }
  std::string Url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::atomic<int> writes{0}, reads{0};

 private:
  const std::string* leader_url_;
  httplib::Server server_;
  std::mutex mu_;
  std::map<std::string, std::string> ids_;
  int port_ = 0;
  std::thread thread_;
};

TEST(SoakLoadTest, WritesFollowTheLeaderAndReadsGoToEveryReplica) {
  SoakTestReplica leader(nullptr);
  const std::string leader_url = leader.Url();
  SoakTestReplica follower(&leader_url);
  SoakLoadOptions o;
  o.urls = {follower.Url(), leader.Url()};
  o.token = "t";
  o.clients = 4;
  o.ops_per_second = 400;
  o.key_prefix = "k-";
  SoakLoad load(o);
  load.Start();
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  load.Stop();
  const SoakLedger ledger = load.ledger();
  const SoakCounts counts = load.counts();
  EXPECT_GT(ledger.acked.size(), 20u);
  EXPECT_TRUE(ledger.unacked_keys.empty());
  EXPECT_TRUE(ledger.ambiguous.empty());
  EXPECT_EQ(counts.ops.at("submit").acked, static_cast<int64_t>(ledger.acked.size()));
  EXPECT_GT(counts.redirects, 0);
  EXPECT_GT(follower.reads.load(), 0);
  EXPECT_GT(leader.reads.load(), 0);
  EXPECT_GT(counts.ops.at("priority").acked + counts.ops.at("cancel").acked, 0);
  for (const auto& [key, id] : ledger.acked) EXPECT_TRUE(key.starts_with("k-")) << key;
}

}  // namespace
}  // namespace tessera::client
