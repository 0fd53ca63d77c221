// The default catalog against hardware-facts.md 1.3/1.4, alias lookup, user merges and bad input.
#include "model/catalog.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "test_util.h"

namespace tessera {
namespace {

using testing::Kind;

uint8_t Mask(std::initializer_list<int> starts) {
  uint8_t m = 0;
  for (int s : starts) m = static_cast<uint8_t>(m | (1u << s));
  return m;
}

TEST(CatalogTest, DefaultHasEveryKind) {
  for (const char* id : {"a100-40gb", "a100-80gb", "a30-24gb", "h100-80gb", "h100-94gb", "h200-141gb", "b200-180gb",
                         "l40s-48gb", "l4-24gb", "a10-24gb", "t4-16gb", "v100-16gb", "v100-32gb", "p100-16gb",
                         "alibaba-g1", "alibaba-g2", "alibaba-g3"}) {
    const KindId k = Catalog::Default().Find(id);
    ASSERT_NE(k, kNone) << id;
    EXPECT_EQ(Catalog::Default().kind(k).id, id);
  }
  EXPECT_EQ(Catalog::Default().size(), 17u);
}

TEST(CatalogTest, AliasesResolveCaseInsensitively) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"G1", "alibaba-g1"},
      {"G2", "alibaba-g2"},
      {"g3", "alibaba-g3"},
      {"P100", "p100-16gb"},
      {"T4", "t4-16gb"},
      {"V100M16", "v100-16gb"},
      {"V100M32", "v100-32gb"},
      {"A10", "a10-24gb"},
      {"NVIDIA-H100-80GB-HBM3", "h100-80gb"},
      {"NVIDIA-A100-SXM4-80GB", "a100-80gb"},
      {"A100-SXM4-40GB", "a100-40gb"},
      {"NVIDIA-A100-SXM4-40GB", "a100-40gb"},
      {"nvidia-a100-sxm4-40gb", "a100-40gb"},
      {"NVIDIA-H200", "h200-141gb"},
      {"NVIDIA-H100-NVL", "h100-94gb"},
      {"NVIDIA-B200", "b200-180gb"},
      {"NVIDIA-L40S", "l40s-48gb"},
      {"NVIDIA-L4", "l4-24gb"},
      {"Tesla-T4", "t4-16gb"},
      {"Tesla-V100-SXM2-16GB", "v100-16gb"},
      {"Tesla-V100-SXM2-32GB", "v100-32gb"},
      {"NVIDIA-H100-PCIe", ""},  // deliberately not an alias (114 SMs)
      {"", ""},
  };
  for (const auto& [name, id] : cases) {
    const KindId k = Catalog::Default().Find(name);
    if (id.empty()) {
      EXPECT_EQ(k, kNone) << name;
    } else {
      ASSERT_NE(k, kNone) << name;
      EXPECT_EQ(Catalog::Default().kind(k).id, id) << name;
    }
  }
}

// One row of the fact sheet's per-GPU profile tables (1.4) with placements from 1.3.
struct Row {
  const char* kind;
  const char* name;
  int id;
  int compute, memory;
  int64_t usable_mib;
  int sms, max;
  uint8_t starts;
  bool media;
};

