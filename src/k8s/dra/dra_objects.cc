#include "k8s/dra/dra_objects.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <nlohmann/json.hpp>

#include "k8s/api/objects.h"
#include "k8s/api/quantity.h"

namespace tessera {
namespace {

using json = nlohmann::json;

// "kind name" for error messages ("ResourceSlice a100-0-gpu.nvidia.com-x7k2p").
std::string Who(const std::string& kind, const json& obj) {
  const json* meta = Field(obj, "metadata");
  std::string name = meta != nullptr ? StringField(*meta, "name") : std::string();
  std::string ns = meta != nullptr ? StringField(*meta, "namespace") : std::string();
  return fmt::format("{} {}{}", kind, ns.empty() ? "" : ns + "/", name.empty() ? "(unnamed)" : name);
}

Status Bad(const std::string& who, const std::string& field, const std::string& why) {
  return Status::Error(fmt::format("{}: {}: {}", who, field, why));
}

Result<int64_t> QuantityOf(const json& v, const std::string& who, const std::string& field) {
  const json* q = v.is_object() ? Field(v, "value") : &v;
  if (q == nullptr) return Bad(who, field + ".value", "missing");
  if (!q->is_string() && !q->is_number_integer()) return Bad(who, field + ".value", "not a quantity");
  auto r = ParseQuantityMilli(q->is_string() ? q->get<std::string>() : q->dump());
  if (!r.ok()) return Bad(who, field + ".value", r.error());
  return *r;
}

Result<std::map<std::string, int64_t>> QuantityMap(const json* m, const std::string& who,
                                                   const std::string& field) {
  std::map<std::string, int64_t> out;
  if (m == nullptr) return out;
  if (!m->is_object()) return Bad(who, field, "not an object");
  for (const auto& [k, v] : m->items()) {
    auto q = QuantityOf(v, who, fmt::format("{}[{}]", field, k));
    if (!q.ok()) return q.status();
    out[k] = *q;
  }
  return out;
}

Result<DraAttribute> AttributeOf(const json& a, const std::string& who, const std::string& field) {
  if (!a.is_object()) return Bad(who, field, "not an object");
  std::vector<DraAttribute> found;
  if (const json* v = Field(a, "string"); v != nullptr) {
    if (!v->is_string()) return Bad(who, field + ".string", "not a string");
    found.emplace_back(v->get<std::string>());
  }
  if (const json* v = Field(a, "int"); v != nullptr) {
    if (!v->is_number_integer()) return Bad(who, field + ".int", "not an integer");
    found.emplace_back(v->get<int64_t>());
  }
  if (const json* v = Field(a, "bool"); v != nullptr) {
    if (!v->is_boolean()) return Bad(who, field + ".bool", "not a boolean");
    found.emplace_back(v->get<bool>());
  }
  if (const json* v = Field(a, "version"); v != nullptr) {
    auto ver = v->is_string() ? ParseDraVersion(v->get<std::string>())
                              : Result<DraVersion>(Status::Error("not a string"));
    if (!ver.ok()) return Bad(who, field + ".version", ver.error());
    found.emplace_back(*ver);
  }
  if (found.size() != 1) return Bad(who, field, "exactly one of int, bool, string, version must be given");
  return found[0];
}

Result<DraDevice> DeviceOf(const json& d, const std::string& who, const std::string& field) {
  if (!d.is_object()) return Bad(who, field, "not an object");
  DraDevice dev;
  dev.name = StringField(d, "name");
  if (dev.name.empty()) return Bad(who, field + ".name", "missing");
  const std::string at = fmt::format("{} ({})", field, dev.name);
  if (const json* attrs = Field(d, "attributes"); attrs != nullptr) {
    if (!attrs->is_object()) return Bad(who, at + ".attributes", "not an object");
    for (const auto& [k, v] : attrs->items()) {
      auto a = AttributeOf(v, who, fmt::format("{}.attributes[{}]", at, k));
      if (!a.ok()) return a.status();
      dev.attributes[k] = *a;
    }
  }
  auto caps = QuantityMap(Field(d, "capacity"), who, at + ".capacity");
  if (!caps.ok()) return caps.status();
  dev.capacity_milli = *caps;
  if (const json* cc = Field(d, "consumesCounters"); cc != nullptr) {
    if (!cc->is_array()) return Bad(who, at + ".consumesCounters", "not a list");
    for (size_t j = 0; j < cc->size(); ++j) {
      const std::string f = fmt::format("{}.consumesCounters[{}]", at, j);
      DraCounterConsumption c;
      c.counter_set = StringField((*cc)[j], "counterSet");
      if (c.counter_set.empty()) return Bad(who, f + ".counterSet", "missing");
      auto counters = QuantityMap(Field((*cc)[j], "counters"), who, f + ".counters");
      if (!counters.ok()) return counters.status();
      c.counters_milli = *counters;
      dev.consumes.push_back(std::move(c));
    }
  }
  if (const json* m = Field(d, "allowMultipleAllocations"); m != nullptr && m->is_boolean())
    dev.allow_multiple_allocations = m->get<bool>();
  return dev;
}

Result<int64_t> IntField(const json& o, std::string_view key, const std::string& who,
                         const std::string& field) {
  const json* v = Field(o, key);
  if (v == nullptr) return Bad(who, field, "missing");
  if (!v->is_number_integer()) return Bad(who, field, "not an integer");
  return v->get<int64_t>();
}

Result<std::vector<std::string>> Selectors(const json& o, const std::string& who, const std::string& field) {
  std::vector<std::string> out;
  const json* sel = Field(o, "selectors");
  if (sel == nullptr) return out;
  if (!sel->is_array()) return Bad(who, field, "not a list");
  for (size_t i = 0; i < sel->size(); ++i) {
    const json* cel = Field((*sel)[i], "cel");
    const json* expr = cel != nullptr ? Field(*cel, "expression") : nullptr;
    if (expr == nullptr || !expr->is_string())
      return Bad(who, fmt::format("{}[{}].cel.expression", field, i),
                 "missing (only CEL selectors exist in v1)");
    out.push_back(expr->get<std::string>());
  }
  return out;
}

Result<DraSubRequest> SubRequestOf(const json& r, const std::string& who, const std::string& field) {
  if (!r.is_object()) return Bad(who, field, "not an object");
  DraSubRequest s;
  s.device_class = StringField(r, "deviceClassName");
  if (s.device_class.empty()) return Bad(who, field + ".deviceClassName", "missing");
  auto sel = Selectors(r, who, field + ".selectors");
  if (!sel.ok()) return sel.status();
  s.selectors = *sel;
  const std::string mode = StringField(r, "allocationMode");
  if (mode == "All")
    s.mode = DraAllocationMode::kAll;
  else if (!mode.empty() && mode != "ExactCount")
    return Bad(who, field + ".allocationMode", fmt::format("'{}' is neither ExactCount nor All", mode));
  if (Field(r, "count") != nullptr) {
    auto c = IntField(r, "count", who, field + ".count");
    if (!c.ok()) return c.status();
    if (*c < 1) return Bad(who, field + ".count", "must be at least 1");
    s.count = *c;
  }
  if (const json* a = Field(r, "adminAccess"); a != nullptr && a->is_boolean())
    s.admin_access = a->get<bool>();
  return s;
}

Result<DraRequest> RequestOf(const json& r, const std::string& who, const std::string& field) {
  DraRequest req;
  req.name = StringField(r, "name");
  if (req.name.empty()) return Bad(who, field + ".name", "missing");
  const std::string at = fmt::format("{} ({})", field, req.name);
  const json* exactly = Field(r, "exactly");
  const json* first = Field(r, "firstAvailable");
  if ((exactly == nullptr) == (first == nullptr))
    return Bad(who, at, "exactly one of exactly, firstAvailable is required");
  if (exactly != nullptr) {
    auto s = SubRequestOf(*exactly, who, at + ".exactly");
    if (!s.ok()) return s.status();
    req.alternatives.push_back(*s);
    return req;
  }
  if (!first->is_array() || first->empty()) return Bad(who, at + ".firstAvailable", "not a non-empty list");
  req.first_available = true;
  for (size_t i = 0; i < first->size(); ++i) {
    const std::string f = fmt::format("{}.firstAvailable[{}]", at, i);
    auto s = SubRequestOf((*first)[i], who, f);
    if (!s.ok()) return s.status();
    s->name = StringField((*first)[i], "name");
    if (s->name.empty()) return Bad(who, f + ".name", "missing");
    req.alternatives.push_back(*s);
  }
  return req;
}

Result<DraClaimSpec> ClaimSpecOf(const json& spec, const std::string& who, const std::string& field) {
  DraClaimSpec out;
  if (!spec.is_object()) return Bad(who, field, "not an object");
  const json* devices = Field(spec, "devices");
  if (devices == nullptr) return out;
  if (!devices->is_object()) return Bad(who, field + ".devices", "not an object");
  const json* reqs = Field(*devices, "requests");
  if (reqs != nullptr) {
    if (!reqs->is_array()) return Bad(who, field + ".devices.requests", "not a list");
    for (size_t i = 0; i < reqs->size(); ++i) {
      auto r = RequestOf((*reqs)[i], who, fmt::format("{}.devices.requests[{}]", field, i));
      if (!r.ok()) return r.status();
      out.requests.push_back(*r);
    }
  }
  const json* cons = Field(*devices, "constraints");
  out.has_constraints = cons != nullptr && cons->is_array() && !cons->empty();
  return out;
}

Result<DraClaimAllocation> AllocationOf(const json& a, const std::string& who) {
  DraClaimAllocation out;
  if (!a.is_object()) return Bad(who, "status.allocation", "not an object");
  const json* devices = Field(a, "devices");
  const json* results = devices != nullptr ? Field(*devices, "results") : nullptr;
  if (results != nullptr && !results->is_array())
    return Bad(who, "status.allocation.devices.results", "not a list");
  for (size_t i = 0; results != nullptr && i < results->size(); ++i) {
    const json& r = (*results)[i];
    DraDeviceResult d{StringField(r, "request"), StringField(r, "driver"), StringField(r, "pool"),
                      StringField(r, "device")};
    if (d.request.empty() || d.driver.empty() || d.pool.empty() || d.device.empty())
      return Bad(who, fmt::format("status.allocation.devices.results[{}]", i),
                 "request, driver, pool and device are required");
    out.results.push_back(d);
  }
  const json* sel = Field(a, "nodeSelector");
  const json* terms = sel != nullptr ? Field(*sel, "nodeSelectorTerms") : nullptr;
  for (size_t t = 0; terms != nullptr && terms->is_array() && t < terms->size(); ++t) {
    const json* fields = Field((*terms)[t], "matchFields");
    for (size_t f = 0; fields != nullptr && fields->is_array() && f < fields->size(); ++f) {
      const json& m = (*fields)[f];
      const json* values = Field(m, "values");
      if (StringField(m, "key") != "metadata.name" || StringField(m, "operator") != "In" ||
          values == nullptr || !values->is_array())
        continue;
      for (const json& v : *values)
        if (v.is_string()) out.nodes.push_back(v.get<std::string>());
    }
  }
  return out;
}

Status ClaimStatusOf(const json& status, const std::string& who, DraClaim* c) {
  if (!status.is_object()) return Bad(who, "status", "not an object");
  if (const json* a = Field(status, "allocation"); a != nullptr) {
    auto alloc = AllocationOf(*a, who);
    if (!alloc.ok()) return alloc.status();
    c->allocation = *alloc;
  }
  const json* rf = Field(status, "reservedFor");
  if (rf != nullptr && !rf->is_array()) return Bad(who, "status.reservedFor", "not a list");
  for (size_t i = 0; rf != nullptr && i < rf->size(); ++i)
    c->reserved_for.push_back(
        {StringField((*rf)[i], "resource"), StringField((*rf)[i], "name"), StringField((*rf)[i], "uid")});
  return Status::Ok();
}

}  // namespace

Result<DraVersion> ParseDraVersion(const std::string& text) {
  DraVersion v;
  std::string_view s = text;
  if (!s.empty() && s[0] == 'v') s.remove_prefix(1);
  int64_t* parts[] = {&v.major, &v.minor, &v.patch};
  for (int i = 0; i < 3; ++i) {
    auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), *parts[i]);
    if (ec != std::errc() || ptr == s.data())
      return Status::Error(fmt::format("'{}' is not a semantic version", text));
    s.remove_prefix(static_cast<size_t>(ptr - s.data()));
    if (i < 2) {
      if (s.empty() || s[0] != '.') return Status::Error(fmt::format("'{}' is not a semantic version", text));
      s.remove_prefix(1);
    }
  }
  if (!s.empty() && s[0] == '-') {
    const size_t plus = s.find('+');
    v.pre = std::string(s.substr(1, plus == std::string_view::npos ? std::string_view::npos : plus - 1));
    s.remove_prefix(plus == std::string_view::npos ? s.size() : plus);
  }
  if (!s.empty() && s[0] != '+') return Status::Error(fmt::format("'{}' is not a semantic version", text));
  return v;
}

