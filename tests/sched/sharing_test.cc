// Sharing inside MIG instances: exact memory and compute sums, SLO ceilings, release restores exactly, and
// the engine's choice between a dedicated slice and a shared instance.
#include "sched/sharing.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <tuple>

#include "sched/cluster_state.h"
#include "sched/engine_policy.h"
#include "sched/policy.h"
#include "test_util.h"
#include "testing/paths.h"

namespace tessera {
namespace {

using testing::MakeCluster;
using testing::Replica;

class SharingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = ClusterState::Build(cluster_, cat_);
    ASSERT_TRUE(s.ok()) << s.error();
    state_.emplace(std::move(s).value());
    ASSERT_TRUE(state_->SetMigMode(0, true).ok());
    p3g_ = kind().FindProfile("3g.40gb");
    ASSERT_GE(p3g_, 0);
    ASSERT_TRUE(state_->CreateInstance(0, p3g_, 0).ok());
  }
  const GpuKind& kind() const { return cat_.kind(cat_.Find("h100-80gb")); }
  GpuGrant Share(int milli, int64_t mib, bool sensitive = false) const {
    GpuGrant g;
    g.gpu = 0;
    g.mig_profile = static_cast<int16_t>(p3g_);
    g.mig_start = 0;
    g.shared = true;
    g.milli = milli;
    g.memory_mib = mib;
    g.latency_sensitive = sensitive;
    return g;
  }
  const MigSlot& Slot() const { return state_->gpu(0).instances[0]; }
  const Catalog& cat_ = Catalog::Default();
  const Cluster cluster_ = MakeCluster(1, 2, "h100-80gb");  // the state points into it
  std::optional<ClusterState> state_;
  int p3g_ = -1;
};

TEST_F(SharingTest, MemoryFitsExactlyAndReleaseRestoresExactly) {
  const int64_t usable = kind().profiles[p3g_].usable_mib;
  const ClusterState before = *state_;
  std::vector<TaskPlacement> a = {{0, {Share(100, usable - 1000)}}};
  std::vector<TaskPlacement> b = {{0, {Share(100, 1000, true)}}};
  std::vector<TaskPlacement> c = {{0, {Share(100, 1)}}};
  ASSERT_TRUE(state_->CanApply(a, 0, 0).ok());
  state_->Apply(a, 0, 0, true);
  ASSERT_TRUE(state_->CanApply(b, 0, 0).ok()) << "exactly the usable memory fits";
  state_->Apply(b, 0, 0, true);
  EXPECT_EQ(Slot().sharers, 2);
  EXPECT_EQ(Slot().sensitive, 1);
  EXPECT_EQ(Slot().shared_memory_mib, usable);
  EXPECT_EQ(Slot().shared_milli, 200);
  EXPECT_EQ(state_->gpu(0).tasks, 2);
  EXPECT_EQ(state_->node(0).shared_slots, 1);
  const Status over = state_->CanApply(c, 0, 0);
  EXPECT_FALSE(over.ok()) << "one MiB more than usable";
  EXPECT_NE(over.message().find("MiB"), std::string::npos) << over.message();
  EXPECT_TRUE(state_->CheckInvariants().ok());
  state_->Release(a, 0, 0, true);
  EXPECT_EQ(Slot().shared_memory_mib, 1000);
  EXPECT_TRUE(Slot().busy);
  state_->Release(b, 0, 0, true);
  EXPECT_FALSE(Slot().busy);
  EXPECT_EQ(Slot().sharers, 0);
  EXPECT_EQ(Slot().shared_milli, 0);
  EXPECT_EQ(state_->gpu(0).tasks, before.gpu(0).tasks);
  EXPECT_EQ(state_->gpu(0).busy_mask, before.gpu(0).busy_mask);
  EXPECT_EQ(state_->node(0).idle_profile_mask, before.node(0).idle_profile_mask);
  EXPECT_TRUE(state_->CheckInvariants().ok());
}