TEST(CatalogTest, ProfilesMatchTheFactSheet) {
  const uint8_t k1 = Mask({0, 1, 2, 3, 4, 5, 6}), k1d = Mask({0, 2, 4, 6}), k2 = Mask({0, 2, 4}), k3 = Mask({0, 4}),
                k0 = Mask({0});
  const std::vector<Row> rows = {
      // A100-40GB: GiB x 1024 rounded down (4.75, 9.62, 19.50, 39.25).
      {"a100-40gb", "1g.5gb", 19, 1, 1, 4864, 14, 7, k1, false},
      {"a100-40gb", "1g.5gb+me", 20, 1, 1, 4864, 14, 1, k1, true},
      {"a100-40gb", "1g.10gb", 15, 1, 2, 9850, 14, 4, k1d, false},
      {"a100-40gb", "2g.10gb", 14, 2, 2, 9850, 28, 3, k2, false},
      {"a100-40gb", "3g.20gb", 9, 3, 4, 19968, 42, 2, k3, false},
      {"a100-40gb", "4g.20gb", 5, 4, 4, 19968, 56, 1, k0, false},
      {"a100-40gb", "7g.40gb", 0, 7, 8, 40192, 98, 1, k0, false},
      // A100-80GB: ranges take the lower bound (9.50, 78.5).
      {"a100-80gb", "1g.10gb", 19, 1, 1, 9728, 14, 7, k1, false},
      {"a100-80gb", "1g.10gb+me", 20, 1, 1, 9728, 14, 1, k1, true},
      {"a100-80gb", "1g.20gb", 15, 1, 2, 19968, 14, 4, k1d, false},
      {"a100-80gb", "2g.20gb", 14, 2, 2, 19968, 28, 3, k2, false},
      {"a100-80gb", "3g.40gb", 9, 3, 4, 40192, 42, 2, k3, false},
      {"a100-80gb", "4g.40gb", 5, 4, 4, 40192, 56, 1, k0, false},
      {"a100-80gb", "7g.80gb", 0, 7, 8, 80384, 98, 1, k0, false},
      // H100-80GB (9.75, 19.62, 39.50, 79.25 GiB).
      {"h100-80gb", "1g.10gb", 19, 1, 1, 9984, 16, 7, k1, false},
      {"h100-80gb", "1g.10gb+me", 20, 1, 1, 9984, 16, 1, k1, true},
      {"h100-80gb", "1g.20gb", 15, 1, 2, 20090, 26, 4, k1d, false},
      {"h100-80gb", "2g.20gb", 14, 2, 2, 20090, 32, 3, k2, false},
      {"h100-80gb", "3g.40gb", 9, 3, 4, 40448, 60, 2, k3, false},
      {"h100-80gb", "4g.40gb", 5, 4, 4, 40448, 64, 1, k0, false},
      {"h100-80gb", "7g.80gb", 0, 7, 8, 81152, 132, 1, k0, false},
      // H100-94GB (10.75, 21.62, 46.38, 93.12 GiB); GFD saw 11008 MiB for 1g.12gb.
      {"h100-94gb", "1g.12gb", 19, 1, 1, 11008, 16, 7, k1, false},
      {"h100-94gb", "1g.12gb+me", 20, 1, 1, 11008, 16, 1, k1, true},
      {"h100-94gb", "1g.24gb", 15, 1, 2, 22138, 26, 4, k1d, false},
      {"h100-94gb", "2g.24gb", 14, 2, 2, 22138, 32, 3, k2, false},
      {"h100-94gb", "3g.47gb", 9, 3, 4, 47493, 60, 2, k3, false},
      {"h100-94gb", "4g.47gb", 5, 4, 4, 47493, 64, 1, k0, false},
      {"h100-94gb", "7g.94gb", 0, 7, 8, 95354, 132, 1, k0, false},
      // H200-141GB: observed 16.00, 32.50, 140.00 GiB; the rest are estimates (checked separately).
      {"h200-141gb", "1g.18gb", 19, 1, 1, 16384, 16, 7, k1, false},
      {"h200-141gb", "1g.18gb+me", 20, 1, 1, 16384, 16, 1, k1, true},
      {"h200-141gb", "1g.35gb", 15, 1, 2, 33280, 26, 4, k1d, false},
      {"h200-141gb", "2g.35gb", 14, 2, 2, 33280, 32, 3, k2, false},
      {"h200-141gb", "3g.71gb", 9, 3, 4, 66560, 60, 2, k3, false},
      {"h200-141gb", "4g.71gb", 5, 4, 4, 66560, 64, 1, k0, false},
      {"h200-141gb", "7g.141gb", 0, 7, 8, 143360, 132, 1, k0, false},
      // B200-180GB: slices and counts documented; memory estimated, SMs unknown.
      {"b200-180gb", "1g.23gb", 19, 1, 1, 21248, 0, 7, k1, false},
      {"b200-180gb", "1g.23gb+me", 20, 1, 1, 21248, 0, 1, k1, true},
      {"b200-180gb", "1g.45gb", 15, 1, 2, 42496, 0, 4, k1d, false},
      {"b200-180gb", "2g.45gb", 14, 2, 2, 42496, 0, 3, k2, false},
      {"b200-180gb", "3g.90gb", 9, 3, 4, 84992, 0, 2, k3, false},
      {"b200-180gb", "4g.90gb", 5, 4, 4, 84992, 0, 1, k0, false},
      {"b200-180gb", "7g.180gb", 0, 7, 8, 182784, 0, 1, k0, false},
      // A30: 4 memory / 4 compute slices, its own ids and placements.
      {"a30-24gb", "1g.6gb", 14, 1, 1, 5836, 14, 4, Mask({0, 1, 2, 3}), false},
      {"a30-24gb", "1g.6gb+me", 21, 1, 1, 5836, 14, 1, Mask({0, 1, 2, 3}), true},
      {"a30-24gb", "2g.12gb", 5, 2, 2, 11817, 28, 2, Mask({0, 2}), false},
      {"a30-24gb", "2g.12gb+me", 6, 2, 2, 11817, 28, 1, Mask({0, 2}), true},
      {"a30-24gb", "4g.24gb", 0, 4, 4, 24107, 56, 1, k0, false},
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(std::string(r.kind) + " " + r.name);
    const GpuKind& k = Kind(r.kind);
    const int i = k.FindProfile(r.name);
    ASSERT_GE(i, 0);
    const MigProfile& p = k.profiles[static_cast<size_t>(i)];
    EXPECT_EQ(p.profile_id, r.id);
    EXPECT_EQ(p.compute_slices, r.compute);
    EXPECT_EQ(p.memory_slices, r.memory);
    EXPECT_EQ(p.usable_mib, r.usable_mib);
    EXPECT_EQ(p.sms, r.sms);
    EXPECT_EQ(p.max_count, r.max);
    EXPECT_EQ(p.start_mask, r.starts);
    EXPECT_EQ(p.media, r.media);
  }
  // No profile beyond the table.
  for (const char* kind : {"a100-40gb", "a100-80gb", "h100-80gb", "h100-94gb", "h200-141gb", "b200-180gb"})
    EXPECT_EQ(Kind(kind).profiles.size(), 7u) << kind;
  EXPECT_EQ(Kind("a30-24gb").profiles.size(), 5u);
}

