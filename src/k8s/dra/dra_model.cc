#include "k8s/dra/dra_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <set>

namespace tessera {
namespace {

bool ReadInt(std::string_view s, int* out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && p == s.data() + s.size() && !s.empty();
}

std::string StringAttr(const DraDevice& d, const std::string& key) {
  for (const std::string& k : {key, std::string(kNvidiaDraDriver) + "/" + key}) {
    auto it = d.attributes.find(k);
    if (it != d.attributes.end())
      if (const std::string* s = std::get_if<std::string>(&it->second)) return *s;
  }
  return {};
}

KindId FindKind(const Catalog& catalog, const std::string& product) {
  KindId k = catalog.Find(product);
  if (k != kNone) return k;
  std::string dashed = product;
  std::replace(dashed.begin(), dashed.end(), ' ', '-');
  return catalog.Find(dashed);
}

// Resolves counters to indices within the node; a device naming an unknown set or counter is unusable.
void ResolveConsumption(DraModelNode& node, const std::map<std::string, int>& sets_of_pool, DraModelDevice& d,
                        std::vector<std::string>* problems) {
  for (const DraCounterConsumption& c : d.device.consumes) {
    auto it = sets_of_pool.find(c.counter_set);
    if (it == sets_of_pool.end()) {
      d.usable = false;
      problems->push_back(
          fmt::format("node {}: device {} consumes counter set {}, which pool {} does not publish", node.name,
                      d.device.name, c.counter_set, d.pool));
      return;
    }
    DraModelConsumption mc{it->second, {}};
    const DraModelCounterSet& set = node.sets[static_cast<size_t>(it->second)];
    for (const auto& [counter, amount] : c.counters_milli) {
      auto pos = std::find(set.counters.begin(), set.counters.end(), counter);
      if (pos == set.counters.end()) {
        d.usable = false;
        problems->push_back(fmt::format("node {}: device {} consumes counter {} that set {} lacks", node.name,
                                        d.device.name, counter, set.name));
        return;
      }
      const int idx = static_cast<int>(pos - set.counters.begin());
      mc.counters.emplace_back(idx, amount);
      for (size_t s = 0; s < set.slice_counter.size(); ++s)
        if (set.slice_counter[s] == idx && amount > 0) d.slice_mask |= static_cast<uint8_t>(1u << s);
    }
    d.consumes.push_back(std::move(mc));
  }
}

int AddSets(DraModelNode& node, const DraPool& pool, std::map<std::string, int>* sets_of_pool) {
  for (const DraCounterSet& cs : pool.counter_sets) {
    DraModelCounterSet s{pool.driver, pool.name, cs.name, {}, {}, std::vector<int>(8, -1)};
    for (const auto& [name, value] : cs.counters_milli) {
      int slice = -1;
      if (name.rfind("memory-slice-", 0) == 0 && ReadInt(std::string_view(name).substr(13), &slice) &&
          slice >= 0 && slice < 8)
        s.slice_counter[static_cast<size_t>(slice)] = static_cast<int>(s.counters.size());
      s.counters.push_back(name);
      s.capacity.push_back(value);
    }
    (*sets_of_pool)[cs.name] = static_cast<int>(node.sets.size());
    node.sets.push_back(std::move(s));
  }
  return 0;
}

// Maps an NVIDIA device onto a GPU of the node (created on first sight) and, for MIG, a catalog profile.
void MapNvidia(DraModelNode& node, DraModelDevice& d, const Catalog& catalog, std::set<std::string>* reported,
               std::vector<std::string>* problems) {
  auto parsed = ParseNvidiaDeviceName(d.device.name);
  if (!parsed || d.driver != kNvidiaDraDriver) return;
  d.role = parsed->mig ? DraDeviceRole::kMig : DraDeviceRole::kFullGpu;
  auto gpu = std::find_if(node.gpus.begin(), node.gpus.end(),
                          [&](const DraModelGpu& g) { return g.minor == parsed->minor; });
  if (gpu == node.gpus.end()) {
    DraModelGpu g;
    g.minor = parsed->minor;
    g.product = StringAttr(d.device, "productName");
    g.kind = FindKind(catalog, g.product);
    g.set = d.consumes.empty() ? -1 : d.consumes[0].set;
    if (g.kind == kNone && reported->insert("product " + g.product).second)
      problems->push_back(
          fmt::format("node {}: GPU product '{}' is not in the catalog (reported, not guessed); its "
                      "devices are allocated by their counters only",
                      node.name, g.product));
    node.gpus.push_back(g);
    gpu = node.gpus.end() - 1;
  }
  d.gpu = static_cast<int>(gpu - node.gpus.begin());
  if (!parsed->mig) return;
  d.start = parsed->start;
  gpu->mig_masks.push_back(d.slice_mask);
  if (gpu->kind == kNone) return;
  const GpuKind& kind = catalog.kind(gpu->kind);
  const std::string profile = StringAttr(d.device, "profile");
  const int p = kind.FindProfile(profile);
  if (p < 0 || kind.profiles[static_cast<size_t>(p)].profile_id != parsed->profile_id ||
      !kind.profiles[static_cast<size_t>(p)].AllowedStart(parsed->start)) {
    if (reported->insert("profile " + profile + "/" + std::to_string(parsed->profile_id)).second)
      problems->push_back(
          fmt::format("node {}: device {}: MIG profile '{}' (id {}, start {}) is not a placement of "
                      "catalog kind {} (reported, not guessed)",
                      node.name, d.device.name, profile, parsed->profile_id, parsed->start, kind.id));
    return;
  }
  d.profile = p;
}

}  // namespace

std::optional<NvidiaDeviceName> ParseNvidiaDeviceName(const std::string& name) {
  if (name.rfind("gpu-", 0) != 0) return std::nullopt;
  NvidiaDeviceName out;
  const std::string rest = name.substr(4);
  const size_t dash = rest.find('-');
  if (dash == std::string::npos) {
    if (!ReadInt(rest, &out.minor)) return std::nullopt;
    return out;
  }
  if (!ReadInt(std::string_view(rest).substr(0, dash), &out.minor) || rest.compare(dash, 5, "-mig-") != 0)
    return std::nullopt;
  // <profile token, may hold dashes>-<profile id>-<start>
  const std::string tail = rest.substr(dash + 5);
  const size_t last = tail.rfind('-');
  if (last == std::string::npos || last == 0) return std::nullopt;
  const size_t mid = tail.rfind('-', last - 1);
  if (mid == std::string::npos || mid == 0) return std::nullopt;
  if (!ReadInt(std::string_view(tail).substr(last + 1), &out.start) ||
      !ReadInt(std::string_view(tail).substr(mid + 1, last - mid - 1), &out.profile_id))
    return std::nullopt;
  out.mig = true;
  out.profile_token = tail.substr(0, mid);
  return out;
}

std::optional<std::pair<int, int>> DraModel::Find(const std::string& driver, const std::string& pool,
                                                  const std::string& device) const {
  auto it = index_.find({driver, pool, device});
  if (it == index_.end()) return std::nullopt;
  return it->second;
}

int DraModel::NodeIndex(const std::string& name) const {
  for (size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i].name == name) return static_cast<int>(i);
  return -1;
}

