// The service's nodes (node_room.h): the cluster kept in the store after the first start, and the admin
// operations that change it while jobs run (add, cordon, uncordon, drain, remove).
#include "service/node_room.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <future>
#include <nlohmann/json.hpp>

#include "model/mig.h"
#include "service/service_driver.h"

namespace tessera {
namespace {

const char* InterconnectName(Interconnect i) {
  switch (i) {
    case Interconnect::kNvSwitch:
      return "nvswitch";
    case Interconnect::kNvLinkPairs:
      return "nvlink-pairs";
    case Interconnect::kPcie:
      return "pcie";
  }
  return "pcie";
}

// The node as an entry of the cluster YAML, as JSON (ParseClusterNode reads it back to the same Node).
nlohmann::json NodeSpecJson(const Node& n, const Cluster& c, const Catalog& cat) {
  nlohmann::json o = {{"name", n.name}};
  if (n.kind != kNone) o["gpu"] = cat.kind(n.kind).id;
  o["gpus"] = n.gpu_count;
  o["cpu_milli"] = n.cpu_milli;
  o["memory_mib"] = n.memory_mib;
  o["interconnect"] = InterconnectName(n.interconnect);
  if (n.pcie_group_size > 0) o["pcie_group_size"] = n.pcie_group_size;
  if (n.mig_enabled || !n.mig_config.empty())
    o["mig"] = {{"enabled", n.mig_enabled}, {"config", n.mig_config}};
  for (const GpuMigLayout& l : n.mig_layouts)
    o["mig"]["layouts"].push_back(FormatGpuMigLayout(cat.kind(n.kind), l));
  o["leaf"] = n.leaf < static_cast<LeafId>(c.leaf_names.size()) ? c.leaf_names[n.leaf] : "leaf-0";
  o["spine"] = n.spine < static_cast<SpineId>(c.spine_names.size()) ? c.spine_names[n.spine] : "spine-0";
  o["tier"] = TierName(n.tier);
  o["pool"] = n.pool;
  o["price_per_gpu_hour"] = n.price_per_gpu_hour;
  o["nic_gbps_per_gpu"] = n.nic_gbps_per_gpu;
  if (!n.labels.empty()) o["labels"] = n.labels;
  return o;
}

// The field a reader's message names ("source:line: field: problem" or "source: field: problem"), else "".
std::string FieldOfMessage(const std::string& m, const std::string& source) {
  if (m.rfind(source, 0) != 0) return "";
  size_t p = source.size();
  if (p < m.size() && m[p] == ':') ++p;
  while (p < m.size() && (std::isdigit(static_cast<unsigned char>(m[p])) || m[p] == ':')) ++p;
  while (p < m.size() && m[p] == ' ') ++p;
  const size_t end = m.find(':', p);
  if (end == std::string::npos) return "";
  std::string f = m.substr(p, end - p);
  return f.find(' ') == std::string::npos ? f : "";
}

nlohmann::json ClusterMeta(const Cluster& c) {
  return {{"name", c.name},
          {"spine_oversubscription", c.spine_oversubscription},
          {"leaves", c.leaf_names},
          {"spines", c.spine_names}};
}

bool ValidNodeName(const std::string& s) {
  return !s.empty() && s.size() <= 253 &&
         s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") ==
             std::string::npos;
}

}  // namespace

NodeRoom::NodeRoom(ServiceDriver* driver) : d_(driver) {
  const ServiceConfig& c = *d_->config_;
  kind_stats_.resize(c.catalog->size());
  for (const Node& n : c.cluster.nodes) {
    if (n.kind == kNone) continue;
    kind_stats_[n.kind].max_gpus = std::max(kind_stats_[n.kind].max_gpus, n.gpu_count);
    kind_stats_[n.kind].total_gpus += n.gpu_count;
  }
}

ClusterState& NodeRoom::State() const { return d_->loop_->state(); }

std::string NodeRoom::Name(NodeId n) const {
  std::lock_guard<std::mutex> lock(d_->mu_);
  const ClusterState& state = State();
  return n >= 0 && n < state.num_nodes() ? state.cluster().nodes[n].name : std::string();
}

Status NodeRoom::LoadStoredCluster(const StoredState& s, ServiceConfig* config) {
  if (s.nodes.empty()) return Status::Ok();  // the first start: the configuration seeds the store
  Cluster c;
  if (auto it = s.meta.find("cluster"); it != s.meta.end()) {
    const auto m = nlohmann::json::parse(it->second, nullptr, false);
    auto names = [&](const char* key) {
      std::vector<std::string> out;
      if (m.contains(key) && m[key].is_array())
        for (const auto& v : m[key])
          if (v.is_string()) out.push_back(v.get<std::string>());
      return out;
    };
    if (m.is_object()) {
      if (m.contains("name") && m["name"].is_string()) c.name = m["name"].get<std::string>();
      if (m.contains("spine_oversubscription") && m["spine_oversubscription"].is_number())
        c.spine_oversubscription = m["spine_oversubscription"].get<double>();
      c.leaf_names = names("leaves");
      c.spine_names = names("spines");
    }
  }
  for (size_t i = 0; i < s.nodes.size(); ++i) {
    const NodeRow& row = s.nodes[i];
    if (row.position != static_cast<int>(i))
      return Status::Error(fmt::format("stored nodes: position {} missing (found {})", i, row.position));
    auto n = ParseClusterNode(row.spec_json, fmt::format("stored node '{}'", row.name), *config->catalog, &c);
    if (!n.ok()) return n.status();
    c.nodes.push_back(std::move(n).value());
  }
  if (c.leaf_names.empty()) c.leaf_names.push_back("leaf-0");
  if (c.spine_names.empty()) c.spine_names.push_back("spine-0");
  // Does the configuration say something else than the store's live nodes?
  std::vector<nlohmann::json> stored, configured;
  for (size_t i = 0; i < c.nodes.size(); ++i)
    if (!s.nodes[i].removed) stored.push_back(NodeSpecJson(c.nodes[i], c, *config->catalog));
  for (const Node& n : config->cluster.nodes)
    configured.push_back(NodeSpecJson(n, config->cluster, *config->catalog));
  if (stored != configured && config->log)
    config->log(
        fmt::format("cluster configuration '{}' ignored: the store holds the cluster since the first start "
                    "({} nodes; the configuration names {}); change nodes with `tessera node`",
                    config->cluster.name, stored.size(), configured.size()));
  if (c.name.empty()) c.name = config->cluster.name;
  config->cluster = std::move(c);
  return Status::Ok();
}

Status NodeRoom::Restore(const StoredState& s) {
  std::unique_lock<std::mutex> lock(d_->mu_);
  ClusterState& state = State();
  entries_.assign(state.num_nodes(), {});
  WriteBatch b;
  if (s.nodes.empty() && !d_->config_->view_only) {
    for (NodeId n = 0; n < state.num_nodes(); ++n) b.nodes.push_back(RowLocked(n, d_->Now()));
    b.meta["cluster"] = ClusterMeta(d_->config_->cluster).dump();
  }
  for (const NodeRow& row : s.nodes) {
    const NodeId n = row.position;
    if (n >= state.num_nodes()) continue;
    Entry& e = entries_[n];
    e.draining = row.state == "draining" || row.state == "drained";
    e.unhealthy = row.state == "unhealthy";
    if (row.removed || row.state != "ready") (void)state.CordonNode(n);
    if (row.removed) {
      if (Status st = state.RemoveNode(n); !st.ok())
        return Status::Error(fmt::format("stored node '{}': {}", row.name, st.message()));
    }
  }
  // A drain that had not finished (its jobs still recorded running there) goes on.
  std::vector<JobPtr> changed;
  for (NodeId n = 0; n < state.num_nodes() && !d_->config_->view_only; ++n)
    if (entries_[n].draining && !state.node_removed(n)) DrainJobsLocked(n, d_->Now(), &b, &changed);
  RecountKindsLocked();
  if (b.empty() && changed.empty()) return Status::Ok();
  auto done = std::make_shared<std::promise<Status>>();
  auto f = done->get_future();
  d_->PutLocked(std::move(changed), std::move(b), [done](const Status& st) { done->set_value(st); });
  lock.unlock();
  return f.get();
}

NodeId NodeRoom::FindLocked(const std::string& name) const {
  const ClusterState& state = State();
  for (NodeId n = state.num_nodes() - 1; n >= 0; --n)  // a re-added name is the later one
    if (!state.node_removed(n) && state.cluster().nodes[n].name == name) return n;
  return -1;
}

std::string NodeRoom::StateLocked(NodeId n) const {
  const ClusterState& state = State();
  const NodeState& ns = state.node(n);
  const bool busy = ns.inference_tasks + ns.training_tasks > 0;
  const Entry e = n < static_cast<NodeId>(entries_.size()) ? entries_[n] : Entry{};
  if (state.node_removed(n)) return "removed";
  if (e.unhealthy) return "unhealthy";
  if (e.draining) return busy ? "draining" : "drained";
  return state.node_cordoned(n) ? "cordoned" : "ready";
}

NodeView NodeRoom::ViewLocked(NodeId n) const {
  const ClusterState& state = State();
  const NodeState& ns = state.node(n);
  return {state.cluster().nodes[n].name, StateLocked(n),
          NodeSpecJson(state.cluster().nodes[n], state.cluster(), *d_->config_->catalog),
          ns.inference_tasks + ns.training_tasks};
}

NodeRow NodeRoom::RowLocked(NodeId n, int64_t now) const {
  const ClusterState& state = State();
  const Node& node = state.cluster().nodes[n];
  std::string st = StateLocked(n);
  const bool removed = st == "removed";
  if (removed) st = entries_[n].draining ? "drained" : "cordoned";
  return {n, node.name, NodeSpecJson(node, state.cluster(), *d_->config_->catalog).dump(), st, removed, now};
}

void NodeRoom::RecountKindsLocked() {
  const ClusterState& state = State();
  kind_stats_.assign(d_->config_->catalog->size(), {});
  for (NodeId n = 0; n < state.num_nodes(); ++n) {
    const Node& node = state.cluster().nodes[n];
    if (node.kind == kNone || state.node_removed(n)) continue;
    kind_stats_[node.kind].max_gpus = std::max(kind_stats_[node.kind].max_gpus, node.gpu_count);
    kind_stats_[node.kind].total_gpus += node.gpu_count;
  }
}

// Every job holding capacity on node `n` is stopped through the driver as the one take rule says
// (ControlLoop::AppendTakeOf: a checkpoint first where due), its whole group preempted and requeued at its
// place (its own capacity is what is reclaimed, so no grace period is held on the draining node).
void NodeRoom::DrainJobsLocked(NodeId n, int64_t now, WriteBatch* b, std::vector<JobPtr>* changed) {
  const std::string reason = fmt::format("node {} is draining", State().cluster().nodes[n].name);
  Plan plan;
  for (JobSlot s : d_->loop_->jobs().holding()) {
    const ControlJob& cj = d_->loop_->jobs()[s];
    if (!std::any_of(cj.tasks.begin(), cj.tasks.end(), [n](const TaskPlacement& t) { return t.node == n; }))
      continue;
    d_->loop_->AppendTakeOf(s, now, reason, &plan);  // for itself: no grace period held on the draining node
  }
  d_->reports_->ApplyTakesLocked(plan, now, b, changed);
}

Outcome<NodeView> NodeRoom::CommitLocked(std::unique_lock<std::mutex>* lock, const Caller& c,
                                         const std::string& action, const std::string& before, NodeId n,
                                         WriteBatch b, std::vector<JobPtr> changed) {
  b.nodes.push_back(RowLocked(n, d_->Now()));
  const auto state = [](const std::string& s) { return s.empty() ? s : nlohmann::json{{"state", s}}.dump(); };
  const std::string after = StateLocked(n);
  b.audit.push_back(d_->AuditOf(c, action, "node:" + b.nodes.back().name, state(before), state(after),
                                before != after || !changed.empty()));
  d_->state_changed_ = true;  // the next snapshot shows the change
  NodeView v = ViewLocked(n);
  auto done = std::make_shared<std::promise<Status>>();
  auto f = done->get_future();
  d_->PutLocked(std::move(changed), std::move(b), [done](const Status& st) { done->set_value(st); });
  lock->unlock();
  d_->outbox_->Flush();  // the drain's stops, without the lock
  const Status st = f.get();
  d_->Notify();
  if (!st.ok()) return ApiError{ErrorCode::kUnavailable, "", "not stored: " + st.message()};
  return v;
}

Outcome<std::pair<int64_t, int64_t>> NodeRoom::HoldHost(const Caller& c, const std::string& name,
                                                        int64_t cpu_milli, int64_t memory_mib) {
  if (c.role != Role::kAdmin)
    return ApiError{ErrorCode::kPermissionDenied, "", "only an admin holds capacity"};
  std::pair<int64_t, int64_t> held;
  {
    std::lock_guard<std::mutex> lock(d_->mu_);
    const NodeId n = FindLocked(name);
    if (n < 0) return ApiError{ErrorCode::kNotFound, "", fmt::format("no node '{}'", name)};
    ClusterState& state = State();
    const auto was = state.outside_host(n);
    auto r = state.HoldOutsideHost(n, cpu_milli, memory_mib);
    if (!r.ok()) return Invalid("", r.error());
    held = *r;
    d_->state_changed_ = d_->state_changed_ || held != was;
  }
  d_->Notify();
  return held;
}

Outcome<NodeView> NodeRoom::Change(const Caller& c, const std::string& name, const std::string& action,
                                   const ChangeFn& change) {
  if (c.role != Role::kAdmin)
    return ApiError{ErrorCode::kPermissionDenied, "", "only an admin changes nodes"};
  std::unique_lock<std::mutex> lock(d_->mu_);
  const NodeId n = FindLocked(name);
  if (n < 0) return ApiError{ErrorCode::kNotFound, "", fmt::format("no node '{}'", name)};
  WriteBatch b;
  std::vector<JobPtr> changed;
  const std::string before = StateLocked(n);
  if (auto refused = change(n, &b, &changed)) return *refused;
  return CommitLocked(&lock, c, action, before, n, std::move(b), std::move(changed));
}

Outcome<std::vector<NodeView>> NodeRoom::List(const Caller& c) const {
  if (c.role != Role::kAdmin) return ApiError{ErrorCode::kPermissionDenied, "", "only an admin lists nodes"};
  std::vector<NodeView> out;
  std::lock_guard<std::mutex> lock(d_->mu_);
  for (NodeId n = 0; n < State().num_nodes(); ++n)
    if (!State().node_removed(n)) out.push_back(ViewLocked(n));
  return out;
}

std::vector<std::string> NodeRoom::States() const {
  std::lock_guard<std::mutex> lock(d_->mu_);
  std::vector<std::string> out;
  for (NodeId n = 0; n < State().num_nodes(); ++n) out.push_back(StateLocked(n));
  return out;
}

Outcome<NodeView> NodeRoom::Add(const Caller& c, const std::string& spec_json) {
  if (c.role != Role::kAdmin) return ApiError{ErrorCode::kPermissionDenied, "", "only an admin adds nodes"};
  const std::string source = "node";
  std::unique_lock<std::mutex> lock(d_->mu_);
  ClusterState& state = State();
  Cluster names;  // the known leaves and spines: a new name would not be one the state has
  names.leaf_names = state.cluster().leaf_names;
  names.spine_names = state.cluster().spine_names;
  auto node = ParseClusterNode(spec_json, source, *d_->config_->catalog, &names);
  if (!node.ok()) return Invalid(FieldOfMessage(node.error(), source), node.error());
  if (!ValidNodeName(node->name))
    return Invalid("name", "field 'name': 1-253 characters of a-z, A-Z, 0-9, '-', '_' and '.'");
  if (names.leaf_names.size() > state.cluster().leaf_names.size())
    return Invalid("leaf", fmt::format("field 'leaf': unknown leaf '{}' (known: {})", names.leaf_names.back(),
                                       fmt::join(state.cluster().leaf_names, ", ")));
  if (names.spine_names.size() > state.cluster().spine_names.size())
    return Invalid("spine",
                   fmt::format("field 'spine': unknown spine '{}' (known: {})", names.spine_names.back(),
                               fmt::join(state.cluster().spine_names, ", ")));
  if (FindLocked(node->name) >= 0)
    return ApiError{ErrorCode::kAlreadyExists, "name", fmt::format("node '{}' exists", node->name)};
  bool reused = false;  // a removed node had this name: its stored MIG layouts must not apply to this one
  for (const Node& old : state.cluster().nodes) reused |= old.name == node->name;
  auto added = state.AddNode(*node);
  if (!added.ok()) return Invalid("", added.error());
  const NodeId n = *added;
  entries_.resize(state.num_nodes());
  RecountKindsLocked();
  WriteBatch b;
  for (int i = 0; reused && i < state.node(n).gpu_count; ++i) {
    const GpuState& gs = state.gpu(state.node(n).first_gpu + i);
    std::string layout;
    for (int k = 0; gs.mig_enabled && k < gs.n_instances; ++k)
      layout +=
          fmt::format("{}{}@{}", layout.empty() ? "" : ",",
                      state.kind_of_gpu(state.node(n).first_gpu + i).profiles[gs.instances[k].profile].name,
                      static_cast<int>(gs.instances[k].start));
    b.layouts.push_back({node->name, i, layout});
  }
  return CommitLocked(&lock, c, "node.add", "", n, std::move(b), {});
}

Outcome<NodeView> NodeRoom::Cordon(const Caller& c, const std::string& name) {
  return Change(c, name, "node.cordon",
                [this](NodeId n, WriteBatch*, std::vector<JobPtr>*) -> std::optional<ApiError> {
                  if (Status st = State().CordonNode(n); !st.ok())
                    return ApiError{ErrorCode::kInternal, "", st.message()};
                  return std::nullopt;
                });
}

Outcome<NodeView> NodeRoom::Uncordon(const Caller& c, const std::string& name) {
  return Change(c, name, "node.uncordon",
                [this](NodeId n, WriteBatch*, std::vector<JobPtr>*) -> std::optional<ApiError> {
                  if (Status st = State().UncordonNode(n); !st.ok())
                    return ApiError{ErrorCode::kFailedPrecondition, "", st.message()};
                  entries_[n].draining = entries_[n].unhealthy = false;  // held GPUs stay held
                  return std::nullopt;
                });
}

Outcome<NodeView> NodeRoom::Drain(const Caller& c, const std::string& name) {
  return Change(c, name, "node.drain",
                [this](NodeId n, WriteBatch* b, std::vector<JobPtr>* changed) -> std::optional<ApiError> {
                  if (Status st = State().CordonNode(n); !st.ok())
                    return ApiError{ErrorCode::kInternal, "", st.message()};
                  entries_[n].draining = true;
                  DrainJobsLocked(n, d_->Now(), b, changed);
                  return std::nullopt;
                });
}

Outcome<int> NodeRoom::HoldGpus(const Caller& c, const std::string& name, int gpus) {
  if (c.role != Role::kAdmin) return ApiError{ErrorCode::kPermissionDenied, "", "only an admin holds GPUs"};
  int held = 0;
  {
    std::lock_guard<std::mutex> lock(d_->mu_);
    const NodeId n = FindLocked(name);
    if (n < 0) return ApiError{ErrorCode::kNotFound, "", fmt::format("no node '{}'", name)};
    ClusterState& state = State();
    const NodeState& ns = state.node(n);
    std::vector<GpuId>& was = entries_[n].held;
    // Those held already keep their hold, then idle GPUs, then busy ones (held once their work ends).
    std::vector<GpuId> order = was;
    for (bool idle : {true, false})
      for (GpuId g = ns.first_gpu + ns.gpu_count - 1; g >= ns.first_gpu; --g)
        if ((state.TasksOf(g) == 0) == idle && std::find(order.begin(), order.end(), g) == order.end())
          order.push_back(g);
    order.resize(std::min<size_t>(order.size(), static_cast<size_t>(std::max(0, gpus))));
    bool changed = false;
    for (GpuId g : was)
      if (std::find(order.begin(), order.end(), g) == order.end()) changed |= state.UncordonGpu(g).ok();
    for (GpuId g : order)
      if (std::find(was.begin(), was.end(), g) == was.end()) changed |= state.CordonGpu(g).ok();
    was = order;
    held = static_cast<int>(order.size());
    d_->state_changed_ = d_->state_changed_ || changed;
  }
  d_->Notify();  // capacity given back: a cycle looks again
  return held;
}

Outcome<NodeView> NodeRoom::Remove(const Caller& c, const std::string& name) {
  return Change(
      c, name, "node.remove", [this](NodeId n, WriteBatch*, std::vector<JobPtr>*) -> std::optional<ApiError> {
        ClusterState& state = State();
        const NodeState& ns = state.node(n);
        const int tasks = ns.inference_tasks + ns.training_tasks;
        if (tasks > 0)
          return ApiError{ErrorCode::kFailedPrecondition, "",
                          fmt::format("node '{}' still runs {} task(s): drain it first",
                                      state.cluster().nodes[n].name, tasks)};
        const bool was_cordoned = state.node_cordoned(n);
        (void)state.CordonNode(n);  // removal takes a cordoned node; an idle one is cordoned on the way
        if (Status st = state.RemoveNode(n); !st.ok()) {
          if (!was_cordoned) (void)state.UncordonNode(n);
          return ApiError{ErrorCode::kFailedPrecondition, "", st.message()};
        }
        RecountKindsLocked();
        return std::nullopt;
      });
}

}  // namespace tessera