TEST_F(SharingTest, ComputeAboveTheInstanceAndDedicatedMixingAreRefused) {
  const int cap = kind().ProfileComputeMilli(p3g_);
  std::vector<TaskPlacement> a = {{0, {Share(cap, 100)}}};
  state_->Apply(a, 0, 0, true);
  EXPECT_FALSE(state_->CanApply({{0, {Share(1, 100)}}}, 0, 0).ok()) << "compute is full";
  GpuGrant dedicated = Share(cap, 100);
  dedicated.shared = false;
  EXPECT_FALSE(state_->CanApply({{0, {dedicated}}}, 0, 0).ok())
      << "a shared instance is busy for a dedicated task";
  state_->Release(a, 0, 0, true);
  state_->Apply({{0, {dedicated}}}, 0, 0, true);
  EXPECT_FALSE(state_->CanApply({{0, {Share(1, 100)}}}, 0, 0).ok())
      << "a dedicated instance cannot be shared";
  EXPECT_FALSE(state_->DestroyInstance(0, 0).ok());
  EXPECT_TRUE(state_->CheckInvariants().ok());
}

// The model's terms with contention switched off, so that each can be checked on its own.
SharingOptions Plain(SharingMode mode) {
  SharingOptions o;
  o.mode = mode;
  o.switch_overhead = o.switch_throughput_loss = o.mps_contention = 0;
  o.sensitive_headroom = o.standard_headroom = 1;
  return o;
}

TEST(InterferenceModel, SlowdownGrowsWithSummedDemandAndSwitching) {
  SharingOptions mps = Plain(SharingMode::kMps);
  EXPECT_DOUBLE_EQ(P99Slowdown(mps, 100, 100, 1000, 1), 1.0) << "alone";
  EXPECT_DOUBLE_EQ(P99Slowdown(mps, 100, 500, 1000, 3), 0.9 / 0.5);
  EXPECT_TRUE(std::isinf(P99Slowdown(mps, 100, 1000, 1000, 2)));
  SharingOptions ts = Plain(SharingMode::kTimeSlicing);
  ts.switch_overhead = 0.1;
  // Contention weighs the other sharers by how busy the unit is: (3 - 1) x 0.5.
  EXPECT_DOUBLE_EQ(P99Slowdown(ts, 100, 500, 1000, 3), 0.9 / 0.5 * 1.1);
  ts.switch_throughput_loss = 0.25;  // useful time 1 / (1 + 0.25 x 1) = 0.8: u = 0.5 / 0.8
  EXPECT_DOUBLE_EQ(P99Slowdown(ts, 100, 500, 1000, 3), 0.9 / (1 - 0.5 / 0.8) * 1.1);
  EXPECT_DOUBLE_EQ(ThroughputFactor(ts, 3, 0.5), 0.8);
  EXPECT_DOUBLE_EQ(ThroughputFactor(ts, 3, 2.0), 1 / 1.5) << "every sharer busy: (k - 1) x loss";
  EXPECT_DOUBLE_EQ(ThroughputFactor(mps, 3, 2.0), 1.0);
  // Headroom: admission counts the summed demand x 1.5 (worst 1 / (1 - 0.75) = 4 at the edge).
  SharingOptions roomy = mps;
  roomy.standard_headroom = 1.5;
  EXPECT_TRUE(SharerFits(roomy, 400, 1, 0, 1000, 100, false));
  EXPECT_FALSE(SharerFits(roomy, 400, 1, 0, 1000, 101, false));
  // A latency-sensitive sharer tightens the ceiling for every later one.
  EXPECT_TRUE(SharerFits(mps, 400, 1, 0, 1000, 100, false));          // worst 2.0 <= 4
  EXPECT_FALSE(SharerFits(mps, 400, 1, 0, 1000, 200, true));          // worst 2.5 > 2
  EXPECT_FALSE(SharerFits(mps, 400, 1, 1, 1000, 200, false));         // a sensitive sharer is there
  EXPECT_TRUE(SharerFits(mps, 300, 1, 1, 1000, 200, false));          // worst 2.0
  EXPECT_EQ(SharersThatFit(mps, 1000, 80000, 100, 10000, false), 7);  // 8 by memory, 7 by the SLO of 4
  EXPECT_EQ(SharersThatFit(mps, 1000, 80000, 100, 30000, false), 2);  // memory binds
}

