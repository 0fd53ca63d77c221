#include "server/metrics.h"

#include <fmt/format.h>

#include <map>
#include <utility>

#include "base/allocator.h"

namespace tessera {
namespace {

std::string Esc(const std::string& v) {
  std::string o;
  for (char c : v) {
    if (c == '\\' || c == '"') o += '\\';
    if (c == '\n') {
      o += "\\n";
      continue;
    }
    o += c;
  }
  return o;
}

void Head(std::string* out, const char* name, const char* type, const char* help) {
  *out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

// The memory allocator's own figures, where it reports them (tcmalloc): what the process has in use, what
// its threads' caches hold, and their cap (base/allocator.h).
void AllocatorGauges(std::string* o) {
  const AllocatorStats a = ReadAllocatorStats();
  if (!a.in_use && !a.thread_caches && !a.thread_cache_limit) return;
  Head(o, "tessera_allocator_bytes", "gauge",
       "The memory allocator's bytes: in use by the process, held in threads' caches, and the cap on those.");
  for (const auto& [kind, v] : {std::pair{"in_use", a.in_use}, std::pair{"thread_caches", a.thread_caches},
                                std::pair{"thread_cache_limit", a.thread_cache_limit}})
    if (v) *o += fmt::format("tessera_allocator_bytes{{kind=\"{}\"}} {}\n", kind, *v);
}

// Pending jobs per team and reason (from the last cycle's plan), running jobs per team, nodes per state.
void JobAndNodeGauges(const Service& s, const Snapshot& snap, std::string* o) {
  std::map<std::pair<std::string, std::string>, int64_t> pending;
  for (const QueueEntry& e : snap.queue) ++pending[{e.job->team, std::string(e.info.code)}];
  Head(o, "tessera_pending_jobs", "gauge", "Jobs waiting, per team and reason code, after the last cycle.");
  for (const auto& [k, n] : pending)
    *o += fmt::format("tessera_pending_jobs{{team=\"{}\",reason=\"{}\"}} {}\n", Esc(k.first), Esc(k.second), n);
  Head(o, "tessera_running_jobs", "gauge", "Jobs running, per team.");
  for (const auto& [team, pr] : s.JobCountsByTeam())
    *o += fmt::format("tessera_running_jobs{{team=\"{}\"}} {}\n", Esc(team), pr.second);
  Head(o, "tessera_jobs_in_memory", "gauge",
       "Jobs this process holds in memory: the live ones and the --retain-ended most recently ended.");
  *o += fmt::format("tessera_jobs_in_memory {}\n", s.JobsInMemory());
  AllocatorGauges(o);
  Head(o, "tessera_nodes", "gauge", "Nodes of the cluster, per state (ready, cordoned, draining, drained, unhealthy).");
  std::map<std::string, int64_t> by_state = {{"ready", 0}, {"cordoned", 0}, {"draining", 0}, {"drained", 0}, {"unhealthy", 0}};
  for (const NodeSummary& n : snap.summary->nodes) ++by_state[n.state];
  for (const auto& [st, n] : by_state) *o += fmt::format("tessera_nodes{{state=\"{}\"}} {}\n", st, n);
}

// Histogram `h` as Prometheus text: buckets, sum and count of series `name` with `labels` (may be empty).
template <size_t N>
void Histogram(const DurationHistogram<N>& h, const std::string& name, const std::string& labels,
               std::string* o) {
  uint64_t cum = 0;
  const std::string sep = labels.empty() ? "" : ",";
  for (size_t b = 0; b <= N; ++b) {
    cum += h.bucket[b].load();
    const std::string le = b < N ? fmt::format("{}", h.bounds[b]) : "+Inf";
    *o += fmt::format("{}_bucket{{{}{}le=\"{}\"}} {}\n", name, labels, sep, le, cum);
  }
  const std::string braces = labels.empty() ? "" : "{" + labels + "}";
  *o += fmt::format("{}_sum{} {:.6f}\n", name, braces, h.sum_us.load() / 1e6);
  *o += fmt::format("{}_count{} {}\n", name, braces, cum);
}

// The cycle's histograms and the event counters.
void CycleAndCounters(const Counters& c, std::string* o) {
  Head(o, "tessera_cycle_duration_seconds", "histogram", "Duration of one scheduling cycle.");
  Histogram(c.cycle, "tessera_cycle_duration_seconds", "", o);
  Head(o, "tessera_cycle_lock_held_seconds", "histogram",
       "How long a cycle held the lock requests wait for: building its input (phase input, once a cycle) or "
       "applying a slice of its plan (phase apply).");
  Histogram(c.lock_input, "tessera_cycle_lock_held_seconds", "phase=\"input\"", o);
  Histogram(c.lock_apply, "tessera_cycle_lock_held_seconds", "phase=\"apply\"", o);
  const std::pair<const char*, const char*> simple[] = {
      {"tessera_placements_total", "Jobs placed (bound to GPUs)."},
      {"tessera_preemptions_total", "Running jobs preempted."},
      {"tessera_mig_repartitions_total", "MIG instances created or destroyed, or MIG modes switched, for placements."},
      {"tessera_job_submissions_total", "Jobs accepted (durable)."},
      {"tessera_jobs_finished_total", "Jobs that ended on their own (succeeded or failed)."},
      {"tessera_jobs_failed_total", "Jobs that failed."},
      {"tessera_jobs_cancelled_total", "Jobs cancelled."}};
  const uint64_t values[] = {c.placements.load(), c.preemptions.load(), c.mig_repartitions.load(),
                             c.submissions.load(), c.finished.load(), c.failed.load(), c.cancelled.load()};
  for (size_t i = 0; i < std::size(simple); ++i) {
    Head(o, simple[i].first, "counter", simple[i].second);
    *o += fmt::format("{} {}\n", simple[i].first, values[i]);
  }
}

// Teams: allocation and fair share after the last cycle, against guarantee.
void TeamGauges(const Service& s, const Snapshot& snap, std::string* o) {
  Head(o, "tessera_team_allocated_gpus", "gauge", "GPUs (in GPU units) a team holds after the last cycle.");
  for (size_t q = 0; q < snap.queues.size() && q < snap.queue_names.size(); ++q)
    *o += fmt::format("tessera_team_allocated_gpus{{team=\"{}\"}} {}\n", Esc(snap.queue_names[q]),
                      snap.queues[q].allocated_milli / 1000.0);
  Head(o, "tessera_team_fair_share_gpus", "gauge", "GPUs a team deserves in the last cycle (guarantee plus share of idle).");
  for (size_t q = 0; q < snap.queues.size() && q < snap.queue_names.size(); ++q)
    *o += fmt::format("tessera_team_fair_share_gpus{{team=\"{}\"}} {}\n", Esc(snap.queue_names[q]),
                      snap.queues[q].fair_share_milli / 1000.0);
  Head(o, "tessera_team_guaranteed_gpus", "gauge", "GPUs guaranteed to a team.");
  Caller admin{"", "", Role::kAdmin};
  for (const TeamView& t : s.Teams(admin))
    *o += fmt::format("tessera_team_guaranteed_gpus{{team=\"{}\"}} {}\n", Esc(t.name), t.guaranteed_milli / 1000.0);
}

}  // namespace

// GPUs, under Tessera's own names: these figures are what Tessera accounts (the share jobs hold), never a
// device measurement, so they do not borrow the DCGM exporter's names. Utilisation is the allocated share
// (the simulated backend keeps what it holds busy); MIG instances are 1 while a job holds them.
std::string GpuMetricsText(const ClusterSummary& cs) {
  std::string util, alloc, mig;
  for (const NodeSummary& n : cs.nodes) {
    for (const GpuSummary& g : n.gpus) {
      const std::string labels =
          fmt::format("gpu=\"{}\",device=\"nvidia{}\",model_name=\"{}\",hostname=\"{}\"", g.index, g.index,
                      Esc(n.gpu_kind), Esc(n.name));
      for (const InstanceSummary& m : g.instances)
        mig += fmt::format("tessera_mig_instance_busy{{{},mig_profile=\"{}\",mig_start=\"{}\"}} {}\n", labels,
                           Esc(m.profile), m.start, m.busy ? 1 : 0);
      util += fmt::format("tessera_gpu_utilization_ratio{{{}}} {}\n", labels, g.allocated_milli / 1000.0);
      alloc += fmt::format("tessera_gpu_allocated_ratio{{{}}} {}\n", labels, g.allocated_milli / 1000.0);
    }
  }
  std::string out;
  Head(&out, "tessera_gpu_utilization_ratio", "gauge",
       "GPU utilisation (0 to 1) as Tessera accounts it: the allocated share, not measured on the device.");
  out += util;
  Head(&out, "tessera_gpu_allocated_ratio", "gauge", "Share of the GPU held by jobs (0 to 1).");
  out += alloc;
  Head(&out, "tessera_mig_instance_busy", "gauge",
       "1 while a job holds the MIG instance, else 0 (not measured on the device).");
  return out + mig;
}

std::string MetricsText(const Service& s) {
  std::string o;
  auto snap = s.snapshot();
  JobAndNodeGauges(s, *snap, &o);
  CycleAndCounters(s.counters(), &o);
  TeamGauges(s, *snap, &o);
  o += GpuMetricsText(*snap->summary);
  return o;
}

}  // namespace tessera
