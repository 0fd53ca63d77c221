// `tessera mig profiles|layouts|check`: print the catalog's MIG geometry for one GPU kind.
// Exit codes: 0 ok / valid, 1 invalid layout (check) or kind not MIG-capable, 2 bad input (unknown kind,
// unreadable catalog file).
#include <fmt/format.h>

#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/file.h"
#include "cli/commands.h"
#include "model/catalog.h"
#include "model/mig.h"

namespace tessera::cli {
namespace {

struct MigOptions {
  std::string gpu;
  std::vector<std::string> catalogs;
  bool json = false;
  std::vector<std::string> instances;
};

// The default catalog plus every --catalog file, or an error naming the file.
Result<Catalog> LoadCatalog(const std::vector<std::string>& files) {
  Catalog catalog = Catalog::Default();
  for (const std::string& path : files) {
    Result<std::string> text = ReadFile(path);
    if (!text.ok()) return text.status();
    if (Status s = catalog.Merge(*text, path); !s.ok()) return s;
  }
  return catalog;
}

// Resolves --gpu; prints the error and sets exit code 2 on failure.
const GpuKind* ResolveKind(const Catalog& catalog, const std::string& gpu, int* exit_code) {
  const KindId id = catalog.Find(gpu);
  if (id == kNone) {
    std::cerr << fmt::format("error: unknown GPU kind '{}'; known kinds: {}\n", gpu, catalog.KnownIds());
    *exit_code = 2;
    return nullptr;
  }
  return &catalog.kind(id);
}

std::vector<int> Starts(const MigProfile& p) {
  std::vector<int> out;
  for (int s = 0; s < 8; ++s)
    if (p.AllowedStart(s)) out.push_back(s);
  return out;
}

// The kind named `gpu` in a loaded catalog; on error prints it, sets *exit_code to 2 and returns null.
const GpuKind* KindOf(const Result<Catalog>& catalog, const std::string& gpu, int* exit_code) {
  if (!catalog.ok()) {
    std::cerr << "error: " << catalog.error() << "\n";
    *exit_code = 2;
    return nullptr;
  }
  return ResolveKind(*catalog, gpu, exit_code);
}

std::string Join(const std::vector<std::string>& items, const char* sep) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : sep) + s;
  return out;
}

void RunProfiles(const MigOptions& o, int* exit_code) {
  Result<Catalog> catalog = LoadCatalog(o.catalogs);
  const GpuKind* kind = KindOf(catalog, o.gpu, exit_code);
  if (kind == nullptr) return;
  if (o.json) {
    nlohmann::json profiles = nlohmann::json::array();
    for (size_t i = 0; i < kind->profiles.size(); ++i) {
      const MigProfile& p = kind->profiles[i];
      profiles.push_back({{"name", p.name},
                          {"profile_id", p.profile_id},
                          {"compute_slices", p.compute_slices},
                          {"memory_slices", p.memory_slices},
                          {"usable_mib", p.usable_mib},
                          {"sms", p.sms},
                          {"compute_milli", kind->ProfileComputeMilli(static_cast<int>(i))},
                          {"max_count", p.max_count},
                          {"starts", Starts(p)},
                          {"media", p.media},
                          {"unverified", p.unverified},
                          {"unverified_fields", p.unverified_fields}});
    }
    nlohmann::json out = {{"gpu", kind->id},
                          {"family", kind->family},
                          {"memory_mib", kind->memory_mib},
                          {"sms", kind->sms},
                          {"mig_capable", kind->mig_capable},
                          {"memory_slices", kind->mig_memory_slices},
                          {"compute_slices", kind->mig_compute_slices},
                          {"max_instances", kind->mig_max_instances},
                          {"unverified", kind->unverified},
                          {"unverified_fields", kind->unverified_fields},
                          {"profiles", profiles}};
    std::cout << out.dump(2) << "\n";
    return;
  }
  if (!kind->mig_capable) {
    std::cout << fmt::format("{} ({}, {} MiB) is not MIG-capable: no profiles\n", kind->id, kind->family,
                             kind->memory_mib);
    return;
  }
  std::cout << fmt::format("{}: {} memory slices, {} compute slices, at most {} instances\n", kind->id,
                           kind->mig_memory_slices, kind->mig_compute_slices, kind->mig_max_instances);
  std::cout << fmt::format("{:<12} {:>3} {:>7} {:>7} {:>10} {:>4} {:>7} {:>3}  {:<15} {}\n", "PROFILE", "ID", "COMPUTE",
                           "MEMORY", "USABLE_MIB", "SMS", "MILLI", "MAX", "STARTS", "UNVERIFIED");
  for (size_t i = 0; i < kind->profiles.size(); ++i) {
    const MigProfile& p = kind->profiles[i];
    std::vector<std::string> starts;
    for (int s : Starts(p)) starts.push_back(std::to_string(s));
    std::string unverified = p.unverified ? (p.unverified_fields.empty() ? "yes" : Join(p.unverified_fields, ",")) : "";
    std::cout << fmt::format("{:<12} {:>3} {:>7} {:>7} {:>10} {:>4} {:>7} {:>3}  {:<15} {}\n", p.name, p.profile_id,
                             p.compute_slices, p.memory_slices, p.usable_mib, p.sms,
                             kind->ProfileComputeMilli(static_cast<int>(i)), p.max_count, "{" + Join(starts, ",") + "}",
                             unverified);
  }
}