// The engine shares light replicas and gives busy ones a slice of their own.
// MaxJoinMilli bounds every instance of a random set: whatever demand SharerFits lets into one of them is
// within the bound computed from the set's best figures, in both modes; and it is tight for a single one.
TEST(InterferenceModel, MaxJoinMilliBoundsEveryInstanceOfASet) {
  std::mt19937_64 rng(11);
  for (SharingMode mode : {SharingMode::kTimeSlicing, SharingMode::kMps}) {
    SharingOptions o;  // calibrated contention and headroom: the bound is valid, not tight
    o.mode = mode;
    const SharingOptions plain = Plain(mode);
    for (int trial = 0; trial < 2000; ++trial) {
      struct Unit { int cap, summed, sharers, sensitive; };
      std::vector<Unit> set(1 + rng() % 5);
      for (Unit& u : set) {
        u.cap = 142 + static_cast<int>(rng() % 859);
        u.summed = static_cast<int>(rng() % static_cast<uint64_t>(u.cap));
        u.sharers = 1 + static_cast<int>(rng() % 6);
        u.sensitive = static_cast<int>(rng() % static_cast<uint64_t>(u.sharers + 1));
      }
      int headroom = 0, cap = 1 << 30, sharers = 127, sensitive = 127;
      for (const Unit& u : set) {
        headroom = std::max(headroom, u.cap - u.summed);
        cap = std::min(cap, u.cap);
        sharers = std::min(sharers, u.sharers);
        sensitive = std::min(sensitive, u.sensitive);
      }
      const bool ls = rng() % 2;
      for (const SharingOptions* opt : {static_cast<const SharingOptions*>(&o), &plain}) {
        const int bound = MaxJoinMilli(*opt, headroom, cap, sharers, sensitive, ls);
        for (const Unit& u : set)
          for (int c = 1; c <= u.cap - u.summed; ++c)
            if (SharerFits(*opt, u.summed, u.sharers, u.sensitive, u.cap, c, ls)) {
              ASSERT_LE(c, bound) << "trial " << trial;
            }
      }
      const int bound = MaxJoinMilli(plain, headroom, cap, sharers, sensitive, ls);
      if (set.size() == 1) {  // no contention: the bound is at most two thousandths above the largest fit
        int largest = 0;
        for (int c = 1; c <= set[0].cap - set[0].summed; ++c)
          if (SharerFits(plain, set[0].summed, set[0].sharers, set[0].sensitive, set[0].cap, c, ls)) largest = c;
        if (largest > 0) {
          EXPECT_LE(bound, largest + 2) << "trial " << trial;
        }
      }
    }
  }
}

TEST(EngineSharing, ChoosesSharedOrDedicatedFromDemand) {
  const Catalog& cat = Catalog::Default();
  const Cluster cluster = MakeCluster(1, 8, "h100-80gb");
  auto s = ClusterState::Build(cluster, cat);
  ASSERT_TRUE(s.ok());
  auto tessera = MakePolicy("tessera");
  auto bestfit = MakePolicy("bestfit");
  ASSERT_TRUE(tessera.ok() && bestfit.ok());
  // Light: 12 GiB, 5% of a GPU. A dedicated 1g.20gb (2 slices) vs 3 per 3g.40gb (4 slices): shared wins.
  PlaceResult light = (*tessera)->Place(*s, Replica(1, 50, 12 * 1024));
  ASSERT_TRUE(light.ok) << light.reason;
  EXPECT_TRUE(light.tasks[0].gpus[0].shared) << light.reason;
  s->Apply(light.tasks, 1000, 1024, true);
  PlaceResult second = (*tessera)->Place(*s, Replica(2, 50, 12 * 1024));
  ASSERT_TRUE(second.ok);
  EXPECT_EQ(second.tasks[0].gpus[0].gpu, light.tasks[0].gpus[0].gpu) << "joins the shared instance";
  EXPECT_EQ(second.tasks[0].gpus[0].mig_start, light.tasks[0].gpus[0].mig_start);
  EXPECT_FALSE(second.tasks[0].gpus[0].create_instance);
  // Busy: 40% of a GPU fills its own 3g slice; sharing would not save slices.
  PlaceResult busy = (*tessera)->Place(*s, Replica(3, 400, 12 * 1024));
  ASSERT_TRUE(busy.ok);
  EXPECT_FALSE(busy.tasks[0].gpus[0].shared) << busy.reason;
  // bestfit keeps one replica per slice.
  PlaceResult bf = (*bestfit)->Place(*s, Replica(4, 50, 12 * 1024));
  ASSERT_TRUE(bf.ok);
  EXPECT_FALSE(bf.tasks[0].gpus[0].shared);
}