int CompareDraVersions(const DraVersion& a, const DraVersion& b) {
  auto key = [](const DraVersion& v) { return std::tuple(v.major, v.minor, v.patch, v.pre.empty()); };
  if (key(a) != key(b)) return key(a) < key(b) ? -1 : 1;
  if (a.pre == b.pre) return 0;
  return a.pre < b.pre ? -1 : 1;
}

std::string DraRequest::ResultName(size_t i) const {
  return first_available ? name + "/" + alternatives[i].name : name;
}

Result<DraSlice> ParseResourceSlice(const json& slice) {
  const std::string who = Who("ResourceSlice", slice);
  const json* spec = Field(slice, "spec");
  if (spec == nullptr || !spec->is_object()) return Bad(who, "spec", "missing");
  DraSlice s;
  if (const json* meta = Field(slice, "metadata"); meta != nullptr) s.name = StringField(*meta, "name");
  s.driver = StringField(*spec, "driver");
  if (s.driver.empty()) return Bad(who, "spec.driver", "missing");
  const json* pool = Field(*spec, "pool");
  if (pool == nullptr || StringField(*pool, "name").empty()) return Bad(who, "spec.pool.name", "missing");
  s.pool = StringField(*pool, "name");
  auto gen = IntField(*pool, "generation", who, "spec.pool.generation");
  auto count = IntField(*pool, "resourceSliceCount", who, "spec.pool.resourceSliceCount");
  if (!gen.ok()) return gen.status();
  if (!count.ok()) return count.status();
  s.generation = *gen;
  s.slice_count = *count;
  s.node_name = StringField(*spec, "nodeName");
  if (const json* devs = Field(*spec, "devices"); devs != nullptr) {
    if (!devs->is_array()) return Bad(who, "spec.devices", "not a list");
    for (size_t i = 0; i < devs->size(); ++i) {
      auto d = DeviceOf((*devs)[i], who, fmt::format("spec.devices[{}]", i));
      if (!d.ok()) return d.status();
      s.devices.push_back(std::move(*d));
    }
  }
  if (const json* sets = Field(*spec, "sharedCounters"); sets != nullptr) {
    if (!sets->is_array()) return Bad(who, "spec.sharedCounters", "not a list");
    for (size_t i = 0; i < sets->size(); ++i) {
      const std::string f = fmt::format("spec.sharedCounters[{}]", i);
      DraCounterSet cs{StringField((*sets)[i], "name"), {}};
      if (cs.name.empty()) return Bad(who, f + ".name", "missing");
      auto counters = QuantityMap(Field((*sets)[i], "counters"), who, f + ".counters");
      if (!counters.ok()) return counters.status();
      cs.counters_milli = *counters;
      s.counter_sets.push_back(std::move(cs));
    }
  }
  return s;
}