TEST(CatalogTest, MigGeometryOfKinds) {
  for (const char* id : {"a100-40gb", "a100-80gb", "h100-80gb", "h100-94gb", "h200-141gb", "b200-180gb"}) {
    const GpuKind& k = Kind(id);
    EXPECT_TRUE(k.mig_capable) << id;
    EXPECT_EQ(k.mig_memory_slices, 8) << id;
    EXPECT_EQ(k.mig_compute_slices, 7) << id;
    EXPECT_EQ(k.mig_max_instances, 7) << id;
    // Memory slice 7 never holds a single-slice profile (fact sheet 0.3).
    for (const MigProfile& p : k.profiles)
      if (p.memory_slices == 1) EXPECT_FALSE(p.AllowedStart(7)) << id << " " << p.name;
  }
  const GpuKind& a30 = Kind("a30-24gb");
  EXPECT_EQ(a30.mig_memory_slices, 4);
  EXPECT_EQ(a30.mig_compute_slices, 4);
  EXPECT_EQ(a30.mig_max_instances, 4);
  for (const char* id : {"l40s-48gb", "l4-24gb", "a10-24gb", "t4-16gb", "v100-16gb", "v100-32gb", "p100-16gb",
                         "alibaba-g1", "alibaba-g2", "alibaba-g3"}) {
    EXPECT_FALSE(Kind(id).mig_capable) << id;
    EXPECT_TRUE(Kind(id).profiles.empty()) << id;
  }
}

TEST(CatalogTest, KindFigures) {
  EXPECT_EQ(Kind("a100-40gb").memory_mib, 40960);  // GFD nvidia.com/gpu.memory
  EXPECT_EQ(Kind("a100-40gb").sms, 108);
  EXPECT_EQ(Kind("h100-80gb").sms, 132);
  EXPECT_EQ(Kind("h200-141gb").memory_mib, 141 * 1024);
  EXPECT_EQ(Kind("alibaba-g2").memory_mib, 32768);
  EXPECT_EQ(Kind("h100-80gb").family, "hopper");
  EXPECT_EQ(Kind("b200-180gb").family, "blackwell");
  const std::vector<std::pair<const char*, double>> tflops = {
      {"a100-40gb", 312}, {"h100-80gb", 989}, {"h200-141gb", 989}, {"b200-180gb", 2250}, {"l40s-48gb", 362},
      {"l4-24gb", 121},   {"a10-24gb", 125},  {"a30-24gb", 165},   {"t4-16gb", 65},       {"v100-16gb", 125},
      {"p100-16gb", 19}};
  for (const auto& [id, tf] : tflops) {
    EXPECT_DOUBLE_EQ(Kind(id).bf16_tflops, tf) << id;
    const auto& f = Kind(id).unverified_fields;
    EXPECT_NE(std::find(f.begin(), f.end(), "bf16_tflops"), f.end()) << id << ": tflops are not in the fact sheet";
  }
}

