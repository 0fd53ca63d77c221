#pragma once
// WorkloadLearner: the workload's typical tasks (sched/task_shape.h), learned online from what is
// submitted, for the policies whose node score counts what typical tasks will need (tessera). Where a trace
// gives the workload's statistics they are an explicit input (PolicyOptions::typical) and win; everywhere
// else (every driver of the control loop: simulate, serve and its replay, the Kubernetes scheduler) the
// loop learns them with this and hands them to the policy in the cycle's snapshot
// (ClusterState::learned_workload).
//
// It keeps the last `window` samples of submitted requests (the request's task shape, host memory and class),
// a request weighing as many samples as whole GPUs it asks for (one for a share), so that the few large
// gangs are not drowned by the many small replicas beside them. It republishes the distribution every `refresh_every` submissions once `min_requests` have been
// seen, so that a policy's per-distribution caches are rebuilt rarely. Deterministic: the same submissions
// in the same order give the same distributions at the same moments, whichever driver submits them.

#include <cstdint>
#include <memory>
#include <vector>

#include "sched/request.h"
#include "sched/task_shape.h"

namespace tessera {

struct WorkloadLearning {
  bool enabled = true;
  int64_t window = 4096;
  int64_t refresh_every = 256;
  int64_t min_requests = 256;
  double coverage = 0.95;  // the typical shapes cover this share of the window (TaskShapeDistribution)
};

class WorkloadLearner {
 public:
  explicit WorkloadLearner(WorkloadLearning options = {});

  // One submitted request (a job's, or one replica's).
  void Observe(const Request& r);
  // The distribution as of the last refresh; null while disabled or before min_requests submissions.
  const std::shared_ptr<const TaskShapeDistribution>& Current() const { return current_; }
  int64_t observed() const { return observed_; }

 private:
  // A request's samples: one per whole GPU it asks for (its tasks x GPUs per task, at most kMaxWeight), one
  // for a share or a CPU-only request.
  static int64_t Weight(const Request& r);
  static constexpr int64_t kMaxWeight = 64;
  void Refresh();

  WorkloadLearning options_;
  std::vector<TaskSample> window_;  // ring buffer of the last options_.window samples
  size_t next_ = 0;                 // where the next sample goes once the window is full
  int64_t observed_ = 0;
  std::shared_ptr<const TaskShapeDistribution> current_;
};

}  // namespace tessera