std::vector<DraPool> BuildDraPools(const std::vector<DraSlice>& slices, std::vector<std::string>* notes) {
  std::map<std::pair<std::string, std::string>, int64_t> newest;
  for (const DraSlice& s : slices) {
    auto [it, fresh] = newest.try_emplace({s.driver, s.pool}, s.generation);
    if (!fresh) it->second = std::max(it->second, s.generation);
  }
  std::map<std::pair<std::string, std::string>, DraPool> pools;
  for (const DraSlice& s : slices) {
    if (s.generation != newest[{s.driver, s.pool}]) continue;
    DraPool& p = pools[{s.driver, s.pool}];
    p.driver = s.driver;
    p.name = s.pool;
    p.generation = s.generation;
    p.slice_count = std::max(p.slice_count, s.slice_count);
    if (!s.node_name.empty()) p.node_name = s.node_name;
    ++p.slices_seen;
    p.devices.insert(p.devices.end(), s.devices.begin(), s.devices.end());
    p.counter_sets.insert(p.counter_sets.end(), s.counter_sets.begin(), s.counter_sets.end());
  }
  std::vector<DraPool> out;
  for (auto& [key, p] : pools) {
    std::sort(p.devices.begin(), p.devices.end(),
              [](const DraDevice& a, const DraDevice& b) { return a.name < b.name; });
    auto dup = std::adjacent_find(p.devices.begin(), p.devices.end(),
                                  [](const DraDevice& a, const DraDevice& b) { return a.name == b.name; });
    if (dup != p.devices.end() && notes != nullptr)
      notes->push_back(fmt::format("pool {}/{}: device {} is published twice; the first is used", p.driver,
                                   p.name, dup->name));
    p.devices.erase(std::unique(p.devices.begin(), p.devices.end(),
                                [](const DraDevice& a, const DraDevice& b) { return a.name == b.name; }),
                    p.devices.end());
    if (!p.complete() && notes != nullptr)
      notes->push_back(fmt::format("pool {}/{} generation {} is incomplete: {} of {} slices", p.driver,
                                   p.name, p.generation, p.slices_seen, p.slice_count));
    out.push_back(std::move(p));
  }
  return out;
}

