#include "server/json_views.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>

#include "base/utc_time.h"
#include "cost/focus.h"

namespace tessera {

nlohmann::json TimeJson(int64_t t) { return t < 0 ? nlohmann::json(nullptr) : nlohmann::json(FormatIsoUtc(t)); }

namespace {

nlohmann::json PlacementsJson(const std::vector<TaskPlacement>& tasks, const Service& s) {
  nlohmann::json out = nlohmann::json::array();
  auto snap = s.snapshot();
  const Cluster& cl = snap->cluster->cluster();  // the live cluster: nodes come and go
  for (const TaskPlacement& t : tasks) {
    if (t.node < 0 || t.node >= static_cast<NodeId>(cl.nodes.size())) continue;
    const Node& node = cl.nodes[t.node];
    const GpuKind& kind = s.catalog().kind(node.kind);
    const GpuId first = snap->cluster->node(t.node).first_gpu;
    nlohmann::json gpus = nlohmann::json::array();
    for (const GpuGrant& g : t.gpus) {
      nlohmann::json gj = {{"index", g.gpu - first}, {"milli", g.milli}, {"memory_mib", g.memory_mib}};
      gj["mig_profile"] = g.mig_profile >= 0 ? nlohmann::json(kind.profiles[g.mig_profile].name) : nlohmann::json();
      gj["mig_start"] = g.mig_profile >= 0 ? nlohmann::json(static_cast<int>(g.mig_start)) : nlohmann::json();
      gpus.push_back(std::move(gj));
    }
    out.push_back({{"node", node.name}, {"gpu_kind", kind.id}, {"gpus", std::move(gpus)}});
  }
  return out;
}

nlohmann::json ReasonJson(const std::optional<PendingInfo>& p, JobState state) {
  if (state != JobState::kPending) return nullptr;
  if (!p) return nullptr;  // no cycle has seen the job yet
  nlohmann::json o = {{"code", p->code}, {"message", p->message}};
  if (p->reservation)  // it would fit but for a gang's reservation: which gang, from when
    o["reservation"] = {{"job", std::to_string(p->reservation->id)},
                        {"name", p->reservation->name},
                        {"starts_at", TimeJson(p->reservation_start)}};
  return o;
}

std::string ToLower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// The estimate's range and why it last changed; null when there is none.
nlohmann::json EstimateJson(const PendingInfo& p) {
  if (p.estimated_start < 0) return nullptr;
  nlohmann::json o = {{"earliest", TimeJson(p.estimate_earliest)},
                      {"likely", TimeJson(p.estimated_start)},
                      {"latest", TimeJson(p.estimate_latest)},
                      {"made_at", TimeJson(p.estimated_at)}};
  o["changed_because"] = p.estimate_change.empty() ? nlohmann::json() : nlohmann::json(p.estimate_change);
  return o;
}

// GPU-hours held so far (whole-GPU equivalents; to the hundredth), from its placements and run time.
double GpuHours(const JobRecord& j, int64_t now) {
  if (j.started_at < 0) return 0;
  const int64_t end = j.finished_at >= 0 ? j.finished_at : (j.state == JobState::kRunning ? now : j.started_at);
  int64_t milli = 0;
  for (const TaskPlacement& t : j.placements)
    for (const GpuGrant& g : t.gpus) milli += g.milli;
  const int64_t centi = (milli * std::max<int64_t>(0, end - j.started_at) + 18000) / 36000;  // GPU-hours x 100
  return static_cast<double>(centi) / 100;
}

// Why the placement differs from the request, when it does (MIG profile of the instances it holds).
std::string PlacementNote(const JobRecord& j, const Service& s) {
  if (j.mig_profile.empty() || j.placements.empty()) return "";
  auto snap = s.snapshot();
  const Cluster& cl = snap->cluster->cluster();
  for (const TaskPlacement& t : j.placements) {
    if (t.node < 0 || t.node >= static_cast<NodeId>(cl.nodes.size())) continue;
    const GpuKind& kind = s.catalog().kind(cl.nodes[t.node].kind);
    for (const GpuGrant& g : t.gpus) {
      if (g.mig_profile < 0 || kind.profiles[g.mig_profile].name == j.mig_profile) continue;
      if (g.milli >= kind.ProfileComputeMilli(g.mig_profile))
        return fmt::format("asked for a {} instance; placed in a whole {} instance: {}", j.mig_profile,
                           kind.profiles[g.mig_profile].name,
                           j.cls == WorkloadClass::kTraining
                               ? fmt::format("the smallest {} instance that holds its need", kind.id)
                               : fmt::format("no idle {} instance was free", j.mig_profile));
      return fmt::format("asked for a {} instance; placed in a shared {} instance ({:.2f} GPU of its compute): no "
                         "idle {} instance was free",
                         j.mig_profile, kind.profiles[g.mig_profile].name, g.milli / 1000.0, j.mig_profile);
    }
  }
  return "";
}

}  // namespace

nlohmann::json JobDetailJson(const JobView& v, const Service& s) {
  nlohmann::json o = JobJson(v, s);
  o["spec"] = nlohmann::json::parse(v.job->spec_json, nullptr, false);
  if (o["spec"].is_discarded()) o["spec"] = nullptr;
  const std::string note = PlacementNote(*v.job, s);
  o["placement_note"] = note.empty() ? nlohmann::json() : nlohmann::json(note);
  return o;
}

nlohmann::json JobJson(const JobView& v, const Service& s) {
  const JobRecord& j = *v.job;
  nlohmann::json o = {{"id", std::to_string(j.id)},
                      {"name", j.name},
                      {"team", j.team},
                      {"project", j.project},
                      {"user", j.user},
                      {"class", WorkloadClassName(j.cls)},
                      {"state", JobStateName(j.state)},
                      {"priority_class", j.priority_class},
                      {"gpus", TotalGpus(j)},
                      {"tasks", j.request.tasks * j.replicas},
                      {"submitted_at", TimeJson(j.submitted_at)},
                      {"started_at", TimeJson(j.started_at)},
                      {"finished_at", TimeJson(j.finished_at)},
                      {"duration_s", j.duration_s}};
  o["mig_profile"] = j.mig_profile.empty() ? nlohmann::json() : nlohmann::json(j.mig_profile);
  const bool pending = j.state == JobState::kPending && v.pending.has_value();
  o["queue_position"] = pending ? nlohmann::json(v.pending->pool_position) : nlohmann::json();
  o["team_position"] = pending ? nlohmann::json(v.pending->team_position) : nlohmann::json();
  o["reason"] = ReasonJson(v.pending, j.state);
  o["estimated_start"] = pending ? TimeJson(v.pending->estimated_start) : nlohmann::json();
  o["estimate"] = pending ? EstimateJson(*v.pending) : nlohmann::json();
  o["gpu_hours"] = GpuHours(j, s.Now());
  o["placements"] = PlacementsJson(j.placements, s);
  o["message"] = j.message;
  // Where its run is on the backend: starting (holds its GPUs; a MIG reconfiguration or the launch is in
  // flight), cancelling (its stop is in flight), else the state in lower case.
  o["phase"] = j.starting ? "starting" : j.stopping ? "cancelling" : nlohmann::json(ToLower(JobStateName(j.state)));
  return o;
}

nlohmann::json QueueEntryJson(const QueueEntry& e, const Service& s) {
  const JobRecord& j = *e.job;
  return {{"id", std::to_string(j.id)},
          {"name", j.name},
          {"team", j.team},
          {"project", j.project},
          {"user", j.user},
          {"priority_class", j.priority_class},
          {"gpus", TotalGpus(j)},
          {"submitted_at", TimeJson(j.submitted_at)},
          {"queue_position", e.info.pool_position},
          {"pool_position", e.info.pool_position},
          {"team_position", e.info.team_position},
          {"reason", {{"code", e.info.code}, {"message", e.info.message.str()}}},
          {"estimated_start", TimeJson(e.info.estimated_start)}};
}

static nlohmann::json Gpus(int64_t milli) {
  return milli < 0 ? nlohmann::json() : nlohmann::json(static_cast<double>(milli) / 1000.0);
}

nlohmann::json TeamJson(const TeamView& t) {
  return {{"name", t.name},
          {"guaranteed_gpus", Gpus(t.guaranteed_milli)},
          {"limit_gpus", Gpus(t.limit_milli)},
          {"over_quota_weight", t.over_quota_weight},
          {"allowed_priority_classes", t.allowed_classes},
          {"version", t.version},
          {"allocated_gpus", Gpus(t.allocated_milli)},
          {"fair_share_gpus", Gpus(t.fair_share_milli)},
          {"pending_gpus", Gpus(t.pending_milli)}};
}

nlohmann::json AuditJson(const AuditRow& a) {
  auto parsed = [](const std::string& text) {
    return text.empty() ? nlohmann::json() : nlohmann::json::parse(text, nullptr, false);
  };
  return {{"id", std::to_string(a.id)}, {"time", TimeJson(a.time)}, {"actor", a.actor},   {"action", a.action},
          {"target", a.target},         {"source", a.source},       {"before", parsed(a.before)},
          {"after", parsed(a.after)},   {"changed", a.changed}};
}

nlohmann::json UserJson(const UserView& u) {
  nlohmann::json o = {{"name", u.name}, {"team", u.team}, {"role", RoleName(u.role)}, {"token_active", u.token_active}};
  if (!u.token.empty()) o["token"] = u.token;
  return o;
}

nlohmann::json ClusterJson(const Snapshot& snap) {
  const ClusterSummary& cs = *snap.summary;
  nlohmann::json nodes = nlohmann::json::array();
  for (const NodeSummary& n : cs.nodes) {
    nlohmann::json gpus = nlohmann::json::array();
    for (const GpuSummary& g : n.gpus) {
      nlohmann::json layout = nlohmann::json::array();
      for (const InstanceSummary& m : g.instances)
        layout.push_back({{"profile", m.profile}, {"start", m.start}, {"busy", m.busy}});
      gpus.push_back({{"index", g.index},
                      {"mig_enabled", g.mig_enabled},
                      {"mig_layout", std::move(layout)},
                      {"tasks", g.tasks},
                      {"allocated_milli", g.allocated_milli},
                      {"utilisation", static_cast<double>(g.allocated_milli) / kMilliPerGpu}});
    }
    nodes.push_back({{"name", n.name},
                     {"state", n.state},
                     {"gpu_kind", n.gpu_kind},
                     {"leaf", n.leaf},
                     {"tier", TierName(n.tier)},
                     {"gpu_count", static_cast<int>(n.gpus.size())},
                     {"allocated_gpus", static_cast<double>(n.allocated_milli) / kMilliPerGpu},
                     {"gpus", std::move(gpus)}});
  }
  return {{"name", cs.name},
          {"at", TimeJson(snap.at)},
          {"nodes", std::move(nodes)},
          {"totals",
           {{"nodes", static_cast<int64_t>(cs.nodes.size())},
            {"gpus", cs.gpus},
            {"busy_gpus", cs.busy_gpus},
            {"allocated_gpus", static_cast<double>(cs.allocated_milli) / kMilliPerGpu},
            {"utilisation", cs.utilisation()}}}};
}

nlohmann::json NodeJson(const NodeView& v) {
  nlohmann::json o = v.spec;
  o["state"] = v.state;
  o["tasks"] = v.tasks;
  return o;
}

nlohmann::json ErrorJson(const ApiError& e) {
  return {{"error", {{"code", ErrorCodeName(e.code)}, {"field", e.field}, {"message", e.message}}}};
}

namespace {

std::string CsvText(const std::string& v) {
  if (!v.empty() && std::string_view("=+-@\t\r").find(v.front()) != std::string_view::npos) return CsvField("'" + v);
  return CsvField(v);
}

}  // namespace

std::string UsageCsv(const std::vector<UsageRow>& rows) {
  std::string out = "team,project,job,tier,idle,gpu_hours,cost,idle_share_cost,price_book_date\n";
  for (const UsageRow& r : rows)
    out += fmt::format("{},{},{},{},{},{:.6f},{:.6f},{:.6f},{}\n", CsvText(r.team), CsvText(r.project),
                       CsvText(r.job), CsvText(r.tier), r.idle ? "true" : "false", r.gpu_hours, r.cost,
                       r.idle_share_cost, CsvText(r.price_book_date));
  return out;
}

nlohmann::json UsageJson(const std::vector<UsageRow>& rows, int64_t from, int64_t to, const std::string& group_by) {
  nlohmann::json arr = nlohmann::json::array();
  for (const UsageRow& r : rows) {
    auto key = [&](const std::string& v, bool filled) { return filled ? nlohmann::json(v) : nlohmann::json(); };
    arr.push_back({{"team", key(r.team, !r.team.empty())},
                   {"project", key(r.project, group_by != "team" && !r.idle)},
                   {"job", key(r.job, group_by == "job" && !r.idle)},
                   {"tier", key(r.tier, !r.tier.empty())},
                   {"idle", r.idle},
                   {"gpu_hours", r.gpu_hours},
                   {"cost", r.cost},
                   {"idle_share_cost", r.idle_share_cost},
                   {"price_book_date", key(r.price_book_date, !r.price_book_date.empty())}});
  }
  return {{"from", TimeJson(from)}, {"to", TimeJson(to)}, {"group_by", group_by}, {"rows", std::move(arr)}};
}

}  // namespace tessera
