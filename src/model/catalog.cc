// Catalog parsing and lookup. The YAML schema is documented in docs/configuration.md ("GPU catalog").
// Every error names the source, the line and the field path (kinds[0].mig.profiles[2].usable_mib).
#include "model/catalog.h"

#include <algorithm>
#include <cctype>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "base/yaml_reader.h"

namespace tessera {

extern const char* const kDefaultCatalogYaml;  // catalog_data.cc

namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Non-empty text items (aliases, unverified_fields).
void TextList(FieldReader& r, std::string_view key, std::vector<std::string>* out) {
  r.StringList(key, out, false);
  for (const std::string& item : *out)
    if (r.ok() && item.empty()) r.Fail(key, "expected non-empty text items");
}

Status ParseStarts(const YAML::Node& starts, std::string_view source, const std::string& path, int mem,
                   MigProfile* p) {
  for (size_t i = 0; i < starts.size(); ++i) {
    const std::string at = fmt::format("{}[{}]", path, i);
    auto start = YamlInt(starts[i], source, at, 0, mem - 1);
    if (!start.ok()) return start.status();
    if (*start + p->memory_slices > mem)
      return Status::Error(fmt::format("{}: start {} + {} memory slices exceeds {}", YamlWhere(source, starts[i], at),
                                       *start, p->memory_slices, mem));
    if ((p->start_mask >> *start) & 1u)
      return Status::Error(fmt::format("{}: start {} listed twice", YamlWhere(source, starts[i], at), *start));
    p->start_mask = static_cast<uint8_t>(p->start_mask | (1u << *start));
  }
  return Status::Ok();
}

Result<MigProfile> ParseProfile(const YAML::Node& node, const GpuKind& kind, std::string_view source,
                                const std::string& path) {
  FieldReader r(node, source, path);
  MigProfile p;
  r.String("name", &p.name, true);
  if (r.ok() && p.name.empty()) r.Fail("name", "must not be empty");
  r.Int("profile_id", &p.profile_id, false, -1, 1 << 20);
  r.Int("compute_slices", &p.compute_slices, true, 1, kind.mig_compute_slices);
  r.Int("memory_slices", &p.memory_slices, true, 1, kind.mig_memory_slices);
  r.Int("usable_mib", &p.usable_mib, true, 1, kind.memory_mib);
  r.Int("sms", &p.sms, false, 0, kind.sms > 0 ? kind.sms : 1 << 20);
  r.Int("max_count", &p.max_count, true, 1, kind.mig_max_instances);
  p.media = p.name.size() > 3 && p.name.compare(p.name.size() - 3, 3, "+me") == 0;
  r.Bool("media", &p.media);
  r.Bool("unverified", &p.unverified);
  TextList(r, "unverified_fields", &p.unverified_fields);
  if (!p.unverified_fields.empty()) p.unverified = true;
  if (r.ok() && p.compute_slices > p.memory_slices)
    r.Fail("compute_slices", fmt::format("{} exceeds memory_slices {}", p.compute_slices, p.memory_slices));
  const YAML::Node starts = r.Seq("starts", /*required=*/true);
  if (r.ok() && starts.size() == 0) r.Fail("starts", "expected a non-empty list of slice indices");
  if (Status st = r.Finish(); !st.ok()) return st;
  if (Status st = ParseStarts(starts, source, r.PathOf("starts"), kind.mig_memory_slices, &p); !st.ok()) return st;
  return p;
}

// The `mig:` section of a kind: geometry, then the profiles.
Status ParseMig(const YAML::Node& mig, std::string_view source, const std::string& path, GpuKind* k) {
  FieldReader m(mig, source, path);
  k->mig_capable = true;
  // The geometry is a bitmask over memory slices in a uint8_t.
  m.Int("memory_slices", &k->mig_memory_slices, true, 1, 8);
  m.Int("compute_slices", &k->mig_compute_slices, true, 1, std::max(1, k->mig_memory_slices));
  m.Int("max_instances", &k->mig_max_instances, true, 1, std::max(1, k->mig_memory_slices));
  const YAML::Node profiles = m.Seq("profiles", /*required=*/true);
  if (m.ok() && profiles.size() == 0) m.Fail("profiles", "expected a non-empty list");
  if (Status st = m.Finish(); !st.ok()) return st;
  for (size_t i = 0; i < profiles.size(); ++i) {
    const std::string at = fmt::format("{}.profiles[{}]", path, i);
    Result<MigProfile> p = ParseProfile(profiles[i], *k, source, at);
    if (!p.ok()) return p.status();
    if (k->FindProfile(p->name) >= 0)
      return Status::Error(fmt::format("{}: profile '{}' listed twice", YamlWhere(source, profiles[i], at), p->name));
    k->profiles.push_back(std::move(p).value());
  }
  return Status::Ok();
}

Result<GpuKind> ParseKind(const YAML::Node& node, std::string_view source, const std::string& path) {
  FieldReader r(node, source, path);
  GpuKind k;
  r.String("id", &k.id, true);
  if (r.ok() && k.id.empty()) r.Fail("id", "must not be empty");
  TextList(r, "aliases", &k.aliases);
  r.String("family", &k.family, true);
  r.Int("memory_mib", &k.memory_mib, true, 1, int64_t{1} << 30);
  r.Int("sms", &k.sms, false, 0, 1 << 20);
  r.Double("bf16_tflops", &k.bf16_tflops, false, 0, 1e9);
  r.Bool("unverified", &k.unverified);
  TextList(r, "unverified_fields", &k.unverified_fields);
  r.String("notes", &k.notes, false);
  const YAML::Node mig = r.Child("mig");
  if (Status st = r.Finish(); !st.ok()) return st;
  if (mig.IsDefined() && !mig.IsNull())
    if (Status st = ParseMig(mig, source, r.PathOf("mig"), &k); !st.ok()) return st;
  return k;
}

// Parses a whole catalog document into kinds (ids unique within the document; aliases checked by the
// caller against the combined catalog).
Result<std::vector<GpuKind>> ParseKinds(std::string_view text, std::string_view source) {
  auto parsed = ParseYaml(text, source);
  if (!parsed.ok()) return parsed.status();
  const YAML::Node root = *parsed;
  if (!root.IsMap()) return Status::Error(YamlWhere(source, root, "") + ": expected a map with a 'kinds' list");
  FieldReader top(root, source, "");
  const YAML::Node kinds = top.Seq("kinds", /*required=*/true);
  if (Status st = top.Finish(); !st.ok()) return st;
  std::vector<GpuKind> out;
  std::set<std::string> ids;
  for (size_t i = 0; i < kinds.size(); ++i) {
    const std::string path = fmt::format("kinds[{}]", i);
    Result<GpuKind> k = ParseKind(kinds[i], source, path);
    if (!k.ok()) return k.status();
    if (!ids.insert(Lower(k->id)).second)
      return Status::Error(fmt::format("{}: kind '{}' listed twice", YamlWhere(source, kinds[i], path + ".id"), k->id));
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