// Whether some shared instance has the memory and the compute within every SLO for one more replica `r`.
bool SomeSharedInstanceAdmits(const ClusterState& s, const SharingOptions& o, const Request& r) {
  for (GpuId g = 0; g < s.num_gpus(); ++g) {
    if (s.gpu_cordoned(g) || s.sharing_closed(g)) continue;
    const GpuKind& kind = s.kind_of_gpu(g);
    const GpuState& gs = s.gpu(g);
    for (int i = 0; i < gs.n_instances; ++i) {
      const MigSlot& m = gs.instances[i];
      const int cap = kind.ProfileComputeMilli(m.profile);
      if (m.Shared() && kind.profiles[m.profile].usable_mib - m.shared_memory_mib >= r.gpu_memory_mib + o.context_mib &&
          m.shared_milli + r.gpu_milli <= cap &&
          SharerFits(o, m.shared_milli, m.sharers, m.sensitive, cap, r.gpu_milli, r.latency_sensitive))
        return true;
    }
  }
  return false;
}

// Random sequences of replicas (some latency-sensitive) under tessera: per shared instance the recorded
// sums equal the sums of its grants, memory fits exactly, every sharer's worst slowdown stays within its SLO,
// a replica that some shared instance admits joins one, and releasing everything restores the state exactly.
class SharingPropertyTest : public ::testing::TestWithParam<uint64_t> {};

TEST_P(SharingPropertyTest, SumsAreExactCeilingsHoldAndReleaseRestores) {
  const Catalog& cat = Catalog::Default();
  const Cluster cluster = MakeCluster(4, 8, "h100-80gb");
  auto built = ClusterState::Build(cluster, cat);
  ASSERT_TRUE(built.ok());
  ClusterState s = std::move(built).value();
  SharingOptions opt;  // defaults: time-slicing
  PolicyOptions po;
  po.sharing = opt;
  auto policy = MakePolicy("tessera", po);
  ASSERT_TRUE(policy.ok());
  std::mt19937_64 rng(GetParam());
  std::vector<std::pair<Request, std::vector<TaskPlacement>>> held;
  int shared_grants = 0;
  for (int step = 0; step < 2000; ++step) {
    if (!held.empty() && rng() % 3 == 0) {
      const size_t i = rng() % held.size();
      s.Release(held[i].second, held[i].first.cpu_milli, held[i].first.host_memory_mib, true);
      held.erase(held.begin() + static_cast<long>(i));
    } else {
      const bool light = rng() % 4 != 0;
      Request r =
          Replica(step, light ? 20 + static_cast<int>(rng() % 120) : 250 + static_cast<int>(rng() % 400),
                  2048 + static_cast<int64_t>(rng() % 30000), rng() % 3 == 0);
      const bool admitted = SomeSharedInstanceAdmits(s, opt, r);  // by brute force, no index
      PlaceResult res = (*policy)->Place(s, r);
      if (admitted) {  // then the replica joins one (the node index must not hide it)
        ASSERT_TRUE(res.ok && res.tasks[0].gpus[0].shared && !res.tasks[0].gpus[0].create_instance)
            << "step " << step << ": " << res.reason;
        const GpuGrant& g = res.tasks[0].gpus[0];
        const GpuState& gs = s.gpu(g.gpu);
        bool joined = false;
        for (int i = 0; i < gs.n_instances; ++i)
          joined |= gs.instances[i].start == g.mig_start && gs.instances[i].Shared();
        ASSERT_TRUE(joined) << "step " << step << ": " << res.reason;
      }
      if (!res.ok) continue;
      ASSERT_TRUE(s.CanApply(res.tasks, r.cpu_milli, r.host_memory_mib).ok()) << res.reason;
      s.Apply(res.tasks, r.cpu_milli, r.host_memory_mib, true);
      shared_grants += res.tasks[0].gpus[0].shared;
      held.push_back({r, res.tasks});
    }
    ASSERT_TRUE(s.CheckInvariants().ok()) << "step " << step << ": " << s.CheckInvariants().message();
    // Independent sums per instance from the grants.
    std::map<std::pair<GpuId, int>, std::tuple<int, int64_t, int, int>>
        sums;  // milli, MiB, sharers, sensitive
    for (const auto& [r, t] : held)
      for (const GpuGrant& g : t[0].gpus)
        if (g.shared) {
          auto& [m, mib, k, sens] = sums[{g.gpu, g.mig_start}];
          m += g.milli;
          mib += g.memory_mib;
          ++k;
          sens += r.latency_sensitive;
        }
    for (const auto& [key, v] : sums) {
      const GpuState& gs = s.gpu(key.first);
      const MigSlot* slot = nullptr;
      for (int i = 0; i < gs.n_instances; ++i)
        if (gs.instances[i].start == key.second) slot = &gs.instances[i];
      ASSERT_NE(slot, nullptr);
      const auto& [m, mib, k, sens] = v;
      EXPECT_EQ(slot->shared_milli, m);
      EXPECT_EQ(slot->shared_memory_mib, mib);
      EXPECT_EQ(slot->sharers, k);
      EXPECT_EQ(slot->sensitive, sens);
      const GpuKind& kind = s.kind_of_gpu(key.first);
      EXPECT_LE(mib, kind.profiles[slot->profile].usable_mib);
      const double worst = WorstSlowdown(opt, m, kind.ProfileComputeMilli(slot->profile), k);
      EXPECT_LE(worst, sens > 0 ? opt.sensitive_slo : opt.standard_slo) << "packed past an SLO";
    }
  }
  EXPECT_GT(shared_grants, 100) << "the sequence must exercise sharing";
  for (const auto& [r, t] : held) s.Release(t, r.cpu_milli, r.host_memory_mib, true);
  for (GpuId g = 0; g < s.num_gpus(); ++g) {
    EXPECT_EQ(s.gpu(g).tasks, 0);
    for (int i = 0; i < s.gpu(g).n_instances; ++i) {
      EXPECT_FALSE(s.gpu(g).instances[i].busy);
      EXPECT_EQ(s.gpu(g).instances[i].shared_memory_mib, 0);
    }
  }
  EXPECT_EQ(s.AllocatedMilli(), 0);
  EXPECT_TRUE(s.CheckInvariants().ok());
}

