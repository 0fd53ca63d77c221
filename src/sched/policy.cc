#include "sched/policy.h"

#include <fmt/format.h>

#include "sched/engine_policy.h"

namespace tessera {

std::vector<std::string> PolicyNames() { return {"k8s-default", "bestfit", "static-mig", "tessera"}; }

Result<std::unique_ptr<Policy>> MakePolicy(std::string_view name) {
  std::unique_ptr<Policy> p;
  if (name == "tessera") p = std::make_unique<EnginePolicy>(TesseraTraits());
  else if (name == "k8s-default") p = std::make_unique<EnginePolicy>(K8sDefaultTraits());
  else if (name == "bestfit") p = std::make_unique<EnginePolicy>(BestFitTraits());
  else if (name == "static-mig") p = std::make_unique<EnginePolicy>(StaticMigTraits());
  if (!p) {
    std::string known;
    for (const auto& n : PolicyNames()) known += (known.empty() ? "" : ", ") + n;
    return Status::Error(fmt::format("unknown policy '{}' (known: {})", name, known));
  }
  return p;
}

}  // namespace tessera
