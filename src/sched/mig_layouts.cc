#include "sched/mig_layouts.h"

#include <algorithm>
#include <fmt/format.h>
#include <functional>

namespace tessera {

std::vector<MigInstance> PlaceProfiles(const GpuKind& kind, std::vector<int> profiles) {
  std::sort(profiles.begin(), profiles.end(), [&](int a, int b) {
    return kind.profiles[a].memory_slices > kind.profiles[b].memory_slices;
  });
  std::vector<MigInstance> chosen;
  std::function<bool(size_t)> rec = [&](size_t i) -> bool {
    if (i == profiles.size()) return true;
    for (int s = 0; s < kind.mig_memory_slices; ++s) {
      MigInstance m{profiles[i], s};
      if (!kind.profiles[profiles[i]].AllowedStart(s) || !CanAddInstance(kind, chosen, m)) continue;
      chosen.push_back(m);
      if (rec(i + 1)) return true;
      chosen.pop_back();
    }
    return false;
  };
  if (!rec(0)) return {};
  std::sort(chosen.begin(), chosen.end(), [](const MigInstance& a, const MigInstance& b) { return a.start < b.start; });
  return chosen;
}

namespace {

// "<n>x<profile>-<n>x<profile>..." (the names `tessera k8s mig-config` gives, profiles as in the catalog,
// "+me" written ".me") -> profile indices.
Result<std::vector<int>> TesseraConfigProfiles(const GpuKind& kind, std::string_view rest) {
  std::vector<int> want;
  while (!rest.empty()) {
    const size_t dash = rest.find('-');
    const std::string_view part = rest.substr(0, dash);
    rest = dash == std::string_view::npos ? std::string_view() : rest.substr(dash + 1);
    const size_t x = part.find('x');
    int n = 0;
    for (char c : part.substr(0, x)) n = c >= '0' && c <= '9' && n < 100 ? n * 10 + (c - '0') : -1000;
    if (x == std::string_view::npos || x == 0 || n <= 0) return Status::Error(fmt::format("'{}' is not <n>x<profile>", part));
    std::string prof(part.substr(x + 1));
    if (prof.size() > 3 && prof.substr(prof.size() - 3) == ".me") prof = prof.substr(0, prof.size() - 3) + "+me";
    const int idx = kind.FindProfile(prof);
    if (idx < 0) return Status::Error(fmt::format("GPU kind '{}' has no MIG profile '{}'", kind.id, prof));
    want.insert(want.end(), n, idx);
  }
  if (want.empty()) return Status::Error("no profiles");
  return want;
}

}  // namespace

Result<std::vector<MigInstance>> NamedMigLayout(const GpuKind& kind, std::string_view name) {
  if (!kind.mig_capable) return Status::Error(fmt::format("GPU kind '{}' is not MIG-capable", kind.id));
  if (name == "all-disabled" || name == "all-enabled") return std::vector<MigInstance>{};
  std::vector<int> want;
  if (name == "all-balanced") {
    // 2 x smallest 1g + 1 x 2g + 1 x 3g on 8-slice GPUs; 2 x 1g + 1 x 2g on A30 (hardware-facts.md 2.1).
    int one = -1, two = -1, three = -1;
    for (int i = 0; i < static_cast<int>(kind.profiles.size()); ++i) {
      const MigProfile& p = kind.profiles[i];
      if (p.media) continue;
      if (p.compute_slices == 1 && p.memory_slices == 1 && one < 0) one = i;
      if (p.compute_slices == 2 && p.memory_slices == 2 && two < 0) two = i;
      if (p.compute_slices == 3 && three < 0) three = i;
    }
    if (one < 0 || two < 0) return Status::Error(fmt::format("no all-balanced layout for '{}'", kind.id));
    want = {one, one, two};
    if (kind.mig_memory_slices == 8) {
      if (three < 0) return Status::Error(fmt::format("no all-balanced layout for '{}'", kind.id));
      want.push_back(three);
    }
  } else if (name.substr(0, 4) == "all-") {
    std::string prof(name.substr(4));
    // mig-parted writes "+me" profiles as ".me" in config names.
    if (prof.size() > 3 && prof.substr(prof.size() - 3) == ".me") prof = prof.substr(0, prof.size() - 3) + "+me";
    int idx = kind.FindProfile(prof);
    if (idx < 0) return Status::Error(fmt::format("GPU kind '{}' has no MIG profile '{}'", kind.id, prof));
    // As many as fit, up to the max count.
    std::vector<MigInstance> placed;
    for (int s = 0; s < kind.mig_memory_slices; ++s) {
      MigInstance m{idx, s};
      if (kind.profiles[idx].AllowedStart(s) && CanAddInstance(kind, placed, m)) placed.push_back(m);
    }
    return placed;
  } else if (name.substr(0, 8) == "tessera-") {
    auto counts = TesseraConfigProfiles(kind, name.substr(8));
    if (!counts.ok()) return Status::Error(fmt::format("MIG config '{}': {}", name, counts.error()));
    want = std::move(counts).value();
  } else {
    return Status::Error(fmt::format("unknown MIG config '{}' (use all-disabled, all-enabled, all-balanced, "
                                     "all-<profile> or tessera-<n>x<profile>-...)", name));
  }
  auto placed = PlaceProfiles(kind, want);
  if (placed.empty()) return Status::Error(fmt::format("config '{}' does not fit '{}'", name, kind.id));
  return placed;
}

int MigFreedom(const GpuKind& kind, uint8_t used_mask) {
  int freedom = 0;
  for (const MigProfile& p : kind.profiles) {
    if (p.media) continue;
    for (int s = 0; s < kind.mig_memory_slices; ++s)
      if (p.AllowedStart(s) && !(p.MaskAt(s) & used_mask)) freedom += p.memory_slices;
  }
  return freedom;
}

}  // namespace tessera