void RunLayouts(const MigOptions& o, int* exit_code) {
  Result<Catalog> catalog = LoadCatalog(o.catalogs);
  const GpuKind* kind = KindOf(catalog, o.gpu, exit_code);
  if (kind == nullptr) return;
  if (!kind->mig_capable) {
    std::cerr << fmt::format("error: GPU kind '{}' is not MIG-capable\n", kind->id);
    *exit_code = 1;
    return;
  }
  const auto layouts = MaximalMigLayouts(*kind);
  if (o.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& layout : layouts) {
      nlohmann::json l = nlohmann::json::array();
      for (const MigInstance& in : layout)
        l.push_back({{"profile", kind->profiles[static_cast<size_t>(in.profile)].name}, {"start", in.start}});
      out.push_back(l);
    }
    std::cout << out.dump() << "\n";
    return;
  }
  for (const auto& layout : layouts) {
    std::vector<std::string> parts;
    for (const MigInstance& in : layout)
      parts.push_back(fmt::format("{}@{}", kind->profiles[static_cast<size_t>(in.profile)].name, in.start));
    std::cout << Join(parts, " + ") << "\n";
  }
  std::cout << fmt::format("{} maximal layouts on {} (media profiles excluded)\n", layouts.size(), kind->id);
}

void RunCheck(const MigOptions& o, int* exit_code) {
  Result<Catalog> catalog = LoadCatalog(o.catalogs);
  const GpuKind* kind = KindOf(catalog, o.gpu, exit_code);
  if (kind == nullptr) return;
  std::vector<MigInstance> layout;
  Status status;
  for (const std::string& text : o.instances) {
    Result<MigInstance> in = ParseMigInstance(*kind, text);
    if (!in.ok()) {
      status = in.status();
      break;
    }
    layout.push_back(*in);
  }
  if (status.ok()) status = CheckMigLayout(*kind, layout);
  if (status.ok()) {
    std::cout << "valid\n";
    *exit_code = 0;
  } else {
    std::cout << "invalid: " << status.message() << "\n";
    *exit_code = 1;
  }
}

}  // namespace

void RegisterMig(CLI::App& app, int* exit_code) {
  CLI::App* mig = app.add_subcommand("mig", "MIG profiles and layouts of a GPU kind");
  mig->require_subcommand(1);
  auto add_common = [](CLI::App* sub, const std::shared_ptr<MigOptions>& o) {
    sub->add_option("--gpu", o->gpu, "GPU kind id or alias (e.g. h100-80gb, NVIDIA-H100-80GB-HBM3)")->required();
    // One file per occurrence, so a following positional is never taken as a catalog.
    sub->add_option("--catalog", o->catalogs, "extra catalog YAML merged over the default (repeatable)")
        ->allow_extra_args(false);
  };

  auto profiles_opts = std::make_shared<MigOptions>();
  CLI::App* profiles = mig->add_subcommand("profiles", "list the MIG profiles of a GPU kind");
  add_common(profiles, profiles_opts);
  profiles->add_flag("--json", profiles_opts->json, "print JSON");
  profiles->callback([profiles_opts, exit_code] { RunProfiles(*profiles_opts, exit_code); });

  auto layouts_opts = std::make_shared<MigOptions>();
  CLI::App* layouts = mig->add_subcommand("layouts", "list every maximal MIG layout (media profiles excluded)");
  add_common(layouts, layouts_opts);
  layouts->add_flag("--json", layouts_opts->json, "print a JSON array of layouts of {profile, start}");
  layouts->callback([layouts_opts, exit_code] { RunLayouts(*layouts_opts, exit_code); });

  auto check_opts = std::make_shared<MigOptions>();
  CLI::App* check = mig->add_subcommand("check", "check that PROFILE@START instances can coexist on one GPU");
  add_common(check, check_opts);
  check->add_option("instances", check_opts->instances, "instances as PROFILE@START, e.g. 3g.40gb@4");
  check->callback([check_opts, exit_code] { RunCheck(*check_opts, exit_code); });
}

}  // namespace tessera::cli