INSTANTIATE_TEST_SUITE_P(Seeds, SharingPropertyTest, ::testing::Values(1u, 7u, 42u, 2026u));

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

// One published point of examples/calibration/interference.csv that the model replays.
struct Point {
  std::string mode, metric, replay;
  int sharers = 0;
  double value = 0;
};

// Splits one CSV line (double-quoted fields may hold commas and doubled quotes).
std::vector<std::string> CsvFields(const std::string& line) {
  std::vector<std::string> out(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (c == '"' && quoted && i + 1 < line.size() && line[i + 1] == '"') out.back() += c, ++i;
    else if (c == '"') quoted = !quoted;
    else if (c == ',' && !quoted) out.emplace_back();
    else out.back() += c;
  }
  return out;
}

std::vector<Point> ReplayedPoints() {
  std::ifstream in(std::string(::tessera::testing::SourceDir()) + "/examples/calibration/interference.csv");
  std::vector<Point> out;
  std::string line;
  std::vector<std::string> header;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const std::vector<std::string> f = CsvFields(line);
    if (header.empty()) {
      header = f;
      continue;
    }
    std::map<std::string, std::string> row;
    for (size_t i = 0; i < header.size() && i < f.size(); ++i) row[header[i]] = f[i];
    EXPECT_FALSE(row["source"].empty()) << line;
    if (row["replay"].rfind("no:", 0) == 0) continue;
    out.push_back({row["mode"], row["metric"], row["replay"], row["sharers"].empty() ? 1 : std::stoi(row["sharers"]),
                   std::stod(row["value"])});
  }
  return out;
}