Result<DraDeviceClass> ParseDeviceClass(const json& device_class) {
  const std::string who = Who("DeviceClass", device_class);
  DraDeviceClass c;
  const json* meta = Field(device_class, "metadata");
  c.name = meta != nullptr ? StringField(*meta, "name") : std::string();
  if (c.name.empty()) return Bad(who, "metadata.name", "missing");
  const json* spec = Field(device_class, "spec");
  if (spec == nullptr) return c;
  if (!spec->is_object()) return Bad(who, "spec", "not an object");
  auto sel = Selectors(*spec, who, "spec.selectors");
  if (!sel.ok()) return sel.status();
  c.selectors = *sel;
  c.extended_resource_name = StringField(*spec, "extendedResourceName");
  return c;
}

Result<DraClaimSpec> ParseDraClaimSpec(const json& spec, const std::string& where) {
  return ClaimSpecOf(spec, where, "spec");
}

Result<DraClaim> ParseResourceClaim(const json& claim) {
  const std::string who = Who("ResourceClaim", claim);
  const json* meta = Field(claim, "metadata");
  if (meta == nullptr || !meta->is_object()) return Bad(who, "metadata", "missing");
  DraClaim c;
  c.name = StringField(*meta, "name");
  c.ns = StringField(*meta, "namespace");
  c.uid = StringField(*meta, "uid");
  c.resource_version = StringField(*meta, "resourceVersion");
  c.deleting = Field(*meta, "deletionTimestamp") != nullptr;
  if (const json* f = Field(*meta, "finalizers"); f != nullptr && f->is_array())
    for (const json& v : *f)
      if (v.is_string()) c.finalizers.push_back(v.get<std::string>());
  const json* spec = Field(claim, "spec");
  if (spec == nullptr) return Bad(who, "spec", "missing");
  auto s = ClaimSpecOf(*spec, who, "spec");
  if (!s.ok()) return s.status();
  c.spec = *s;
  if (const json* status = Field(claim, "status"); status != nullptr)
    if (Status st = ClaimStatusOf(*status, who, &c); !st.ok()) return st;
  return c;
}

