#pragma once
// The resource shape of a single task and the typical-task distribution of a workload (FGD's M,
// ../shared/reference/fgd-harness.md): plain values that policies are built from (PolicyOptions).
//
// Harness requests are single tasks (Request::tasks == 1) of one of three forms:
//   CPU-only:  gpus_per_task == 0 && gpu_milli == 0
//   sharing:   gpus_per_task == 0 && 0 < gpu_milli < 1000 (a share of one non-MIG GPU)
//   whole:     gpus_per_task == k >= 1 (k fully free non-MIG GPUs), or gpus_per_task == 0 && gpu_milli == 1000

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "model/cluster.h"
#include "sched/request.h"

namespace tessera {

// The resource shape of a single task as the FGD measure groups tasks.
struct TaskShape {
  int64_t cpu_milli = 0;
  int num_gpu = 0;         // 0 = CPU-only
  int gpu_milli = 0;       // per GPU: 1..999 sharing (num_gpu == 1), 1000 whole GPUs, 0 CPU-only
  uint64_t kind_mask = 0;  // allowed GPU kinds, 0 = any
  bool operator==(const TaskShape&) const = default;
  bool CpuOnly() const { return num_gpu == 0; }
  bool Sharing() const { return num_gpu == 1 && gpu_milli < kMilliPerGpu; }
  bool KindAllowed(KindId k) const { return kind_mask == 0 || (k >= 0 && ((kind_mask >> k) & 1u)); }
};

// Shape of a harness request (see the forms above). Does not validate; see CheckHarnessRequest.
TaskShape ShapeOf(const Request& r);
// OK when `r` is one of the three harness forms, else an error saying why.
Status CheckHarnessRequest(const Request& r);

// One task of a workload as the distribution counts it: its shape, host memory and whether it trains.
struct TaskSample {
  TaskShape shape;
  int64_t host_memory_mib = 0;
  bool training = false;
};

// The typical-task distribution M: the most common shapes of a workload with their probabilities.
struct TaskShapeDistribution {
  std::vector<TaskShape> shapes;  // most common first
  std::vector<double> prob;       // parallel to shapes; sums to 1 (empty distribution: no shapes)
  // Parallel to shapes: median host memory of the shape's tasks (FGD ignores it; tessera's score uses
  // it). Empty when unknown (Typical()), which counts as 0.
  std::vector<int64_t> memory_mib;
  // The share of all the workload's tasks (not only the typical ones) that are training tasks.
  double training_share = 0;

  // Whether the workload has both training and other tasks (then class separation still ranks nodes
  // first for a policy that separates classes; docs/architecture.md "Policies").
  bool MixesClasses() const { return training_share > 0 && training_share < 1; }

  // Groups `tasks` by shape and keeps the smallest most-common-first prefix covering at least
  // `coverage` of the tasks (equal counts: the shape seen first comes first); renormalised.
  static TaskShapeDistribution Typical(const std::vector<TaskShape>& tasks, double coverage = 0.95);
  // Typical over the samples' shapes, with each typical shape's median host memory and the training share.
  static TaskShapeDistribution FromSamples(const std::vector<TaskSample>& samples, double coverage = 0.95);
  // FromSamples over one sample per request.
  static TaskShapeDistribution FromRequests(const std::vector<Request>& requests, double coverage = 0.95);
};

}  // namespace tessera