// The model's value for a point, as the file's `replay` column reads it.
double Predict(const Point& p, double loss, double mps) {
  SharingOptions o;
  o.switch_throughput_loss = o.switch_overhead = loss;
  o.mps_contention = mps;
  const int k = p.sharers;
  if (p.replay == "isolated") return 1.0;
  if (p.replay == "saturated") {  // every process busy: time-slicing serialises them
    o.mode = SharingMode::kTimeSlicing;
    const double thr = ThroughputFactor(o, k, 1.0);
    return p.metric == "throughput_ratio" ? thr : p.metric == "per_sharer_throughput" ? thr / k : k / thr;
  }
  const double m = 1.0 + mps * (k - 1);  // "busy" MPS clients: contention, no queueing term measured
  return p.metric == "per_sharer_throughput" ? 1.0 / m : m;
}

double Misfit(const std::vector<Point>& pts, const std::string& mode, double loss, double mps) {
  double sum = 0;
  for (const Point& p : pts)
    if (p.mode == mode) sum += std::pow(std::log(Predict(p, loss, mps) / p.value), 2);
  return sum;
}

// Every published point the model uses is replayed within its tolerance (10 % time-slicing and MIG, 25 %
// MPS, whose contention depends on the workloads' memory traffic), and the shipped constants are the
// least-squares fit (in log space) of those points.
TEST(InterferenceCalibration, ReplaysThePublishedPointsAndTheConstantsAreTheirFit) {
  const std::vector<Point> pts = ReplayedPoints();
  ASSERT_GE(pts.size(), 8u);
  for (const Point& p : pts) {
    const double model = Predict(p, kSwitchThroughputLoss, kMpsContention);
    const double tolerance = p.mode == "mps" ? 0.25 : 0.10;
    EXPECT_NEAR(model / p.value, 1.0, tolerance) << p.mode << " k=" << p.sharers << " " << p.metric << " "
                                                 << p.value << ": model " << model;
  }
  double best_loss = 0, best_mps = 0;
  for (int i = 0; i <= 300; ++i) {
    if (Misfit(pts, "time-slicing", i / 1000.0, 0) < Misfit(pts, "time-slicing", best_loss, 0)) best_loss = i / 1000.0;
    if (Misfit(pts, "mps", 0, i / 1000.0) < Misfit(pts, "mps", 0, best_mps)) best_mps = i / 1000.0;
  }
  EXPECT_NEAR(kSwitchThroughputLoss, best_loss, 0.0015);
  EXPECT_NEAR(kMpsContention, best_mps, 0.0015);
  EXPECT_DOUBLE_EQ(kSwitchOverhead, kSwitchThroughputLoss);
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

using testing::MakeCluster;
using testing::Replica;

// The device plugin's replicas: kube-scheduler places by count (4 per GPU, whatever the demand); under
// time-slicing a replica whose memory does not fit beside the others gets only what is left (the simulator
// then OOM-kills it at start); under MPS each replica's memory is a quarter of the GPU.
TEST(ReplicaPolicies, ReplicasByCountWithTheirModesMemoryRules) {
  const Catalog& cat = Catalog::Default();
  const Cluster cluster = MakeCluster(1, 1, "h100-80gb");
  const int64_t gpu_mib = cat.kind(cat.Find("h100-80gb")).memory_mib;
  for (const char* name : {"k8s-timeslice", "k8s-mps"}) {
    auto s = ClusterState::Build(cluster, cat);
    ASSERT_TRUE(s.ok());
    auto p = MakePolicy(name);
    ASSERT_TRUE(p.ok());
    std::vector<int64_t> granted;
    for (int i = 0; i < 5; ++i) {
      PlaceResult r = (*p)->Place(*s, Replica(i + 1, 600, 30 * 1024));  // 0.6 of a GPU, 30 GiB each
      if (i == 4) {
        EXPECT_FALSE(r.ok) << name << ": a fifth replica on a GPU of 4";
        break;
      }
      ASSERT_TRUE(r.ok) << name << " " << r.reason;
      ASSERT_EQ(r.tasks[0].gpus.size(), 1u);
      EXPECT_EQ(r.tasks[0].gpus[0].milli, kMilliPerGpu / 4) << name << ": one replica, by count";
      granted.push_back(r.tasks[0].gpus[0].memory_mib);
      s->Apply(r.tasks, 0, 0, true);
    }
    if (std::string(name) == "k8s-timeslice") {
      EXPECT_EQ(granted[0], 30 * 1024);
      EXPECT_EQ(granted[1], 30 * 1024);
      EXPECT_EQ(granted[2], gpu_mib - 60 * 1024) << "the memory left: the third replica will not fit";
      EXPECT_EQ(granted[3], 0);
    } else {
      for (int64_t g : granted) EXPECT_EQ(g, gpu_mib / 4) << "MPS: a quarter of the GPU's memory each";
    }
    EXPECT_TRUE(s->CheckInvariants().ok());
  }
}

// bestfit-share admits a sharer onto a GPU only within every sharer's SLO; hami packs by memory and core
// percentage alone.
TEST(ReplicaPolicies, BestfitShareAdmitsWithinTheSloHamiDoesNot) {
  const Catalog& cat = Catalog::Default();
  const Cluster cluster = MakeCluster(1, 1, "h100-80gb");
  for (const char* name : {"bestfit-share", "hami"}) {
    auto s = ClusterState::Build(cluster, cat);
    ASSERT_TRUE(s.ok());
    PolicyOptions o;
    o.sharing.sensitive_headroom = o.sharing.standard_headroom = 1;
    auto p = MakePolicy(name, o);
    ASSERT_TRUE(p.ok());
    int placed = 0;
    for (int i = 0; i < 4; ++i) {
      PlaceResult r = (*p)->Place(*s, Replica(i + 1, 240, 8 * 1024, true));  // production, SLO 2
      if (!r.ok) break;
      EXPECT_EQ(r.tasks[0].gpus[0].milli, 240) << name << ": the exact fraction";
      s->Apply(r.tasks, 0, 0, true);
      ++placed;
    }
    // Two sharers of 240 (u = 0.48): worst 1 / (1 - 0.48 / thr) x f > 2 with the calibrated contention, so
    // bestfit-share stops at one; hami takes all four (960 of 1000 milli).
    if (std::string(name) == "hami") EXPECT_EQ(placed, 4);
    else EXPECT_EQ(placed, 1) << "worst slowdown with two: " << WorstSlowdown(o.sharing, 480, 1000, 2);
    EXPECT_EQ(s->gpu(0).share_sensitive, placed);
    EXPECT_TRUE(s->CheckInvariants().ok());
  }
}

// Admission counts the headroom the snapshot learned (the control loop's DemandLearner) in place of the
// configured one, unless the policy's options say learn_headroom: false. Steady demand learned at 1.0
// admits more sharers than a configured 2.0; a learned 2.0 fewer than a configured 1.0.
TEST(ReplicaPolicies, AdmissionUsesTheLearnedHeadroom) {
  const Catalog& cat = Catalog::Default();
  const Cluster cluster = MakeCluster(1, 1, "h100-80gb");
  auto placed = [&](const char* name, double configured, std::optional<double> learned, bool learn) {
    auto s = ClusterState::Build(cluster, cat);
    EXPECT_TRUE(s.ok());
    if (learned) s->set_learned_headroom(LearnedHeadroom{*learned, *learned});
    PolicyOptions o;
    o.sharing.sensitive_headroom = o.sharing.standard_headroom = configured;
    o.sharing.learn_headroom = learn;
    auto p = MakePolicy(name, o);
    EXPECT_TRUE(p.ok());
    int n = 0;
    for (int i = 0; i < 16; ++i) {
      PlaceResult r = (*p)->Place(*s, Replica(i + 1, 60, 2 * 1024));
      if (!r.ok) break;
      s->Apply(r.tasks, 0, 0, true);
      ++n;
    }
    EXPECT_TRUE(s->CheckInvariants().ok());
    return n;
  };
  for (const char* name : {"tessera", "bestfit-share"}) {
    const int at1 = placed(name, 1.0, std::nullopt, true), at2 = placed(name, 2.0, std::nullopt, true);
    ASSERT_GT(at1, at2) << name << ": more headroom admits fewer sharers";
    EXPECT_EQ(placed(name, 2.0, 1.0, true), at1) << name;
    EXPECT_EQ(placed(name, 1.0, 2.0, true), at2) << name;
    EXPECT_EQ(placed(name, 2.0, 1.0, false), at2) << name << ": the configured headroom holds";
    EXPECT_EQ(placed(name, 2.0, std::nullopt, true), at2) << name << ": nothing learned yet";
  }
}

}  // namespace
}  // namespace tessera
