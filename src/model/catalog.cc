// Catalog parsing and lookup. The YAML schema is documented in docs/configuration.md ("GPU catalog").
// Every error names the source, the line, the kind, the profile (when inside one) and the field.
#include "model/catalog.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <optional>
#include <set>

#include <fmt/format.h>

namespace tessera {

extern const char* const kDefaultCatalogYaml;  // catalog_data.cc

namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Error context: "source:line: kind 'x': profile 'y': ".
class Ctx {
 public:
  Ctx(std::string_view source) : source_(source) {}
  Ctx Kind(const std::string& id) const {
    Ctx c = *this;
    c.path_ += fmt::format("kind '{}': ", id);
    return c;
  }
  Ctx Profile(const std::string& name) const {
    Ctx c = *this;
    c.path_ += fmt::format("profile '{}': ", name);
    return c;
  }
  Status Error(const YAML::Node& at, const std::string& msg) const {
    std::string where(source_);
    if (at.IsDefined() && at.Mark().line >= 0) where += fmt::format(":{}", at.Mark().line + 1);
    return Status::Error(fmt::format("{}: {}{}", where, path_, msg));
  }

 private:
  std::string_view source_;
  std::string path_;
};

// Rejects keys outside `allowed` (catches typos such as "memory_mb").
Status CheckKeys(const YAML::Node& map, std::initializer_list<const char*> allowed, const Ctx& ctx) {
  for (const auto& kv : map) {
    std::string key = kv.first.Scalar();
    if (std::none_of(allowed.begin(), allowed.end(), [&](const char* a) { return key == a; })) {
      std::string list;
      for (const char* a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
      return ctx.Error(kv.first, fmt::format("unknown field '{}' (expected one of: {})", key, list));
    }
  }
  return Status::Ok();
}

// Reads scalar `key` of `map` into `*out`. Missing: error when `required`, else `*out` is left alone.
template <typename T>
Status Get(const YAML::Node& map, const char* key, bool required, const Ctx& ctx, T* out) {
  const YAML::Node n = map[key];
  if (!n.IsDefined() || n.IsNull()) {
    if (required) return ctx.Error(map, fmt::format("missing field '{}'", key));
    return Status::Ok();
  }
  if (!n.IsScalar() || !YAML::convert<T>::decode(n, *out)) {
    return ctx.Error(n, fmt::format("field '{}': cannot read '{}' as {}", key, n.IsScalar() ? n.Scalar() : "?",
                                    std::is_same_v<T, bool>          ? "true/false"
                                    : std::is_floating_point_v<T>    ? "a number"
                                    : std::is_integral_v<T>          ? "an integer"
                                                                     : "text"));
  }
  return Status::Ok();
}

Status GetStrings(const YAML::Node& map, const char* key, const Ctx& ctx, std::vector<std::string>* out) {
  const YAML::Node n = map[key];
  if (!n.IsDefined() || n.IsNull()) return Status::Ok();
  if (!n.IsSequence()) return ctx.Error(n, fmt::format("field '{}': expected a list", key));
  for (const auto& item : n) {
    if (!item.IsScalar() || item.Scalar().empty())
      return ctx.Error(item, fmt::format("field '{}': expected non-empty text items", key));
    out->push_back(item.Scalar());
  }
  return Status::Ok();
}

Result<MigProfile> ParseProfile(const YAML::Node& node, const GpuKind& kind, const Ctx& kctx) {
  if (!node.IsMap()) return kctx.Error(node, "profile: expected a mapping");
  MigProfile p;
  if (Status s = Get(node, "name", true, kctx, &p.name); !s.ok()) return s;
  if (p.name.empty()) return kctx.Error(node, "profile: empty 'name'");
  const Ctx ctx = kctx.Profile(p.name);
  if (Status s = CheckKeys(node,
                           {"name", "profile_id", "compute_slices", "memory_slices", "usable_mib", "sms",
                            "max_count", "starts", "media", "unverified", "unverified_fields"},
                           ctx);
      !s.ok())
    return s;
  if (Status s = Get(node, "profile_id", false, ctx, &p.profile_id); !s.ok()) return s;
  if (Status s = Get(node, "compute_slices", true, ctx, &p.compute_slices); !s.ok()) return s;
  if (Status s = Get(node, "memory_slices", true, ctx, &p.memory_slices); !s.ok()) return s;
  if (Status s = Get(node, "usable_mib", true, ctx, &p.usable_mib); !s.ok()) return s;
  if (Status s = Get(node, "sms", false, ctx, &p.sms); !s.ok()) return s;
  if (Status s = Get(node, "max_count", true, ctx, &p.max_count); !s.ok()) return s;
  p.media = p.name.size() > 3 && p.name.compare(p.name.size() - 3, 3, "+me") == 0;
  if (Status s = Get(node, "media", false, ctx, &p.media); !s.ok()) return s;
  if (Status s = Get(node, "unverified", false, ctx, &p.unverified); !s.ok()) return s;
  if (Status s = GetStrings(node, "unverified_fields", ctx, &p.unverified_fields); !s.ok()) return s;
  if (!p.unverified_fields.empty()) p.unverified = true;

  const int mem = kind.mig_memory_slices;
  if (p.profile_id < -1) return ctx.Error(node["profile_id"], "profile_id must be >= 0 (or -1 = unknown)");
  if (p.memory_slices < 1 || p.memory_slices > mem)
    return ctx.Error(node["memory_slices"], fmt::format("memory_slices {} outside 1..{}", p.memory_slices, mem));
  if (p.compute_slices < 1 || p.compute_slices > kind.mig_compute_slices)
    return ctx.Error(node["compute_slices"],
                     fmt::format("compute_slices {} outside 1..{}", p.compute_slices, kind.mig_compute_slices));
  if (p.compute_slices > p.memory_slices)
    return ctx.Error(node["compute_slices"], fmt::format("compute_slices {} exceeds memory_slices {}",
                                                         p.compute_slices, p.memory_slices));
  if (p.usable_mib <= 0 || p.usable_mib > kind.memory_mib)
    return ctx.Error(node["usable_mib"],
                     fmt::format("usable_mib {} outside 1..{} (the kind's memory_mib)", p.usable_mib, kind.memory_mib));
  if (p.sms < 0 || (kind.sms > 0 && p.sms > kind.sms))
    return ctx.Error(node["sms"], fmt::format("sms {} outside 0..{} (the kind's sms)", p.sms, kind.sms));
  if (p.max_count < 1 || p.max_count > kind.mig_max_instances)
    return ctx.Error(node["max_count"], fmt::format("max_count {} outside 1..{} (the kind's max_instances)",
                                                    p.max_count, kind.mig_max_instances));
  const YAML::Node starts = node["starts"];
  if (!starts.IsDefined() || !starts.IsSequence() || starts.size() == 0)
    return ctx.Error(starts.IsDefined() ? starts : node, "field 'starts': expected a non-empty list of slice indices");
  for (const auto& s : starts) {
    int start = 0;
    if (!s.IsScalar() || !YAML::convert<int>::decode(s, start))
      return ctx.Error(s, fmt::format("field 'starts': cannot read '{}' as an integer", s.IsScalar() ? s.Scalar() : "?"));
    if (start < 0 || start >= mem)
      return ctx.Error(s, fmt::format("start {} outside 0..{}", start, mem - 1));
    if (start + p.memory_slices > mem)
      return ctx.Error(s, fmt::format("start {} + {} memory slices exceeds {}", start, p.memory_slices, mem));
    if ((p.start_mask >> start) & 1u) return ctx.Error(s, fmt::format("start {} listed twice", start));
    p.start_mask = static_cast<uint8_t>(p.start_mask | (1u << start));
  }
  return p;
}

Result<GpuKind> ParseKind(const YAML::Node& node, const Ctx& root) {
  if (!node.IsMap()) return root.Error(node, "kind: expected a mapping");
  GpuKind k;
  if (Status s = Get(node, "id", true, root, &k.id); !s.ok()) return s;
  if (k.id.empty()) return root.Error(node, "kind: empty 'id'");
  const Ctx ctx = root.Kind(k.id);
  if (Status s = CheckKeys(node,
                           {"id", "aliases", "family", "memory_mib", "sms", "bf16_tflops", "mig", "unverified",
                            "unverified_fields", "notes"},
                           ctx);
      !s.ok())
    return s;
  if (Status s = GetStrings(node, "aliases", ctx, &k.aliases); !s.ok()) return s;
  if (Status s = Get(node, "family", true, ctx, &k.family); !s.ok()) return s;
  if (Status s = Get(node, "memory_mib", true, ctx, &k.memory_mib); !s.ok()) return s;
  if (Status s = Get(node, "sms", false, ctx, &k.sms); !s.ok()) return s;
  if (Status s = Get(node, "bf16_tflops", false, ctx, &k.bf16_tflops); !s.ok()) return s;
  if (Status s = Get(node, "unverified", false, ctx, &k.unverified); !s.ok()) return s;
  if (Status s = GetStrings(node, "unverified_fields", ctx, &k.unverified_fields); !s.ok()) return s;
  if (Status s = Get(node, "notes", false, ctx, &k.notes); !s.ok()) return s;
  if (k.memory_mib <= 0) return ctx.Error(node["memory_mib"], fmt::format("memory_mib {} must be > 0", k.memory_mib));
  if (k.sms < 0) return ctx.Error(node["sms"], fmt::format("sms {} must be >= 0", k.sms));
  if (!(k.bf16_tflops >= 0))
    return ctx.Error(node["bf16_tflops"], fmt::format("bf16_tflops {} must be >= 0", k.bf16_tflops));

  const YAML::Node mig = node["mig"];
  if (!mig.IsDefined() || mig.IsNull()) return k;
  if (!mig.IsMap()) return ctx.Error(mig, "field 'mig': expected a mapping");
  if (Status s = CheckKeys(mig, {"memory_slices", "compute_slices", "max_instances", "profiles"}, ctx); !s.ok())
    return s;
  k.mig_capable = true;
  if (Status s = Get(mig, "memory_slices", true, ctx, &k.mig_memory_slices); !s.ok()) return s;
  if (Status s = Get(mig, "compute_slices", true, ctx, &k.mig_compute_slices); !s.ok()) return s;
  if (Status s = Get(mig, "max_instances", true, ctx, &k.mig_max_instances); !s.ok()) return s;
  // The geometry is a bitmask over memory slices in a uint8_t.
  if (k.mig_memory_slices < 1 || k.mig_memory_slices > 8)
    return ctx.Error(mig["memory_slices"], fmt::format("mig memory_slices {} outside 1..8", k.mig_memory_slices));
  if (k.mig_compute_slices < 1 || k.mig_compute_slices > k.mig_memory_slices)
    return ctx.Error(mig["compute_slices"], fmt::format("mig compute_slices {} outside 1..{} (memory_slices)",
                                                        k.mig_compute_slices, k.mig_memory_slices));
  if (k.mig_max_instances < 1 || k.mig_max_instances > k.mig_memory_slices)
    return ctx.Error(mig["max_instances"], fmt::format("mig max_instances {} outside 1..{} (memory_slices)",
                                                       k.mig_max_instances, k.mig_memory_slices));
  const YAML::Node profiles = mig["profiles"];
  if (!profiles.IsDefined() || !profiles.IsSequence() || profiles.size() == 0)
    return ctx.Error(profiles.IsDefined() ? profiles : mig, "field 'profiles': expected a non-empty list");
  for (const auto& pn : profiles) {
    Result<MigProfile> p = ParseProfile(pn, k, ctx);
    if (!p.ok()) return p.status();
    if (k.FindProfile(p->name) >= 0) return ctx.Error(pn, fmt::format("profile '{}' listed twice", p->name));
    k.profiles.push_back(std::move(p).value());
  }
  return k;
}

// Parses a whole catalog document into kinds (ids unique within the document; aliases checked by the
// caller against the combined catalog).
Result<std::vector<GpuKind>> ParseKinds(std::string_view text, std::string_view source) {
  const Ctx ctx(source);
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::ParserException& e) {
    return Status::Error(fmt::format("{}:{}: YAML syntax error: {}", source, e.mark.line + 1, e.msg));
  }
  if (!root.IsMap()) return Status::Error(fmt::format("{}: expected a mapping with a 'kinds' list", source));
  if (Status s = CheckKeys(root, {"kinds"}, ctx); !s.ok()) return s;
  const YAML::Node kinds = root["kinds"];
  if (!kinds.IsDefined() || !kinds.IsSequence()) return ctx.Error(root, "field 'kinds': expected a list");
  std::vector<GpuKind> out;
  std::set<std::string> ids;
  for (const auto& kn : kinds) {
    Result<GpuKind> k = ParseKind(kn, ctx);
    if (!k.ok()) return k.status();
    if (!ids.insert(Lower(k->id)).second) return ctx.Error(kn, fmt::format("kind '{}' listed twice", k->id));
    out.push_back(std::move(k).value());
  }
  return out;
}

// Rebuilds the lower-cased name index; errors when one name maps to two kinds.
Status BuildIndex(const std::vector<GpuKind>& kinds, std::string_view source, std::map<std::string, KindId>* index) {
  index->clear();
  for (size_t i = 0; i < kinds.size(); ++i) {
    const auto id = static_cast<KindId>(i);
    std::vector<std::string> names{kinds[i].id};
    names.insert(names.end(), kinds[i].aliases.begin(), kinds[i].aliases.end());
    for (const std::string& name : names) {
      auto [it, inserted] = index->emplace(Lower(name), id);
      if (!inserted && it->second != id) {
        return Status::Error(fmt::format("{}: kind '{}': field 'aliases': name '{}' already names kind '{}'", source,
                                         kinds[i].id, name, kinds[static_cast<size_t>(it->second)].id));
      }
    }
  }
  return Status::Ok();
}

}  // namespace