TEST(CatalogTest, UnverifiedFlags) {
  // H200 placements are unverified on every profile; its estimated memory says so.
  for (const MigProfile& p : Kind("h200-141gb").profiles) EXPECT_TRUE(p.unverified) << p.name;
  for (const char* name : {"1g.35gb", "3g.71gb", "4g.71gb"}) {
    const auto& p = Kind("h200-141gb").profiles[static_cast<size_t>(Kind("h200-141gb").FindProfile(name))];
    EXPECT_NE(std::find(p.unverified_fields.begin(), p.unverified_fields.end(), "usable_mib"), p.unverified_fields.end())
        << name;
  }
  for (const MigProfile& p : Kind("b200-180gb").profiles) EXPECT_TRUE(p.unverified) << p.name;
  // Observed A100/H100 figures are not flagged.
  for (const MigProfile& p : Kind("h100-80gb").profiles) EXPECT_FALSE(p.unverified) << p.name;
  for (const char* id : {"alibaba-g1", "alibaba-g2", "alibaba-g3"}) EXPECT_TRUE(Kind(id).unverified) << id;
  EXPECT_FALSE(Kind("h100-80gb").unverified);
}

TEST(CatalogTest, ProfileComputeMilli) {
  const GpuKind& h100 = Kind("h100-80gb");
  EXPECT_EQ(h100.ProfileComputeMilli(h100.FindProfile("1g.10gb")), 121);   // 16 / 132 SMs
  EXPECT_EQ(h100.ProfileComputeMilli(h100.FindProfile("3g.40gb")), 454);   // 60 / 132
  EXPECT_EQ(h100.ProfileComputeMilli(h100.FindProfile("7g.80gb")), 1000);  // 132 / 132
  const GpuKind& a100 = Kind("a100-40gb");
  EXPECT_EQ(a100.ProfileComputeMilli(a100.FindProfile("7g.40gb")), 907);  // 98 of 108 SMs in MIG mode
  const GpuKind& b200 = Kind("b200-180gb");  // SMs unknown: compute slices / 7
  EXPECT_EQ(b200.ProfileComputeMilli(b200.FindProfile("1g.23gb")), 142);
  EXPECT_EQ(b200.ProfileComputeMilli(b200.FindProfile("3g.90gb")), 428);
  const GpuKind& a30 = Kind("a30-24gb");
  EXPECT_EQ(a30.ProfileComputeMilli(a30.FindProfile("2g.12gb")), 500);
}

constexpr const char* kUserKind = R"(
kinds:
  - id: rtx-test-96gb
    aliases: [NVIDIA-RTX-TEST]
    family: blackwell
    memory_mib: 98304
    sms: 188
    bf16_tflops: 500
    unverified: true
    mig:
      memory_slices: 4
      compute_slices: 4
      max_instances: 4
      profiles:
        - {name: 1g.24gb, profile_id: 14, compute_slices: 1, memory_slices: 1, usable_mib: 24000, sms: 46, max_count: 4, starts: [0, 1, 2, 3]}
        - {name: 2g.48gb, compute_slices: 2, memory_slices: 2, usable_mib: 48000, max_count: 2, starts: [0, 2]}
        - {name: 4g.96gb, compute_slices: 4, memory_slices: 4, usable_mib: 96000, max_count: 1, starts: [0]}
)";

TEST(CatalogTest, MergeAddsAUserKind) {
  Catalog c = Catalog::Default();
  const size_t before = c.size();
  ASSERT_TRUE(c.Merge(kUserKind, "user.yaml").ok());
  EXPECT_EQ(c.size(), before + 1);
  const KindId k = c.Find("nvidia-rtx-test");
  ASSERT_NE(k, kNone);
  const GpuKind& kind = c.kind(k);
  EXPECT_EQ(kind.id, "rtx-test-96gb");
  EXPECT_TRUE(kind.mig_capable);
  ASSERT_EQ(kind.profiles.size(), 3u);
  EXPECT_EQ(kind.profiles[1].profile_id, -1);  // unknown
  EXPECT_EQ(kind.profiles[1].start_mask, Mask({0, 2}));
  EXPECT_EQ(kind.ProfileComputeMilli(0), 244);  // 46 / 188 SMs
  EXPECT_EQ(kind.ProfileComputeMilli(1), 500);  // SMs unknown: 2 / 4 slices
  // The default catalog is untouched.
  EXPECT_EQ(Catalog::Default().Find("rtx-test-96gb"), kNone);
}