bool DraClaim::HasFinalizer() const {
  return std::find(finalizers.begin(), finalizers.end(), kDraFinalizer) != finalizers.end();
}

bool DraClaim::ReservedFor(const std::string& pod_uid) const {
  return std::any_of(reserved_for.begin(), reserved_for.end(),
                     [&](const DraReservation& r) { return r.uid == pod_uid; });
}

Result<DraClaimTemplate> ParseResourceClaimTemplate(const json& claim_template) {
  const std::string who = Who("ResourceClaimTemplate", claim_template);
  DraClaimTemplate t;
  const json* meta = Field(claim_template, "metadata");
  if (meta != nullptr) {
    t.name = StringField(*meta, "name");
    t.ns = StringField(*meta, "namespace");
  }
  if (t.name.empty()) return Bad(who, "metadata.name", "missing");
  const json* spec = Field(claim_template, "spec");
  const json* inner = spec != nullptr ? Field(*spec, "spec") : nullptr;
  if (inner == nullptr) return Bad(who, "spec.spec", "missing");
  auto s = ClaimSpecOf(*inner, who, "spec.spec");
  if (!s.ok()) return s.status();
  t.spec = *s;
  t.spec_json = *inner;
  return t;
}

json WithDeleteProtection(json claim) {
  json& meta = claim["metadata"];
  json& fin = meta["finalizers"];
  if (!fin.is_array()) fin = json::array();
  if (std::find(fin.begin(), fin.end(), json(kDraFinalizer)) == fin.end()) fin.push_back(kDraFinalizer);
  return claim;
}

