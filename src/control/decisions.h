#pragma once
// The decision record (`--decisions FILE`): one JSON object per line, in the order the loop decided,
//   {"t": <s>, "job": "<id>", "event": "start"|"preempt"|"end"|"fail"|"cancel",
//    "placements": [{"node": "...", "gpu": <index in the node>, "mig": "<profile>@<start>" | null,
//                    "share": <fraction of the whole GPU>}]}
// with placements on starts only. The simulator and the service write it with this one function, so the
// two files of one scenario compare line by line.

#include <functional>
#include <string>

#include "control/driver.h"
#include "sched/cluster_state.h"

namespace tessera {

using NameOf = std::function<std::string(int64_t)>;
using SlotNameOf = std::function<std::string(JobSlot)>;

// A GPU's MIG layout as "PROFILE@START,..." in instance order ("" when MIG is off): what a backend's
// Reconfigure and the store's layout rows carry.
std::string MigLayoutText(const ClusterState& state, GpuId gpu);

// One line (without the newline). `job_name` maps the decision's group slot, `node_name` a NodeId.
std::string DecisionLine(const Decision& d, const ClusterState& state, const SlotNameOf& job_name,
                         const NameOf& node_name);

}  // namespace tessera