TEST(CatalogTest, MergeReplacesAKindInPlace) {
  Catalog c = Catalog::Default();
  const KindId before = c.Find("t4-16gb");
  ASSERT_TRUE(c.Merge("kinds:\n  - {id: t4-16gb, aliases: [T4], family: turing, memory_mib: 15360, sms: 40}\n",
                      "t4.yaml")
                  .ok());
  EXPECT_EQ(c.Find("t4-16gb"), before);  // same KindId
  EXPECT_EQ(c.kind(before).memory_mib, 15360);
  EXPECT_EQ(c.Find("T4"), before);
  EXPECT_EQ(c.Find("Tesla-T4"), kNone);  // the replacement dropped that alias
  EXPECT_EQ(c.size(), Catalog::Default().size());
}

TEST(CatalogTest, FailedMergeLeavesCatalogUnchanged) {
  Catalog c = Catalog::Default();
  Status s = c.Merge("kinds:\n  - {id: new-kind, aliases: [NVIDIA-H200], family: x, memory_mib: 1}\n", "dup.yaml");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("dup.yaml"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("'NVIDIA-H200' already names kind 'h200-141gb'"), std::string::npos) << s.message();
  EXPECT_EQ(c.Find("new-kind"), kNone);
  EXPECT_EQ(c.size(), Catalog::Default().size());
}

