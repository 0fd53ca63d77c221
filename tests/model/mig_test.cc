// MIG geometry against every documented valid/invalid combination in hardware-facts.md 1.3-1.5 and the
// ground-truth layout enumeration of ../shared/checks/lib/mig_truth.py (78 maximal layouts on 8 slices).
#include "model/mig.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "test_util.h"

namespace tessera {
namespace {

using testing::Kind;

// "3g.40gb@0 3g.40gb@4" -> instances; fails the test on a parse error.
std::vector<MigInstance> Parse(const GpuKind& kind, const std::string& text) {
  std::vector<MigInstance> out;
  std::istringstream in(text);
  std::string word;
  while (in >> word) {
    Result<MigInstance> i = ParseMigInstance(kind, word);
    EXPECT_TRUE(i.ok()) << i.error();
    if (i.ok()) out.push_back(*i);
  }
  return out;
}

Status Check(const std::string& kind, const std::string& layout) {
  return CheckMigLayout(Kind(kind), Parse(Kind(kind), layout));
}

TEST(MigTest, AcceptanceCasesOnH100) {  // ../shared/checks/issue2-mig-check
  for (const char* ok : {"3g.40gb@0 3g.40gb@4", "4g.40gb@0 3g.40gb@4", "2g.20gb@0 2g.20gb@2 2g.20gb@4 1g.10gb@6",
                         "1g.20gb@0 1g.20gb@2 1g.20gb@4 1g.20gb@6", "7g.80gb@0",
                         "3g.40gb@4 1g.10gb@0 1g.10gb@1 1g.10gb@2 1g.10gb@3"}) {
    Status s = Check("h100-80gb", ok);
    EXPECT_TRUE(s.ok()) << ok << ": " << s.message();
  }
  for (const char* bad : {"1g.10gb@7", "2g.20gb@6", "3g.40gb@2", "4g.40gb@4", "7g.80gb@1", "3g.40gb@0 4g.40gb@0",
                          "2g.20gb@2 3g.40gb@0", "7g.80gb@0 1g.10gb@0", "1g.10gb+me@0 1g.10gb+me@1", "1g.20gb@1"}) {
    EXPECT_FALSE(Check("h100-80gb", bad).ok()) << bad;
  }
}

// Fact sheet 1.3 "examples of valid full layouts", written for each 8-slice kind with its own names.
TEST(MigTest, DocumentedFullLayoutsAreValidOnEveryEightSliceKind) {
  struct Names {
    const char* kind;
    const char *g1, *g1d, *g2, *g3, *g4, *g7;
  };
  for (const Names& n : std::vector<Names>{
           {"a100-40gb", "1g.5gb", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"},
           {"a100-80gb", "1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"},
           {"h100-80gb", "1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"},
           {"h100-94gb", "1g.12gb", "1g.24gb", "2g.24gb", "3g.47gb", "4g.47gb", "7g.94gb"},
           {"h200-141gb", "1g.18gb", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"},
           {"b200-180gb", "1g.23gb", "1g.45gb", "2g.45gb", "3g.90gb", "4g.90gb", "7g.180gb"}}) {
    auto at = [](const char* p, int s) { return std::string(p) + "@" + std::to_string(s) + " "; };
    std::vector<std::string> layouts = {
        at(n.g1, 0) + at(n.g1, 1) + at(n.g1, 2) + at(n.g1, 3) + at(n.g1, 4) + at(n.g1, 5) + at(n.g1, 6),  // 7x1g
        at(n.g1d, 0) + at(n.g1d, 2) + at(n.g1d, 4) + at(n.g1d, 6),                                       // 4x1g-double
        at(n.g2, 0) + at(n.g2, 2) + at(n.g2, 4) + at(n.g1, 6),                                           // 3x2g + 1g@6
        at(n.g3, 0) + at(n.g3, 4),                                                                       // 2x3g
        at(n.g4, 0) + at(n.g3, 4),                                                                       // 4g + 3g
        at(n.g4, 0) + at(n.g2, 4) + at(n.g1, 6),                                                         // 4g+2g@4+1g@6
        at(n.g3, 4) + at(n.g2, 0) + at(n.g2, 2),                                                         // 3g@4 + 2x2g
        at(n.g3, 4) + at(n.g1, 0) + at(n.g1, 1) + at(n.g1, 2) + at(n.g1, 3),                             // 3g@4 + 4x1g
        at(n.g1, 0) + at(n.g1, 1) + at(n.g2, 2) + at(n.g3, 4),                                           // all-balanced
        at(n.g7, 0),
    };
    for (const std::string& l : layouts) {
      Status s = Check(n.kind, l);
      EXPECT_TRUE(s.ok()) << n.kind << " " << l << ": " << s.message();
    }
    // Seven 1g leave slice 7 unused, and an eighth cannot go there.
    EXPECT_FALSE(Check(n.kind, layouts[0] + at(n.g1, 7)).ok()) << n.kind;
    // 2g never at 6, 4g only at 0, 3g only at 0/4, double-memory 1g only at even starts.
    EXPECT_FALSE(Check(n.kind, at(n.g2, 6)).ok()) << n.kind;
    EXPECT_FALSE(Check(n.kind, at(n.g4, 4)).ok()) << n.kind;
    EXPECT_FALSE(Check(n.kind, at(n.g3, 2)).ok()) << n.kind;
    EXPECT_FALSE(Check(n.kind, at(n.g1d, 3)).ok()) << n.kind;
  }
}

// Fact sheet 1.5: the driver fills small profiles from the high end; order decides success.
TEST(MigTest, CreationOrderMattersLikeNvidiasExample) {
  const GpuKind& h = Kind("h100-80gb");
  const int g1 = h.FindProfile("1g.10gb"), g2 = h.FindProfile("2g.20gb"), g3 = h.FindProfile("3g.40gb"),
            g4 = h.FindProfile("4g.40gb");
  // `-cgi 19,19,14,9`: 1g at 6, 1g at 5, 2g at 2 (4-5 is taken) -> no start left for the 3g.
  std::vector<MigInstance> placed = {{g1, 6}, {g1, 5}, {g2, 2}};
  ASSERT_TRUE(CheckMigLayout(h, placed).ok());
  EXPECT_FALSE(CanAddInstance(h, placed, {g3, 0}));
  EXPECT_FALSE(CanAddInstance(h, placed, {g3, 4}));
  // `-cgi 9,19,14,19`: 3g at 4, 1g at 0, 1g at 1, 2g at 2 -> succeeds (same multiset).
  EXPECT_TRUE(CheckMigLayout(h, {{g3, 4}, {g1, 0}, {g1, 1}, {g2, 2}}).ok());
  // `-cgi 19,14,5`: 1g at 6, 2g at 4, 4g at 0.
  EXPECT_TRUE(CheckMigLayout(h, {{g1, 6}, {g2, 4}, {g4, 0}}).ok());
  // `-cgi 14` then five `19`: 2g at 4, 1g at 0, 1, 2, 3, 6.
  EXPECT_TRUE(CheckMigLayout(h, {{g2, 4}, {g1, 0}, {g1, 1}, {g1, 2}, {g1, 3}, {g1, 6}}).ok());
}

TEST(MigTest, CanAddInstance) {
  const GpuKind& h = Kind("h100-80gb");
  const int g1 = h.FindProfile("1g.10gb"), me = h.FindProfile("1g.10gb+me"), g7 = h.FindProfile("7g.80gb");
  EXPECT_TRUE(CanAddInstance(h, {}, {g7, 0}));
  EXPECT_FALSE(CanAddInstance(h, {}, {g7, 1}));           // not an allowed start
  EXPECT_FALSE(CanAddInstance(h, {}, {g1, 7}));           // 1g never at 7
  EXPECT_FALSE(CanAddInstance(h, {{g1, 0}}, {g7, 0}));    // overlap
  EXPECT_TRUE(CanAddInstance(h, {{me, 0}}, {g1, 1}));
  EXPECT_FALSE(CanAddInstance(h, {{me, 0}}, {me, 1}));    // +me at most once
  EXPECT_FALSE(CanAddInstance(h, {}, {99, 0}));           // unknown profile
  EXPECT_FALSE(CanAddInstance(Kind("l4-24gb"), {}, {0, 0}));  // not MIG-capable
}

TEST(MigTest, ReasonsNameTheProblem) {
  Status s = Check("h100-80gb", "3g.40gb@2");
  EXPECT_EQ(s.message(), "3g.40gb@2: 3g.40gb may not start at memory slice 2 (allowed starts: 0, 4)");
  s = Check("h100-80gb", "1g.10gb@7");
  EXPECT_EQ(s.message(), "1g.10gb@7: 1g.10gb may not start at memory slice 7 (allowed starts: 0, 1, 2, 3, 4, 5, 6)");
  s = Check("h100-80gb", "2g.20gb@2 3g.40gb@0");
  EXPECT_EQ(s.message(), "2g.20gb@2 and 3g.40gb@0 overlap on memory slice 2");
  s = Check("h100-80gb", "1g.10gb+me@0 1g.10gb+me@1");
  EXPECT_EQ(s.message(), "2 instances of 1g.10gb+me exceed its max count 1");
  s = CheckMigLayout(Kind("h100-80gb"), {{42, 0}});
  EXPECT_EQ(s.message(), "unknown profile index 42 for GPU kind 'h100-80gb'");
  s = CheckMigLayout(Kind("t4-16gb"), {});
  EXPECT_EQ(s.message(), "GPU kind 't4-16gb' is not MIG-capable");
  EXPECT_TRUE(CheckMigLayout(Kind("h100-80gb"), {}).ok());  // an empty MIG GPU is a valid layout
}

TEST(MigTest, ParseMigInstance) {
  const GpuKind& h = Kind("h100-80gb");
  Result<MigInstance> i = ParseMigInstance(h, "3g.40gb@4");
  ASSERT_TRUE(i.ok()) << i.error();
  EXPECT_EQ(*i, (MigInstance{h.FindProfile("3g.40gb"), 4}));
  i = ParseMigInstance(h, "1g.10gb+me@6");
  ASSERT_TRUE(i.ok()) << i.error();
  EXPECT_EQ(i->profile, h.FindProfile("1g.10gb+me"));
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"3g.40gb", "expected PROFILE@START"},
      {"@4", "expected PROFILE@START"},
      {"3g.40gb@", "expected PROFILE@START"},
      {"3g.40gb@x", "start 'x' is not a memory-slice index"},
      {"3g.40gb@-1", "start '-1' is not a memory-slice index"},
      {"3g.40gb@4x", "start '4x' is not a memory-slice index"},
      {"3g.20gb@0", "unknown profile '3g.20gb' for GPU kind 'h100-80gb' (profiles: 1g.10gb, 1g.10gb+me,"},
  };
  for (const auto& [text, want] : bad) {
    Result<MigInstance> r = ParseMigInstance(h, text);
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_NE(r.error().find(want), std::string::npos) << r.error();
  }
  // A start past the GPU parses, and the layout check rejects it.
  i = ParseMigInstance(h, "1g.10gb@12");
  ASSERT_TRUE(i.ok());
  EXPECT_FALSE(CheckMigLayout(h, {*i}).ok());
}

// Independent reference: brute force over every subset of (non-media profile, allowed start) candidates.
std::set<std::vector<std::pair<int, int>>> BruteForceMaximal(const GpuKind& k) {
  std::vector<MigInstance> cands;
  for (size_t p = 0; p < k.profiles.size(); ++p)
    for (int s = 0; s < k.mig_memory_slices; ++s)
      if (!k.profiles[p].media && k.profiles[p].AllowedStart(s)) cands.push_back({static_cast<int>(p), s});
  std::set<std::vector<std::pair<int, int>>> out;
  for (uint32_t subset = 0; subset < (1u << cands.size()); ++subset) {
    std::vector<MigInstance> layout;
    unsigned used = 0;
    bool overlap = false;
    for (size_t i = 0; i < cands.size() && !overlap; ++i) {
      if (!((subset >> i) & 1u)) continue;
      const unsigned m = k.profiles[static_cast<size_t>(cands[i].profile)].MaskAt(cands[i].start);
      overlap = (used & m) != 0;
      used |= m;
      layout.push_back(cands[i]);
    }
    if (overlap || !CheckMigLayout(k, layout).ok()) continue;
    bool maximal = true;
    for (const MigInstance& c : cands) maximal = maximal && !CanAddInstance(k, layout, c);
    if (!maximal) continue;
    std::vector<std::pair<int, int>> key;
    for (const MigInstance& in : layout) key.emplace_back(in.start, in.profile);
    std::sort(key.begin(), key.end());
    out.insert(key);
  }
  return out;
}

TEST(MigTest, MaximalLayoutsMatchTruth) {
  // 78 = `python3 ../shared/checks/lib/mig_truth.py | tail -1` for every 8-slice kind; 5 on A30.
  const std::vector<std::pair<const char*, size_t>> expected = {
      {"a100-40gb", 78}, {"a100-80gb", 78}, {"h100-80gb", 78}, {"h100-94gb", 78},
      {"h200-141gb", 78}, {"b200-180gb", 78}, {"a30-24gb", 5}};
  for (const auto& [id, count] : expected) {
    SCOPED_TRACE(id);
    const GpuKind& k = Kind(id);
    const auto layouts = MaximalMigLayouts(k);
    EXPECT_EQ(layouts.size(), count);
    std::set<std::vector<std::pair<int, int>>> got;
    for (const auto& l : layouts) {
      EXPECT_TRUE(CheckMigLayout(k, l).ok());
      std::vector<std::pair<int, int>> key;
      for (size_t i = 0; i < l.size(); ++i) {
        EXPECT_FALSE(k.profiles[static_cast<size_t>(l[i].profile)].media);
        if (i > 0) EXPECT_LE(l[i - 1].start, l[i].start);  // sorted by start
        key.emplace_back(l[i].start, l[i].profile);
      }
      got.insert(key);
    }
    EXPECT_EQ(got.size(), layouts.size()) << "duplicates";
    EXPECT_EQ(got, BruteForceMaximal(k));
  }
}

TEST(MigTest, A30Geometry) {
  EXPECT_TRUE(Check("a30-24gb", "4g.24gb@0").ok());
  EXPECT_TRUE(Check("a30-24gb", "2g.12gb@0 2g.12gb@2").ok());
  EXPECT_TRUE(Check("a30-24gb", "1g.6gb@0 1g.6gb@1 1g.6gb@2 1g.6gb@3").ok());  // slice 3 is fine on A30
  EXPECT_TRUE(Check("a30-24gb", "2g.12gb+me@0 1g.6gb@2 1g.6gb+me@3").ok());
  EXPECT_FALSE(Check("a30-24gb", "2g.12gb@1").ok());
  EXPECT_FALSE(Check("a30-24gb", "4g.24gb@0 1g.6gb@0").ok());
  EXPECT_FALSE(Check("a30-24gb", "2g.12gb+me@0 2g.12gb+me@2").ok());
  const GpuKind& a30 = Kind("a30-24gb");
  const auto layouts = MaximalMigLayouts(a30);
  ASSERT_EQ(layouts.size(), 5u);
  // Deterministic order by (start, profile) sequences; the first is four 1g.
  EXPECT_EQ(layouts[0], Parse(a30, "1g.6gb@0 1g.6gb@1 1g.6gb@2 1g.6gb@3"));
}

TEST(MigTest, NoLayoutsWithoutMig) { EXPECT_TRUE(MaximalMigLayouts(Kind("l40s-48gb")).empty()); }

}  // namespace
}  // namespace tessera
