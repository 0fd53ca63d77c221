#include "k8s/mig/mig_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <regex>
#include <tuple>

#include "k8s/api/objects.h"
#include "k8s/api/quantity.h"
#include "k8s/cluster_view.h"

namespace tessera {

using json = nlohmann::json;

namespace {

bool IsDevice(const std::string& r) { return r == kGpuResource || r.rfind(kMigResourcePrefix, 0) == 0; }

// Compute slices a device holds (a whole GPU: 7), the unit of a drain's cost.
int64_t Slices(const std::string& resource) {
  if (resource == kGpuResource) return 7;
  const std::string p = resource.substr(kMigResourcePrefix.size());
  return std::max(1, std::atoi(p.c_str()));
}

bool Fits(const Devices& want, const Devices& have) {
  for (const auto& [r, n] : want) {
    auto it = have.find(r);
    if (n > 0 && (it == have.end() || it->second < n)) return false;
  }
  return true;
}

void Take(const Devices& want, Devices* have) {
  for (const auto& [r, n] : want) (*have)[r] -= n;
}

// Places what it can of `waiting` on `pools` (first fit, in order); returns the pods left.
std::vector<WaitingPod> FirstFit(const std::vector<WaitingPod>& waiting, std::vector<Devices>* pools,
                                 std::vector<std::string>* placed = nullptr) {
  std::vector<WaitingPod> left;
  for (const WaitingPod& w : waiting) {
    auto it =
        std::find_if(pools->begin(), pools->end(), [&](const Devices& d) { return Fits(w.requests, d); });
    if (it == pools->end()) {
      left.push_back(w);
      continue;
    }
    Take(w.requests, &*it);
    if (placed) placed->push_back(w.ns + "/" + w.name);
  }
  return left;
}

struct Score {
  size_t serves = 0;
  int64_t wait_cost = 0;  // compute slices held by pods that must finish first
  size_t evictions = 0;
  size_t config_index = 0;
  bool Better(const Score& o) const {
    if (serves != o.serves) return serves > o.serves;
    if (wait_cost != o.wait_cost) return wait_cost < o.wait_cost;
    if (evictions != o.evictions) return evictions < o.evictions;
    return config_index < o.config_index;
  }
};

Score DrainCost(const MigNode& n, const WaitingPod& for_pod, const DrainRules& rules) {
  Score s;
  for (const GpuPod& p : n.pods) {
    if (Evictable(p, for_pod.priority, rules, for_pod.job)) {
      ++s.evictions;
      continue;
    }
    for (const auto& [r, c] : p.requests) s.wait_cost += c * Slices(r);
  }
  return s;
}

// A label value: at most 63 characters, alphanumerics with - _ . inside.
bool LabelValue(const std::string& v) {
  static const std::regex re("^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$");
  return std::regex_match(v, re);
}

// Whether every spec of `c` is `devices: all` without a device-filter, all with one layout: the configs
// whose devices a node of an unknown GPU kind can be told.
bool Uniform(const MigPartedConfig& c) {
  for (const MigPartedSpec& s : c.specs)
    if (!s.all_devices || !s.device_filter.empty() || s.enabled != c.specs[0].enabled ||
        s.counts != c.specs[0].counts)
      return false;
  return !c.specs.empty();
}

// DevicesOf, remembered per (GPU kind, GPU count, config) for one plan.
class DevicesCache {
 public:
  explicit DevicesCache(const std::vector<MigPartedConfig>& configs) : configs_(configs) {}
  const Result<Devices>& Of(size_t config, const MigNode& n) {
    auto [it, fresh] = memo_.try_emplace({n.kind, n.gpus, config}, Status::Error(""));
    if (fresh) it->second = DevicesOf(configs_[config], n);
    return it->second;
  }