// Bad input: each case must fail with a message that names the source and the culprit.
TEST(CatalogTest, BadInputTable) {
  const std::string kind_head =
      "kinds:\n  - id: x\n    family: f\n    memory_mib: 81920\n    mig: {memory_slices: 8, compute_slices: 7, "
      "max_instances: 7, profiles: [";
  auto prof = [&](const std::string& p) { return kind_head + p + "]}\n"; };
  const std::string p0 = "catalog.yaml:5: kinds[0].mig.profiles[0].";  // the profile line of prof()
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "catalog.yaml: expected a map with a 'kinds' list"},
      {"kinds: [\n", "catalog.yaml:2: YAML syntax error"},
      {"kinds: 3\n", "catalog.yaml:1: kinds: expected a list, got \"3\""},
      {"things: []\n", "catalog.yaml:1: kinds: required"},
      {"kinds: []\nthings: []\n", "catalog.yaml:2: things: unknown field"},
      {"kinds:\n  - family: f\n    memory_mib: 1\n", "catalog.yaml:2: kinds[0].id: required"},
      {"kinds:\n  - id: x\n    memory_mib: 1\n", "catalog.yaml:2: kinds[0].family: required"},
      {"kinds:\n  - id: x\n    family: f\n", "catalog.yaml:2: kinds[0].memory_mib: required"},
      {"kinds:\n  - id: x\n    family: f\n    memory_mib: lots\n",
       "catalog.yaml:4: kinds[0].memory_mib: expected an integer in [1, 1073741824], got \"lots\""},
      {"kinds:\n  - id: x\n    family: f\n    memory_mib: 0\n", "catalog.yaml:4: kinds[0].memory_mib: expected an integer"},
      {"kinds:\n  - id: x\n    family: f\n    memory_mib: 9223372036854775808\n",
       "catalog.yaml:4: kinds[0].memory_mib: expected an integer"},
      {"kinds:\n  - id: x\n    family: f\n    memory_mib: 1\n    bf16_tflops: .nan\n",
       "catalog.yaml:5: kinds[0].bf16_tflops: expected a number"},
      {"kinds:\n  - id: x\n    family: f\n    memory_mib: 1\n    memory_mb: 1\n",
       "catalog.yaml:5: kinds[0].memory_mb: unknown field"},
      {"kinds:\n  - id: x\n    family: f\n    memory_mib: 1\n  - id: X\n    family: f\n    memory_mib: 1\n",
       "catalog.yaml:5: kinds[1].id: kind 'X' listed twice"},
      {"kinds:\n  - id: x\n    family: f\n    memory_mib: 1\n    aliases: G1\n",
       "catalog.yaml:5: kinds[0].aliases: expected a list, got \"G1\""},
      {"kinds:\n  - id: x\n    family: f\n    memory_mib: 1\n    aliases: ['']\n",
       "catalog.yaml:5: kinds[0].aliases: expected non-empty text items"},
      {"kinds:\n  - id: x\n    family: f\n    memory_mib: 1\n    mig: {memory_slices: 9, compute_slices: 7, "
       "max_instances: 7, profiles: []}\n",
       "catalog.yaml:5: kinds[0].mig.memory_slices: expected an integer in [1, 8], got \"9\""},
      {"kinds:\n  - id: x\n    family: f\n    memory_mib: 1\n    mig: [1]\n",
       "catalog.yaml:5: kinds[0].mig: expected a map, got a list"},
      {prof(""), "catalog.yaml:5: kinds[0].mig.profiles: expected a non-empty list"},
      {prof("{name: 3g.40gb, compute_slices: 3, memory_slices: 4, usable_mib: 40000, max_count: 2, starts: [0, 5]}"),
       p0 + "starts[1]: start 5 + 4 memory slices exceeds 8"},
      {prof("{name: 1g, compute_slices: 1, memory_slices: 1, usable_mib: 9000, max_count: 7, starts: [8]}"),
       p0 + "starts[0]: expected an integer in [0, 7], got \"8\""},
      {prof("{name: 1g, compute_slices: 1, memory_slices: 1, usable_mib: 9000, max_count: 7, starts: []}"),
       p0 + "starts: expected a non-empty list"},
      {prof("{name: 1g, compute_slices: 1, memory_slices: 1, usable_mib: 9000, max_count: 7, starts: [0, 0]}"),
       p0 + "starts[1]: start 0 listed twice"},
      {prof("{name: 1g, compute_slices: 2, memory_slices: 1, usable_mib: 9000, max_count: 7, starts: [0]}"),
       p0 + "compute_slices: 2 exceeds memory_slices 1"},
      {prof("{name: 1g, compute_slices: 1, memory_slices: 1, usable_mib: 90000, max_count: 7, starts: [0]}"),
       p0 + "usable_mib: expected an integer in [1, 81920], got \"90000\""},
      {prof("{name: 1g, compute_slices: 1, memory_slices: 1, usable_mib: 9000, max_count: 8, starts: [0]}"),
       p0 + "max_count: expected an integer in [1, 7], got \"8\""},
      {prof("{name: 1g, compute_slices: 1, memory_slices: 1, usable_mib: 9000, starts: [0]}"), p0 + "max_count: required"},
      {prof("{name: 1g, compute_slices: 1, memory_slices: 1, usable_mib: 9000, max_count: 1, starts: [0], size: 2}"),
       p0 + "size: unknown field"},
      {prof("{name: 1g, compute_slices: 1, memory_slices: 1, usable_mib: 9000, max_count: 1, starts: [0]}, "
            "{name: 1g, compute_slices: 1, memory_slices: 1, usable_mib: 9000, max_count: 1, starts: [1]}"),
       "catalog.yaml:5: kinds[0].mig.profiles[1]: profile '1g' listed twice"},
      {prof("{name: 1g, compute_slices: 1, memory_slices: 1, usable_mib: 9000, max_count: 1, starts: [0], "
            "media: maybe}"),
       p0 + "media: expected true or false, got \"maybe\""},
      {prof("{name: [1g], compute_slices: 1}"), p0 + "name: expected text, got a list"},
      {"kinds: &a [*a]\n", "catalog.yaml:1: kinds[0]: expected a map, got a list"},
  };
  for (const auto& [text, want] : cases) {
    Result<Catalog> c = Catalog::FromYaml(text, "catalog.yaml");
    ASSERT_FALSE(c.ok()) << "accepted:\n" << text;
    EXPECT_NE(c.error().find("catalog.yaml"), std::string::npos) << c.error();
    EXPECT_NE(c.error().find(want), std::string::npos) << "want '" << want << "' in: " << c.error();
  }
}

TEST(CatalogTest, ErrorsCarryLineNumbers) {
  Result<Catalog> c = Catalog::FromYaml("kinds:\n  - id: x\n    family: f\n    memory_mib: -5\n", "cat.yaml");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error(), "cat.yaml:4: kinds[0].memory_mib: expected an integer in [1, 1073741824], got \"-5\"");
}

}  // namespace
}  // namespace tessera