int GpuKind::FindProfile(std::string_view name) const {
  for (size_t i = 0; i < profiles.size(); ++i)
    if (profiles[i].name == name) return static_cast<int>(i);
  return -1;
}

int GpuKind::ProfileComputeMilli(int profile_index) const {
  const MigProfile& p = profiles[static_cast<size_t>(profile_index)];
  if (p.sms > 0 && sms > 0) return static_cast<int>(int64_t{p.sms} * kMilliPerGpu / sms);
  if (mig_compute_slices > 0) return p.compute_slices * kMilliPerGpu / mig_compute_slices;
  return 0;
}

const Catalog& Catalog::Default() {
  static const Catalog* const kCatalog = [] {
    Result<Catalog> c = FromYaml(kDefaultCatalogYaml, "default catalog");
    TESSERA_CHECK(c.ok(), c.error());
    return new Catalog(std::move(c).value());
  }();
  return *kCatalog;
}

Result<Catalog> Catalog::FromYaml(std::string_view text, std::string_view source) {
  Catalog c;
  if (Status s = c.Merge(text, source); !s.ok()) return s;
  return c;
}

Status Catalog::Merge(std::string_view text, std::string_view source) {
  Result<std::vector<GpuKind>> parsed = ParseKinds(text, source);
  if (!parsed.ok()) return parsed.status();
  std::vector<GpuKind> kinds = kinds_;  // work on a copy: a failed merge leaves the catalog unchanged
  for (GpuKind& k : parsed.value()) {
    auto it = std::find_if(kinds.begin(), kinds.end(), [&](const GpuKind& e) { return Lower(e.id) == Lower(k.id); });
    if (it != kinds.end()) {
      *it = std::move(k);  // replacing keeps the kind's id (index) stable
    } else {
      kinds.push_back(std::move(k));
    }
  }
  if (kinds.size() > static_cast<size_t>(INT16_MAX)) return Status::Error(fmt::format("{}: too many kinds", source));
  std::map<std::string, KindId> index;
  if (Status s = BuildIndex(kinds, source, &index); !s.ok()) return s;
  kinds_ = std::move(kinds);
  index_ = std::move(index);
  return Status::Ok();
}

KindId Catalog::Find(std::string_view id_or_alias) const {
  auto it = index_.find(Lower(id_or_alias));
  return it == index_.end() ? static_cast<KindId>(kNone) : it->second;
}

std::string Catalog::KnownIds() const {
  std::string out;
  for (const GpuKind& k : kinds_) out += (out.empty() ? "" : ", ") + k.id;
  return out;
}

}  // namespace tessera