DraModel BuildDraModel(const std::vector<DraPool>& pools, const Catalog& catalog) {
  DraModel m;
  std::map<std::string, DraModelNode> by_name;
  std::set<std::string> reported;
  for (const DraPool& pool : pools) {
    if (pool.node_name.empty()) {
      m.problems.push_back(
          fmt::format("pool {}/{} is not node-local (nodeSelector, allNodes or per-device node "
                      "selection): not supported yet, its devices are left out",
                      pool.driver, pool.name));
      continue;
    }
    DraModelNode& node = by_name[pool.node_name];
    node.name = pool.node_name;
    node.incomplete = node.incomplete || !pool.complete();
    std::map<std::string, int> sets_of_pool;
    AddSets(node, pool, &sets_of_pool);
    for (const DraDevice& dev : pool.devices) {
      DraModelDevice d;
      d.driver = pool.driver;
      d.pool = pool.name;
      d.device = dev;
      d.pool_complete = pool.complete();
      ResolveConsumption(node, sets_of_pool, d, &m.problems);
      node.devices.push_back(std::move(d));
    }
  }
  for (auto& [name, node] : by_name) {
    std::stable_sort(node.devices.begin(), node.devices.end(),
                     [](const DraModelDevice& a, const DraModelDevice& b) {
                       return std::tie(a.device.name, a.driver) < std::tie(b.device.name, b.driver);
                     });
    for (DraModelDevice& d : node.devices) MapNvidia(node, d, catalog, &reported, &m.problems);
    const int n = static_cast<int>(m.nodes.size());
    for (size_t i = 0; i < node.devices.size(); ++i)
      m.index_[{node.devices[i].driver, node.devices[i].pool, node.devices[i].device.name}] = {
          n, static_cast<int>(i)};
    m.nodes.push_back(std::move(node));
  }
  return m;
}