json DraAllocationJson(const std::vector<DraDeviceResult>& results, const std::string& node) {
  json res = json::array();
  for (const DraDeviceResult& r : results)
    res.push_back({{"request", r.request}, {"driver", r.driver}, {"pool", r.pool}, {"device", r.device}});
  json field = {{"key", "metadata.name"}, {"operator", "In"}, {"values", {node}}};
  return {{"devices", {{"results", res}}},
          {"nodeSelector", {{"nodeSelectorTerms", json::array({{{"matchFields", json::array({field})}}})}}}};
}

json DraClaimStatusJson(const json& current_status, const json* allocation, const std::string& pod_name,
                        const std::string& pod_uid) {
  json status = current_status.is_object() ? current_status : json::object();
  if (allocation != nullptr && (!status.contains("allocation") || status["allocation"].is_null()))
    status["allocation"] = *allocation;
  json& rf = status["reservedFor"];
  if (!rf.is_array()) rf = json::array();
  const bool present = std::any_of(rf.begin(), rf.end(), [&](const json& r) {
    return r.is_object() && r.value("uid", std::string()) == pod_uid;
  });
  if (!present) rf.push_back({{"resource", "pods"}, {"name", pod_name}, {"uid", pod_uid}});
  return status;
}

}  // namespace tessera
