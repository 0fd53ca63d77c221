// MIG geometry over a bitmask of memory slices (hardware-facts.md 1.3). Profiles, starts and counts come
// from the catalog, so the same code serves 8-slice GPUs and the 4-slice A30.
#include "model/mig.h"

#include <algorithm>
#include <charconv>

#include <fmt/format.h>

namespace tessera {
namespace {

std::string Label(const GpuKind& kind, const MigInstance& in) {
  return fmt::format("{}@{}", kind.profiles[static_cast<size_t>(in.profile)].name, in.start);
}

std::string StartList(const MigProfile& p) {
  std::string out;
  for (int s = 0; s < 8; ++s)
    if (p.AllowedStart(s)) out += (out.empty() ? "" : ", ") + std::to_string(s);
  return out;
}

// Instance order of a layout: by start, then profile index.
bool ByStart(const MigInstance& a, const MigInstance& b) {
  return a.start != b.start ? a.start < b.start : a.profile < b.profile;
}

}  // namespace

Status CheckMigLayout(const GpuKind& kind, const std::vector<MigInstance>& instances) {
  if (!kind.mig_capable) return Status::Error(fmt::format("GPU kind '{}' is not MIG-capable", kind.id));
  const int n_profiles = static_cast<int>(kind.profiles.size());
  // 1. Each instance names a known profile at one of its allowed starts.
  for (const MigInstance& in : instances) {
    if (in.profile < 0 || in.profile >= n_profiles)
      return Status::Error(fmt::format("unknown profile index {} for GPU kind '{}'", in.profile, kind.id));
    const MigProfile& p = kind.profiles[static_cast<size_t>(in.profile)];
    if (!p.AllowedStart(in.start))
      return Status::Error(fmt::format("{}: {} may not start at memory slice {} (allowed starts: {})",
                                       Label(kind, in), p.name, in.start, StartList(p)));
  }
  // 2. No two instances share a memory slice.
  for (size_t i = 0; i < instances.size(); ++i) {
    const uint8_t mi = kind.profiles[static_cast<size_t>(instances[i].profile)].MaskAt(instances[i].start);
    for (size_t j = i + 1; j < instances.size(); ++j) {
      const uint8_t mj = kind.profiles[static_cast<size_t>(instances[j].profile)].MaskAt(instances[j].start);
      if (const unsigned both = mi & mj; both != 0) {
        int slice = 0;
        while (!((both >> slice) & 1u)) ++slice;
        return Status::Error(fmt::format("{} and {} overlap on memory slice {}", Label(kind, instances[i]),
                                         Label(kind, instances[j]), slice));
      }
    }
  }
  // 3. Per-profile and per-GPU instance limits.
  std::vector<int> count(kind.profiles.size(), 0);
  for (const MigInstance& in : instances) ++count[static_cast<size_t>(in.profile)];
  for (size_t p = 0; p < count.size(); ++p) {
    if (count[p] > kind.profiles[p].max_count)
      return Status::Error(fmt::format("{} instances of {} exceed its max count {}", count[p], kind.profiles[p].name,
                                       kind.profiles[p].max_count));
  }
  if (static_cast<int>(instances.size()) > kind.mig_max_instances)
    return Status::Error(fmt::format("{} instances exceed the GPU's max of {}", instances.size(),
                                     kind.mig_max_instances));
  return Status::Ok();
}

bool CanAddInstance(const GpuKind& kind, const std::vector<MigInstance>& existing, MigInstance instance) {
  if (!kind.mig_capable || instance.profile < 0 || instance.profile >= static_cast<int>(kind.profiles.size()))
    return false;
  const MigProfile& p = kind.profiles[static_cast<size_t>(instance.profile)];
  if (!p.AllowedStart(instance.start)) return false;
  if (static_cast<int>(existing.size()) >= kind.mig_max_instances) return false;
  unsigned used = 0;
  int same = 0;
  for (const MigInstance& e : existing) {
    used |= kind.profiles[static_cast<size_t>(e.profile)].MaskAt(e.start);
    if (e.profile == instance.profile) ++same;
  }
  return (used & p.MaskAt(instance.start)) == 0 && same < p.max_count;
}

std::vector<std::vector<MigInstance>> MaximalMigLayouts(const GpuKind& kind) {
  std::vector<std::vector<MigInstance>> out;
  if (!kind.mig_capable) return out;
  // Candidates: every (non-media profile, allowed start), in (start, profile) order.
  struct Cand {
    MigInstance in;
    uint8_t mask;
  };
  std::vector<Cand> cands;
  for (int s = 0; s < kind.mig_memory_slices; ++s)
    for (size_t p = 0; p < kind.profiles.size(); ++p)
      if (!kind.profiles[p].media && kind.profiles[p].AllowedStart(s))
        cands.push_back({{static_cast<int>(p), s}, kind.profiles[p].MaskAt(s)});

  std::vector<int> count(kind.profiles.size(), 0);
  std::vector<MigInstance> chosen;
  auto fits = [&](const Cand& c, unsigned used) {
    return (used & c.mask) == 0 && count[static_cast<size_t>(c.in.profile)] < kind.profiles[static_cast<size_t>(c.in.profile)].max_count &&
           static_cast<int>(chosen.size()) < kind.mig_max_instances;
  };
  // Each valid set is visited once (candidates taken in increasing index); a set is recorded when no
  // candidate at all fits any more, which is exactly maximality.
  auto dfs = [&](auto&& self, unsigned used, size_t from) -> void {
    bool any_fits = false;
    for (size_t k = 0; k < cands.size(); ++k) {
      if (!fits(cands[k], used)) continue;
      any_fits = true;
      if (k < from) continue;
      chosen.push_back(cands[k].in);
      ++count[static_cast<size_t>(cands[k].in.profile)];
      self(self, used | cands[k].mask, k + 1);
      --count[static_cast<size_t>(cands[k].in.profile)];
      chosen.pop_back();
    }
    if (!any_fits) out.push_back(chosen);
  };
  dfs(dfs, 0u, 0);
  for (auto& layout : out) std::sort(layout.begin(), layout.end(), ByStart);
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end(), ByStart);
  });
  return out;
}

