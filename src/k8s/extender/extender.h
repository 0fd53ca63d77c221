#pragma once
// The kube-scheduler extender (k8s.io/kube-scheduler/extender/v1; kubernetes-contracts.md section 1), for
// clusters that keep kube-scheduler and ask Tessera: /filter (which nodes can hold the pod, each refusal
// with its reason and numbers), /prioritize (0..10 per node: fullest fitting node first, so whole nodes
// stay free for gangs), /preempt (per candidate node, the fewest lowest-priority victims that free what the
// pod needs) and /bind. Requests are read as Go's encoding/json reads them (keys case-insensitive, unknown
// keys ignored); answers use the Go field names. Malformed input gets a 4xx with the reason, or a filter
// result whose Error is set: never a crash.
//
// Without a node cache (no --kubeconfig) the extender is nodeCacheCapable: false: it needs Nodes.items,
// and /bind answers an Error (kube-scheduler then binds itself).

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "model/catalog.h"

namespace tessera {

struct ExtenderOptions {
  const Catalog* catalog = nullptr;
  std::string leaf_label = "tessera.io/leaf";
  std::string spine_label;
};

struct ExtenderAnswer {
  int status = 200;
  nlohmann::json body;
};

class Extender {
 public:
  explicit Extender(ExtenderOptions options) : options_(std::move(options)) {}
  ExtenderAnswer Filter(std::string_view body) const;
  ExtenderAnswer Prioritize(std::string_view body) const;
  ExtenderAnswer Preempt(std::string_view body) const;
  ExtenderAnswer Bind(std::string_view body) const;

 private:
  ExtenderOptions options_;
};

}  // namespace tessera
