#include "cost/ledger.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <tuple>

#include "base/yaml_reader.h"
#include "cost/pricebook.h"

namespace tessera {

std::string PoolKey(const UsageRecord& r) { return r.pool.empty() ? std::string(TierName(r.tier)) : r.pool; }

Status Ledger::AddUsage(UsageRecord r) {
  auto fail = [&](const char* field, const std::string& msg) {
    return Status::Error(fmt::format("usage record #{} (job {}, team '{}'): {}: {}", usage_.size(), r.job_id,
                                     r.team, field, msg));
  };
  if (r.team.empty()) return fail("team", "empty");
  if (r.gpu_kind.empty()) return fail("gpu_kind", "empty");
  if (r.compute_milli <= 0 || r.compute_milli > kMilliPerGpu) {
    return fail("compute_milli", fmt::format("{} not in 1..1000", r.compute_milli));
  }
  if (r.memory_milli <= 0 || r.memory_milli > kMilliPerGpu) {
    return fail("memory_milli", fmt::format("{} not in 1..1000", r.memory_milli));
  }
  if (r.end_s < r.start_s) return fail("end_s", fmt::format("{} before start_s {}", r.end_s, r.start_s));
  if (r.held_s < -1) return fail("held_s", fmt::format("{} is negative", r.held_s));
  if (r.lost_s < 0 || r.lost_s > HeldSeconds(r)) {
    return fail("lost_s", fmt::format("{} not in 0..{}", r.lost_s, HeldSeconds(r)));
  }
  usage_.push_back(std::move(r));
  return Status::Ok();
}

std::vector<UsageRecord> SumUsage(const std::vector<UsageRecord>& usage, const std::vector<int64_t>& cuts,
                                  UsageSumKey key) {
  using Group = std::tuple<size_t, std::string, std::string, JobId, std::string, int, std::string,
                           std::string, int32_t, int32_t>;
  std::map<Group, UsageRecord> sums;
  auto add = [&](size_t piece, const UsageRecord& r, int64_t lo, int64_t hi, int64_t held, int64_t lost) {
    const Group g{piece,
                  r.team,
                  key.by_project ? r.project : "",
                  key.by_job ? r.job_id : 0,
                  r.gpu_kind,
                  static_cast<int>(r.tier),
                  r.pool,
                  r.node,
                  r.compute_milli,
                  r.memory_milli};
    auto [it, fresh] = sums.try_emplace(g);
    UsageRecord& s = it->second;
    if (fresh) {
      s.team = r.team;
      s.project = std::get<2>(g);
      s.job_id = std::get<3>(g);
      s.gpu_kind = r.gpu_kind;
      s.tier = r.tier;
      s.pool = r.pool;
      s.node = r.node;
      s.compute_milli = r.compute_milli;
      s.memory_milli = r.memory_milli;
      s.start_s = lo;
      s.end_s = hi;
      s.held_s = 0;
    }
    s.start_s = std::min(s.start_s, lo);
    s.end_s = std::max(s.end_s, hi);
    s.held_s += held;
    s.lost_s += lost;
  };
  for (const UsageRecord& r : usage) {
    // The pieces it meets: from the last cut at or before its start (or the first piece).
    auto first = std::upper_bound(cuts.begin(), cuts.end(), r.start_s);
    for (size_t k = first == cuts.begin() ? 0 : static_cast<size_t>(first - cuts.begin()) - 1;
         k + 1 < cuts.size() && cuts[k] < r.end_s; ++k) {
      const int64_t lo = std::max(r.start_s, cuts[k]), hi = std::min(r.end_s, cuts[k + 1]);
      if (lo >= hi) continue;
      if (r.held_s >= 0) {  // already summed within one piece
        add(k, r, r.start_s, r.end_s, r.held_s, r.lost_s);
        break;
      }
      add(k, r, lo, hi, hi - lo, std::min(r.lost_s, hi - lo));
    }
  }
  std::vector<UsageRecord> out;
  out.reserve(sums.size());
  for (auto& [g, s] : sums) out.push_back(std::move(s));
  return out;
}

UsageRecord GrantUsage(const Node& node, const GpuKind& kind, const GpuGrant& g) {
  UsageRecord u;
  u.gpu_kind = kind.id;
  u.tier = node.tier;
  u.pool = node.pool;
  u.node = node.name;
  if (g.shared) {  // a part of a shared instance: its own compute and memory
    u.compute_milli = g.milli;
    u.memory_milli = static_cast<int>(g.memory_mib * 1000 / std::max<int64_t>(1, kind.memory_mib));
  } else if (g.mig_profile >= 0) {
    u.compute_milli = kind.ProfileComputeMilli(g.mig_profile);
    u.memory_milli = kind.profiles[g.mig_profile].memory_slices * 1000 / std::max(1, kind.mig_memory_slices);
  } else {
    u.compute_milli = u.memory_milli = std::min(g.milli, kMilliPerGpu);
  }
  return u;
}

CapacityRecord NodeCapacity(const Node& node, const Catalog& catalog, int64_t start_s, int64_t end_s) {
  CapacityRecord c;
  c.pool = node.pool;
  c.node = node.name;
  c.gpu_kind = catalog.kind(node.kind).id;
  c.tier = node.tier;
  c.gpus = node.gpu_count;
  c.start_s = start_s;
  c.end_s = end_s;
  return c;
}

Status Ledger::AddCapacity(CapacityRecord c) {
  auto fail = [&](const char* field, const std::string& msg) {
    return Status::Error(
        fmt::format("capacity record #{} (pool '{}', node '{}'): {}: {}", capacity_.size(), c.pool, c.node, field, msg));
  };
  if (c.pool.empty()) return fail("pool", "empty");
  if (c.gpus <= 0) return fail("gpus", fmt::format("{} must be positive", c.gpus));
  if (c.end_s < c.start_s) return fail("end_s", fmt::format("{} before start_s {}", c.end_s, c.start_s));
  capacity_.push_back(std::move(c));
  return Status::Ok();
}

}  // namespace tessera