Result<MigInstance> ParseMigInstance(const GpuKind& kind, const std::string& text) {
  const size_t at = text.rfind('@');
  if (at == std::string::npos || at == 0 || at + 1 == text.size())
    return Status::Error(fmt::format("'{}': expected PROFILE@START, e.g. 3g.40gb@4", text));
  const std::string name = text.substr(0, at);
  const int profile = kind.FindProfile(name);
  if (profile < 0) {
    std::string names;
    for (const MigProfile& p : kind.profiles) names += (names.empty() ? "" : ", ") + p.name;
    return Status::Error(fmt::format("'{}': unknown profile '{}' for GPU kind '{}' (profiles: {})", text, name, kind.id,
                                     names.empty() ? "none, not MIG-capable" : names));
  }
  int start = -1;
  const char* first = text.data() + at + 1;
  const char* last = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(first, last, start);
  if (ec != std::errc() || ptr != last || start < 0)
    return Status::Error(fmt::format("'{}': start '{}' is not a memory-slice index", text, text.substr(at + 1)));
  return MigInstance{profile, start};
}

Result<GpuMigLayout> ParseGpuMigLayout(const GpuKind& kind, const std::string& text) {
  if (text == "disabled") return GpuMigLayout{false, {}};
  if (!kind.mig_capable) return Status::Error(fmt::format("GPU kind '{}' is not MIG-capable", kind.id));
  GpuMigLayout out;
  for (size_t from = 0; from < text.size();) {
    const size_t comma = std::min(text.find(',', from), text.size());
    auto instance = ParseMigInstance(kind, text.substr(from, comma - from));
    if (!instance.ok()) return instance.status();
    out.instances.push_back(*instance);
    from = comma + 1;
  }
  if (Status st = CheckMigLayout(kind, out.instances); !st.ok()) return st;
  std::sort(out.instances.begin(), out.instances.end(), ByStart);
  return out;
}

std::string FormatGpuMigLayout(const GpuKind& kind, const GpuMigLayout& layout) {
  if (!layout.enabled) return "disabled";
  std::vector<MigInstance> sorted = layout.instances;
  std::sort(sorted.begin(), sorted.end(), ByStart);
  std::string out;
  for (const MigInstance& m : sorted)
    out += fmt::format("{}{}@{}", out.empty() ? "" : ",", kind.profiles[static_cast<size_t>(m.profile)].name, m.start);
  return out;
}

}  // namespace tessera
