#include "k8s/dra/dra_binder.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "k8s/api/objects.h"

namespace tessera {

using json = nlohmann::json;

namespace {

const json* PodClaimList(const json& pod) {
  const json* spec = Field(pod, "spec");
  const json* rc = spec != nullptr ? Field(*spec, "resourceClaims") : nullptr;
  return rc != nullptr && rc->is_array() ? rc : nullptr;
}

std::string ClaimPath(const std::string& key) {
  const size_t slash = key.find('/');
  return fmt::format("/apis/resource.k8s.io/v1/namespaces/{}/resourceclaims/{}", key.substr(0, slash),
                     key.substr(slash + 1));
}

DraPodPlan Refuse(std::string reason, std::string message) {
  DraPodPlan p;
  p.kind = DraPodPlan::Kind::kRefuse;
  p.reason = std::move(reason);
  p.message = std::move(message);
  return p;
}

DraPodPlan Wait(std::string message) {
  DraPodPlan p;
  p.message = std::move(message);
  return p;
}

// The parsed claims of the pod, or a plan saying why it cannot go on yet.
std::optional<DraPodPlan> ParseClaims(const json& pod, const DraWorld& w, std::vector<std::string>* keys,
                                      std::vector<DraClaim>* out) {
  *keys = PodClaimKeys(pod);
  for (size_t i = 0; i < keys->size(); ++i) {
    const std::string& key = (*keys)[i];
    if (key.empty()) return Wait(fmt::format("claim #{} has not been created from its template yet", i));
    auto it = w.claims->find(key);
    if (it == w.claims->end()) return Wait("claim " + key + " does not exist yet");
    auto c = ParseResourceClaim(it->second);
    if (!c.ok()) return Refuse("InvalidClaim", "tessera: " + c.error());
    if (c->deleting) return Wait("claim " + key + " is being deleted");
    if (c->spec.has_constraints && !c->allocation)
      return Refuse("Unsupported",
                    fmt::format("tessera: claim {} uses spec.devices.constraints, which Tessera does "
                                "not evaluate yet",
                                key));
    out->push_back(std::move(c).value());
  }
  return std::nullopt;
}

}  // namespace

bool PodUsesDra(const json& pod) {
  const json* rc = PodClaimList(pod);
  return rc != nullptr && !rc->empty();
}

std::vector<std::string> PodClaimKeys(const json& pod) {
  std::vector<std::string> keys;
  const json* rc = PodClaimList(pod);
  if (rc == nullptr) return keys;
  const std::string ns = Meta(pod, "namespace");
  const json* status = Field(pod, "status");
  const json* statuses = status != nullptr ? Field(*status, "resourceClaimStatuses") : nullptr;
  for (const json& pc : *rc) {
    std::string name = StringField(pc, "resourceClaimName");
    if (name.empty() && statuses != nullptr && statuses->is_array())
      for (const json& st : *statuses)
        if (StringField(st, "name") == StringField(pc, "name")) name = StringField(st, "resourceClaimName");
    keys.push_back(name.empty() ? "" : ns + "/" + name);
  }
  return keys;
}

DraPodPlan PlanDraPod(const json& pod, const DraWorld& w) {
  std::vector<std::string> keys;
  std::vector<DraClaim> claims;
  if (auto stop = ParseClaims(pod, w, &keys, &claims)) return *stop;
  std::string fixed;  // the node claims already allocated name
  std::vector<DraClaimRef> refs;
  for (size_t i = 0; i < claims.size(); ++i) {
    if (!claims[i].allocation) {
      refs.push_back({keys[i], &claims[i].spec});
      continue;
    }
    const auto& nodes = claims[i].allocation->nodes;
    if (nodes.size() != 1)
      return Refuse("Unsupported",
                    fmt::format("tessera: claim {} is allocated without a nodeSelector naming one "
                                "node",
                                keys[i]));
    if (!fixed.empty() && fixed != nodes[0])
      return Refuse("Unschedulable",
                    fmt::format("tessera: the pod's claims are allocated on different nodes ({} "
                                "and {})",
                                fixed, nodes[0]));
    fixed = nodes[0];
  }
  DraPodPlan plan;
  plan.kind = DraPodPlan::Kind::kBind;
  plan.node = fixed;
  std::map<std::string, std::vector<DraDeviceResult>> chosen;
  if (!refs.empty()) {
    DraAllocateOptions opt;
    opt.policy = w.policy;
    opt.nodes = fixed.empty() ? w.nodes : std::vector<std::string>{fixed};
    if (opt.nodes.empty()) return Refuse("Unschedulable", "tessera: no ready node publishes DRA devices");
    const DraDecision d = AllocateDra(*w.model, *w.classes, *w.usage, refs, opt);
    if (!d.fits)
      return Refuse(d.unsupported ? "Unsupported" : "Unschedulable",
                    fmt::format("tessera: {}{}", d.reason,
                                fixed.empty() ? ""
                                              : " (on " + fixed +
                                                    ", where "
                                                    "the pod's allocated claims are)"));
    CommitDra(d, w.usage);
    plan.node = d.node;
    for (const DraClaimChoice& c : d.claims) chosen[c.claim] = c.results;
  }
  for (const std::string& key : keys) {
    auto it = chosen.find(key);
    plan.claims.push_back(
        {key, it != chosen.end(), it != chosen.end() ? it->second : std::vector<DraDeviceResult>{}});
  }
  return plan;
}

DraCall DraCallOf(const ApiClient* api) {
  return [api](const std::string& method, const std::string& path, const json& body) {
    if (method == "GET") return api->Get(path);
    if (method == "PUT") return api->Put(path, body);
    return api->Post(path, body);
  };
}

namespace {

// Finalizer, then the status (allocation and reservation) of one claim; retries on 409 with a fresh read.
// Returns the claim as written, or an error.
Result<json> WriteClaim(const json& pod, const std::string& node, const DraClaimWrite& w, json cur,
                        const DraCall& call) {
  const std::string path = ClaimPath(w.key), pod_name = Meta(pod, "name"), pod_uid = Meta(pod, "uid");
  for (int attempt = 0; attempt < 5; ++attempt) {
    auto parsed = ParseResourceClaim(cur);
    if (!parsed.ok()) return Status::Error(parsed.error());
    if (!parsed->HasFinalizer()) {
      const ApiResponse r = call("PUT", path, WithDeleteProtection(cur));
      if (r.status == 409) {
        const ApiResponse g = call("GET", path, nullptr);
        if (!g.ok())
          return Status::Error(fmt::format("claim {}: re-read failed ({} {})", w.key, g.status, g.error));
        cur = g.body;
        continue;
      }
      if (!r.ok())
        return Status::Error(
            fmt::format("claim {}: adding the finalizer failed ({} {})", w.key, r.status, r.error));
      cur = r.body;
      continue;
    }
    if (w.allocate && parsed->allocation)
      return parsed->allocation->results == w.results && parsed->ReservedFor(pod_uid)
                 ? Result<json>(cur)
                 : Status::Error(fmt::format("claim {} was allocated meanwhile", w.key));
    if (!w.allocate && !parsed->allocation)
      return Status::Error(fmt::format("claim {} was deallocated meanwhile", w.key));
    if (!w.allocate && parsed->ReservedFor(pod_uid)) return cur;
    const json alloc = DraAllocationJson(w.results, node);
    json body = cur;
    body["status"] = DraClaimStatusJson(cur.value("status", json::object()), w.allocate ? &alloc : nullptr,
                                        pod_name, pod_uid);
    const ApiResponse r = call("PUT", path + "/status", body);
    if (r.ok()) return r.body;
    if (r.status != 409)
      return Status::Error(fmt::format("claim {}: status update failed ({} {})", w.key, r.status, r.error));
    const ApiResponse g = call("GET", path, nullptr);
    if (!g.ok())
      return Status::Error(fmt::format("claim {}: re-read failed ({} {})", w.key, g.status, g.error));
    cur = g.body;
  }
  return Status::Error(fmt::format("claim {}: still conflicting after 5 attempts", w.key));
}

}  // namespace

DraBindOutcome ExecuteDraPlan(const json& pod, const DraPodPlan& plan,
                              const std::map<std::string, json>& claims, const DraCall& call) {
  DraBindOutcome out;
  if (plan.kind != DraPodPlan::Kind::kBind) {
    out.error = "nothing to bind";
    return out;
  }
  for (const DraClaimWrite& w : plan.claims) {
    auto it = claims.find(w.key);
    if (it == claims.end()) {
      out.error = "claim " + w.key + " is not known";
      return out;
    }
    auto written = WriteClaim(pod, plan.node, w, it->second, call);
    if (!written.ok()) {
      out.error = written.error();
      return out;
    }
    out.claims_now.push_back(std::move(written).value());
  }
  const std::string ns = Meta(pod, "namespace"), name = Meta(pod, "name");
  const json binding = BindingObject(ns, name, Meta(pod, "uid"), plan.node);
  const ApiResponse r = call("POST", fmt::format("/api/v1/namespaces/{}/pods/{}/binding", ns, name), binding);
  if (!r.ok())
    out.error = fmt::format("binding pod {}/{} to {} failed ({} {})", ns, name, plan.node, r.status, r.error);
  out.bound = r.ok();
  return out;
}

}  // namespace tessera
