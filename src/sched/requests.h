#pragma once
// Turning user workloads into engine requests.

#include <vector>

#include "base/status.h"
#include "model/catalog.h"
#include "model/workload.h"
#include "sched/request.h"

namespace tessera {

// An inference workload with R replicas becomes R one-task requests; a training workload becomes one gang
// request of `workers` tasks. Ids are assigned from `first_id` upwards. Errors name the workload and field.
// Latency-sensitive work is limited to reserved and owned capacity.
Result<std::vector<Request>> ToRequests(const Workload& w, const Catalog& catalog, JobId first_id);

}  // namespace tessera
