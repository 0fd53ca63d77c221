#include "sched/requests.h"

#include <fmt/format.h>

namespace tessera {

Result<std::vector<Request>> ToRequests(const Workload& w, const Catalog& catalog, JobId first_id) {
  Request r;
  r.cls = w.cls;
  r.gpus_per_task = w.gpus_per_worker;
  r.gpu_milli = w.gpus_per_worker == 0 ? w.gpu_milli : kMilliPerGpu;
  r.gpu_memory_mib = w.memory_mib;
  r.cpu_milli = w.cpu_milli;
  r.host_memory_mib = w.host_memory_mib;
  for (const std::string& k : w.gpu_kinds) {
    KindId id = catalog.Find(k);
    if (id == kNone) return Status::Error(fmt::format("workload '{}': field 'gpu_kinds': unknown GPU kind '{}'", w.name, k));
    if (id >= 64) return Status::Error(fmt::format("workload '{}': more than 64 GPU kinds in the catalog", w.name));
    r.kind_mask |= uint64_t{1} << id;
  }
  r.latency_sensitive = w.latency_sensitive;
  if (w.latency_sensitive)
    r.tier_mask = static_cast<uint8_t>((1u << static_cast<int>(Tier::kReserved)) | (1u << static_cast<int>(Tier::kOwned)));
  std::vector<Request> out;
  if (w.cls == WorkloadClass::kTraining) {
    r.tasks = w.workers;
    r.id = first_id;
    out.push_back(r);
  } else {
    r.tasks = 1;
    for (int i = 0; i < w.replicas; ++i) {
      r.id = first_id + i;
      out.push_back(r);
    }
  }
  return out;
}

}  // namespace tessera