DraUsage::DraUsage(const DraModel& model) : model_(&model) {
  for (const DraModelNode& n : model.nodes) {
    taken_.emplace_back(n.devices.size(), 0);
    std::vector<std::vector<int64_t>> sets;
    for (const DraModelCounterSet& s : n.sets) sets.emplace_back(s.counters.size(), 0);
    used_.push_back(std::move(sets));
    on_gpu_.emplace_back(n.gpus.size(), 0);
  }
}

bool DraUsage::Fits(int node, int device) const {
  const DraModelNode& n = model_->nodes[static_cast<size_t>(node)];
  const DraModelDevice& d = n.devices[static_cast<size_t>(device)];
  if (!d.usable || taken_[node][device]) return false;
  for (const DraModelConsumption& c : d.consumes)
    for (const auto& [counter, amount] : c.counters)
      if (used_[node][c.set][counter] + amount >
          n.sets[static_cast<size_t>(c.set)].capacity[static_cast<size_t>(counter)])
        return false;
  return true;
}

void DraUsage::Add(int node, int device) {
  const DraModelDevice& d = model_->nodes[static_cast<size_t>(node)].devices[static_cast<size_t>(device)];
  taken_[node][device] = 1;
  for (const DraModelConsumption& c : d.consumes)
    for (const auto& [counter, amount] : c.counters) used_[node][c.set][counter] += amount;
  if (d.gpu >= 0) ++on_gpu_[node][d.gpu];
}

void DraUsage::Remove(int node, int device) {
  const DraModelDevice& d = model_->nodes[static_cast<size_t>(node)].devices[static_cast<size_t>(device)];
  if (!taken_[node][device]) return;
  taken_[node][device] = 0;
  for (const DraModelConsumption& c : d.consumes)
    for (const auto& [counter, amount] : c.counters) used_[node][c.set][counter] -= amount;
  if (d.gpu >= 0) --on_gpu_[node][d.gpu];
}

uint8_t DraUsage::UsedSlices(int node, int gpu) const {
  const DraModelNode& n = model_->nodes[static_cast<size_t>(node)];
  const int set = n.gpus[static_cast<size_t>(gpu)].set;
  if (set < 0) return 0;
  uint8_t mask = 0;
  const DraModelCounterSet& s = n.sets[static_cast<size_t>(set)];
  for (size_t i = 0; i < s.slice_counter.size(); ++i)
    if (s.slice_counter[i] >= 0 && used_[node][set][s.slice_counter[i]] > 0)
      mask |= static_cast<uint8_t>(1u << i);
  return mask;
}

std::vector<std::string> DraUsage::AddResults(const std::vector<DraDeviceResult>& results) {
  std::vector<std::string> notes;
  for (const DraDeviceResult& r : results) {
    auto at = model_->Find(r.driver, r.pool, r.device);
    if (!at) {
      notes.push_back(
          fmt::format("allocated device {}/{}/{} is not published by the newest generation of its pool",
                      r.driver, r.pool, r.device));
      continue;
    }
    if (taken_[at->first][at->second]) {
      notes.push_back(fmt::format("device {}/{}/{} is allocated twice", r.driver, r.pool, r.device));
      continue;
    }
    Add(at->first, at->second);
  }
  return notes;
}

void DraUsage::RemoveResults(const std::vector<DraDeviceResult>& results) {
  for (const DraDeviceResult& r : results)
    if (auto at = model_->Find(r.driver, r.pool, r.device)) Remove(at->first, at->second);
}

}  // namespace tessera
