#include "sched/task_shape.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <tuple>
#include <utility>

namespace tessera {

TaskShape ShapeOf(const Request& r) {
  TaskShape t;
  t.cpu_milli = r.cpu_milli;
  t.kind_mask = r.kind_mask;
  if (r.gpus_per_task == 0) {
    if (r.gpu_milli <= 0) return t;  // CPU-only
    t.num_gpu = 1;
    t.gpu_milli = std::min(r.gpu_milli, kMilliPerGpu);
  } else {
    t.num_gpu = r.gpus_per_task;
    t.gpu_milli = kMilliPerGpu;
  }
  return t;
}

Status CheckHarnessRequest(const Request& r) {
  if (r.tasks != 1) return Status::Error(fmt::format("harness policies place single tasks, not gangs of {}", r.tasks));
  if (r.gpus_per_task < 0) return Status::Error("gpus_per_task is negative");
  if (r.gpus_per_task == 0 && (r.gpu_milli < 0 || r.gpu_milli > kMilliPerGpu))
    return Status::Error(fmt::format("gpu_milli {} is outside 0..1000", r.gpu_milli));
  if (r.gpus_per_task == 0 && r.gpu_milli > 0 && !r.allow_share)
    return Status::Error("sub-GPU task forbids sharing and harness policies do not place MIG instances");
  if (r.gpu_memory_mib > 0)
    return Status::Error("harness policies model GPU compute shares only (gpu_memory_mib must be 0)");
  if (r.cpu_milli < 0 || r.host_memory_mib < 0) return Status::Error("negative CPU or memory request");
  return Status::Ok();
}

TaskShapeDistribution TaskShapeDistribution::Typical(const std::vector<TaskShape>& tasks, double coverage) {
  using Key = std::tuple<int64_t, int, int, uint64_t>;
  std::map<Key, size_t> index;
  std::vector<std::pair<TaskShape, int64_t>> counts;  // first-seen order
  for (const TaskShape& t : tasks) {
    auto [it, inserted] = index.try_emplace(Key{t.cpu_milli, t.num_gpu, t.gpu_milli, t.kind_mask}, counts.size());
    if (inserted) counts.push_back({t, 0});
    ++counts[it->second].second;
  }
  std::stable_sort(counts.begin(), counts.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  TaskShapeDistribution d;
  const double need = coverage * static_cast<double>(tasks.size());
  int64_t covered = 0;
  for (const auto& [shape, count] : counts) {
    d.shapes.push_back(shape);
    d.prob.push_back(static_cast<double>(count));
    covered += count;
    if (static_cast<double>(covered) >= need) break;
  }
  for (double& p : d.prob) p /= static_cast<double>(covered);
  return d;
}

TaskShapeDistribution TaskShapeDistribution::FromSamples(const std::vector<TaskSample>& samples, double coverage) {
  std::vector<TaskShape> shapes;
  shapes.reserve(samples.size());
  int64_t training = 0;
  for (const TaskSample& t : samples) {
    shapes.push_back(t.shape);
    training += t.training ? 1 : 0;
  }
  TaskShapeDistribution d = Typical(shapes, coverage);
  std::vector<std::vector<int64_t>> mem(d.shapes.size());
  for (size_t j = 0; j < samples.size(); ++j) {
    auto it = std::find(d.shapes.begin(), d.shapes.end(), shapes[j]);
    if (it != d.shapes.end()) mem[static_cast<size_t>(it - d.shapes.begin())].push_back(samples[j].host_memory_mib);
  }
  for (auto& v : mem) {
    std::sort(v.begin(), v.end());
    d.memory_mib.push_back(v.empty() ? 0 : v[v.size() / 2]);
  }
  d.training_share = samples.empty() ? 0 : static_cast<double>(training) / static_cast<double>(samples.size());
  return d;
}

TaskShapeDistribution TaskShapeDistribution::FromRequests(const std::vector<Request>& requests, double coverage) {
  std::vector<TaskSample> samples;
  samples.reserve(requests.size());
  for (const Request& r : requests)
    samples.push_back({ShapeOf(r), r.host_memory_mib, r.cls == WorkloadClass::kTraining});
  return FromSamples(samples, coverage);
}

}  // namespace tessera