namespace tessera {

namespace {


constexpr int64_t kMaxTime = int64_t{1} << 50;

void ReadTier(FieldReader& r, Tier* tier) {
  std::string s;
  r.String("tier", &s, true);
  if (!r.status().ok()) return;
  Result<Tier> t = ParseTier(s);
  if (!t.ok()) r.Fail("tier", t.error());
  else *tier = *t;
}

}  // namespace

Result<Ledger> ParseLedgerYaml(std::string_view text, std::string_view source) {
  auto parsed = ParseYaml(text, source);
  if (!parsed.ok()) return parsed.status();
  const YAML::Node root = *parsed;
  FieldReader top(root, source, "");
  YAML::Node cap = top.Child("capacity");
  YAML::Node use = top.Child("usage");
  Status st = top.Finish();
  if (!st.ok()) return st;
  Ledger ledger;
  for (const auto& [node, name] : {std::pair{cap, "capacity"}, std::pair{use, "usage"}}) {
    if (node && !node.IsSequence()) return Status::Error(YamlWhere(source, node, name) + ": expected a list");
  }
  for (size_t i = 0; cap && i < cap.size(); ++i) {
    FieldReader r(cap[i], source, fmt::format("capacity[{}]", i));
    CapacityRecord c;
    int64_t gpus = 0;
    r.String("pool", &c.pool, true);
    r.String("node", &c.node, false);
    r.String("gpu_kind", &c.gpu_kind, false);
    ReadTier(r, &c.tier);
    r.Int("gpus", &gpus, true, 1, 1 << 20);
    c.gpus = static_cast<int32_t>(gpus);
    r.Int("start_s", &c.start_s, true, -kMaxTime, kMaxTime);
    r.Int("end_s", &c.end_s, true, -kMaxTime, kMaxTime);
    r.Double("usd_per_gpu_hour", &c.usd_per_gpu_hour, false, 0, 1e12);
    st = r.Finish();
    if (!st.ok()) return st;
    st = ledger.AddCapacity(c);
    if (!st.ok()) return Status::Error(YamlWhere(source, cap[i], fmt::format("capacity[{}]", i)) + ": " + st.message());
  }
  for (size_t i = 0; use && i < use.size(); ++i) {
    FieldReader r(use[i], source, fmt::format("usage[{}]", i));
    UsageRecord u;
    int64_t compute = kMilliPerGpu, memory = -1;
    r.String("team", &u.team, true);
    r.String("project", &u.project, false);
    r.String("queue", &u.queue, false);
    r.Int("job_id", &u.job_id, true, INT64_MIN, INT64_MAX);
    r.String("gpu_kind", &u.gpu_kind, true);
    ReadTier(r, &u.tier);
    r.String("pool", &u.pool, false);
    r.String("node", &u.node, false);
    r.Int("compute_milli", &compute, false, 1, kMilliPerGpu);
    r.Int("memory_milli", &memory, false, 1, kMilliPerGpu);
    u.compute_milli = static_cast<int32_t>(compute);
    u.memory_milli = static_cast<int32_t>(memory < 0 ? compute : memory);
    r.Int("start_s", &u.start_s, true, -kMaxTime, kMaxTime);
    r.Int("end_s", &u.end_s, true, -kMaxTime, kMaxTime);
    r.Int("lost_s", &u.lost_s, false, 0, kMaxTime);
    r.Double("usd_per_gpu_hour", &u.usd_per_gpu_hour, false, 0, 1e12);
    r.Double("list_usd_per_gpu_hour", &u.list_usd_per_gpu_hour, false, 0, 1e12);
    st = r.Finish();
    if (!st.ok()) return st;
    st = ledger.AddUsage(u);
    if (!st.ok()) return Status::Error(YamlWhere(source, use[i], fmt::format("usage[{}]", i)) + ": " + st.message());
  }
  return ledger;
}

}  // namespace tessera