 private:
  const std::vector<MigPartedConfig>& configs_;
  std::map<std::tuple<const GpuKind*, int, size_t>, Result<Devices>> memo_;
};

}  // namespace

bool Evictable(const GpuPod& p, int priority, const DrainRules& rules, int64_t for_job) {
  const bool foreign = !rules.scheduler_name.empty() && p.scheduler != rules.scheduler_name;
  if (foreign || p.priority >= rules.protected_priority) return false;
  if (rules.loop_rule && for_job > 0)
    if (const std::optional<bool> loop = rules.loop_rule(p, for_job)) return *loop;
  return p.priority < priority;
}

std::string DrainRefusal(const MigNode& node, const DrainRules& rules) {
  for (const GpuPod& p : node.pods) {
    if (p.terminating) continue;
    if (!rules.scheduler_name.empty() && p.scheduler != rules.scheduler_name)
      return fmt::format(
          "pod {}/{} of another scheduler ({}) uses GPUs there; a MIG repartition never evicts "
          "another scheduler's pod nor waits on it",
          p.ns, p.name, p.scheduler.empty() ? "default-scheduler" : p.scheduler);
    if (p.priority >= rules.protected_priority)
      return fmt::format(
          "pod {}/{} of production priority {} (at least {}) uses GPUs there; a MIG repartition "
          "never evicts a production pod nor waits on it",
          p.ns, p.name, p.priority, rules.protected_priority);
  }
  return "";
}

Devices MigNode::Free() const {
  Devices free = allocatable;
  for (const GpuPod& p : pods)
    for (const auto& [r, n] : p.requests) free[r] = std::max<int64_t>(0, free[r] - n);
  return free;
}

Result<std::vector<MigPartedConfig>> ParseMigParted(const std::string& text,
                                                    std::vector<std::string>* skipped) {
  auto configs = ReadMigPartedConfigs(text, skipped);
  if (!configs.ok()) return configs.status();
  std::vector<MigPartedConfig> out;
  for (MigPartedConfig& c : *configs) {
    if (LabelValue(c.name))
      out.push_back(std::move(c));
    else if (skipped)
      skipped->push_back(fmt::format("mig-configs.{}: not a label value", c.name));
  }
  return out;
}

Result<Devices> DevicesOf(const MigPartedConfig& config, const MigNode& node) {
  Devices d;
  if (node.kind == nullptr) {
    if (!Uniform(config))
      return Status::Error(
          "the node's GPU model is not one Tessera knows, and the config is not one layout "
          "for all devices");
    const MigPartedSpec& s = config.specs[0];
    if (!s.enabled) d[std::string(kGpuResource)] = node.gpus;
    for (const auto& [profile, n] : s.counts)
      d[std::string(kMigResourcePrefix) + profile] = int64_t{n} * node.gpus;
    return d;
  }
  auto layouts = MigPartedLayouts(config, *node.kind, node.gpus);
  if (!layouts.ok()) return layouts.status();
  for (const GpuMigLayout& g : *layouts) {
    if (!g.enabled) ++d[std::string(kGpuResource)];
    for (const MigInstance& i : g.instances)
      ++d[std::string(kMigResourcePrefix) + node.kind->profiles[i.profile].name];
  }
  return d;
}

bool Advertises(const MigNode& node, const MigPartedConfig& config) {
  const auto want = DevicesOf(config, node);
  if (!want.ok()) return true;
  for (const auto& [r, n] : *want)
    if (!node.allocatable.count(r) || node.allocatable.at(r) != n) return false;
  for (const auto& [r, n] : node.allocatable)
    if (n != 0 && !want->count(r)) return false;
  return true;
}

Devices DeviceRequests(const json& pod) {
  Devices out;
  auto d = ReadPodDemand(pod);
  if (!d.ok()) return out;
  if (d->gpus > 0) out[std::string(kGpuResource)] = d->gpus;
  for (const auto& [profile, n] : d->mig) out[std::string(kMigResourcePrefix) + profile] = n;
  return out;
}

MigNode ReadMigNode(const json& node, const std::vector<const json*>& pods, const Catalog* catalog) {
  MigNode n;
  const json* meta = Field(node, "metadata");
  const json empty = json::object();
  const json* labels = meta != nullptr ? Field(*meta, "labels") : nullptr;
  const json& l = labels != nullptr && labels->is_object() ? *labels : empty;
  n.name = meta != nullptr ? StringField(*meta, "name") : "";
  n.uid = meta != nullptr ? StringField(*meta, "uid") : "";
  const std::string count = StringField(l, "nvidia.com/gpu.count");
  n.gpus = count.size() < 6 && !count.empty() && std::all_of(count.begin(), count.end(), ::isdigit)
               ? std::stoi(count)
               : 0;
  n.capable = StringField(l, "nvidia.com/mig.capable") == "true" &&
              StringField(l, "nvidia.com/mig.strategy") == "mixed";
  n.config = StringField(l, kMigConfigLabel);
  if (const std::string product = StringField(l, "nvidia.com/gpu.product");
      catalog != nullptr && !product.empty())
    if (const KindId k = catalog->Find(product); k != kNone) n.kind = &catalog->kind(k);
  n.state = StringField(l, kMigStateLabel);
  const json* spec = Field(node, "spec");
  const json* u = spec != nullptr ? Field(*spec, "unschedulable") : nullptr;
  n.schedulable = !(u != nullptr && u->is_boolean() && u->get<bool>());
  const json* status = Field(node, "status");
  const json* alloc = status != nullptr ? Field(*status, "allocatable") : nullptr;
  if (alloc != nullptr && alloc->is_object())
    for (auto it = alloc->begin(); it != alloc->end(); ++it)
      if (IsDevice(it.key()) && it->is_string())
        if (auto q = ParseQuantityMilli(it->get<std::string>()); q.ok()) n.allocatable[it.key()] = *q / 1000;
  for (const json* p : pods) {
    if (PodNode(*p) != n.name || PodTerminal(*p)) continue;
    GpuPod g;
    g.requests = DeviceRequests(*p);
    if (g.requests.empty()) continue;
    const json* pm = Field(*p, "metadata");
    g.ns = pm != nullptr ? StringField(*pm, "namespace") : "";
    g.name = pm != nullptr ? StringField(*pm, "name") : "";
    g.uid = pm != nullptr ? StringField(*pm, "uid") : "";
    g.terminating = pm != nullptr && Field(*pm, "deletionTimestamp") != nullptr;
    const json* ps = Field(*p, "spec");
    g.scheduler = ps != nullptr ? StringField(*ps, "schedulerName") : "";
    const json* st = Field(*p, "status");
    const json* conditions = st != nullptr ? Field(*st, "conditions") : nullptr;
    if (conditions != nullptr && conditions->is_array())
      for (const json& c : *conditions)
        g.disruption_target |=
            StringField(c, "type") == "DisruptionTarget" && StringField(c, "status") == "True";
    if (auto d = ReadPodDemand(*p); d.ok()) g.priority = d->priority;
    n.pods.push_back(g);
  }
  return n;
}

std::vector<Repartition> PlanRepartitions(std::vector<WaitingPod> waiting, const std::vector<MigNode>& nodes,
                                          const std::vector<MigPartedConfig>& configs,
                                          const std::map<std::string, std::string>& busy,
                                          const std::set<std::pair<std::string, std::string>>& failed,
                                          const DrainRules& rules,
                                          std::map<std::string, std::string>* refused) {
  std::stable_sort(waiting.begin(), waiting.end(),
                   [](const WaitingPod& a, const WaitingPod& b) { return a.priority > b.priority; });
  DevicesCache devices(configs);
  std::vector<Devices> pools;
  for (const MigNode& n : nodes) {
    auto b = busy.find(n.name);
    if (b != busy.end()) {
      auto c = std::find_if(configs.begin(), configs.end(),
                            [&](const MigPartedConfig& x) { return x.name == b->second; });
      if (c != configs.end())
        if (const auto& d = devices.Of(c - configs.begin(), n); d.ok()) pools.push_back(*d);
    } else if (n.schedulable) {
      pools.push_back(n.Free());
    }
  }
  std::vector<WaitingPod> left = FirstFit(waiting, &pools);
  std::vector<Repartition> out;
  std::set<std::string> taken;
  while (!left.empty()) {
    Score best;
    const MigNode* best_node = nullptr;
    const MigPartedConfig* best_config = nullptr;
    for (const MigNode& n : nodes) {
      if (!n.capable || n.gpus <= 0 || !n.schedulable || busy.count(n.name) || taken.count(n.name)) continue;
      if (std::string why = DrainRefusal(n, rules); !why.empty()) {
        if (refused != nullptr) (*refused)[n.name] = why;
        continue;
      }
      const Score cost = DrainCost(n, left.front(), rules);
      for (size_t i = 0; i < configs.size(); ++i) {
        if (failed.count({n.name, configs[i].name}) || configs[i].name == n.config) continue;
        const auto& d = devices.Of(i, n);
        if (!d.ok()) continue;
        std::vector<Devices> pool = {*d};
        Score s = cost;
        s.serves = left.size() - FirstFit(left, &pool).size();
        s.config_index = i;
        if (s.serves > 0 && (best_node == nullptr || s.Better(best)))
          best = s, best_node = &n, best_config = &configs[i];
      }
    }
    if (best_node == nullptr) break;
    Repartition r{best_node->name, best_config->name, left.front().priority, {}, left.front().job};
    std::vector<Devices> pool = {*devices.Of(best_config - configs.data(), *best_node)};
    left = FirstFit(left, &pool, &r.for_pods);
    taken.insert(best_node->name);
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace tessera
