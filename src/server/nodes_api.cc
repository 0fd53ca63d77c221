#include "server/nodes_api.h"

#include <fmt/format.h>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "base/json_depth.h"
#include "server/json_views.h"
#include "server/respond.h"

namespace tessera {
namespace {

void SendNode(httplib::Response& res, int status, const Outcome<NodeView>& r) {
  if (!r.ok()) return SendJson(res, HttpStatusOf(r.error().code), ErrorJson(r.error()));
  SendJson(res, status, NodeJson(r.value()));
}

}  // namespace

void RegisterNodeRoutes(httplib::Server& h, ServiceRef s,
                        const std::function<std::function<void(const httplib::Request&, httplib::Response&)>(
                            AuthedHandler)>& authed) {
  using Req = const httplib::Request&;
  using Res = httplib::Response&;
  h.Get("/api/v1/nodes", authed([s](const Caller& c, Req, Res res) {
    auto r = s->ListNodes(c);
    if (!r.ok()) return SendJson(res, HttpStatusOf(r.error().code), ErrorJson(r.error()));
    nlohmann::json arr = nlohmann::json::array();
    for (const NodeView& v : r.value()) arr.push_back(NodeJson(v));
    SendJson(res, 200, {{"nodes", std::move(arr)}});
  }));
  h.Get(R"(/api/v1/nodes/([^/:]+))", authed([s](const Caller& c, Req req, Res res) {
    auto r = s->ListNodes(c);
    if (!r.ok()) return SendJson(res, HttpStatusOf(r.error().code), ErrorJson(r.error()));
    for (const NodeView& v : r.value())
      if (v.name == req.matches[1].str()) return SendJson(res, 200, NodeJson(v));
    SendJson(res, 404, ErrorJson({ErrorCode::kNotFound, "", "no node '" + req.matches[1].str() + "'"}));
  }));
  h.Post("/api/v1/nodes", authed([s](const Caller& c, Req req, Res res) {
    if (Status st = CheckJsonDepth(req.body); !st.ok())
      return SendJson(res, 400, ErrorJson(Invalid("", "the request body: " + st.message())));
    const nlohmann::json b = nlohmann::json::parse(req.body, nullptr, false);
    if (b.is_discarded() || !b.is_object())
      return SendJson(res, 400, ErrorJson(Invalid("", "the request body must be a JSON object (a node as in the "
                                                  "cluster YAML)")));
    // Typed as job bodies are: the cluster YAML reader would take "8" for 8.
    for (const char* f : {"gpus", "cpu", "cpu_milli", "memory_gib", "memory_mib", "pcie_group_size",
                          "price_per_gpu_hour", "nic_gbps_per_gpu"})
      if (auto v = b.find(f); v != b.end() && !v->is_number())
        return SendJson(res, 400, ErrorJson(Invalid(f, fmt::format("field '{}': must be a number, not {}", f,
                                                                   v->type_name()))));
    SendNode(res, 201, s->AddNode(c, b.dump()));
  }));
  h.Post(R"(/api/v1/nodes/([^/:]+):(cordon|uncordon|drain))", authed([s](const Caller& c, Req req, Res res) {
    const std::string name = req.matches[1].str(), verb = req.matches[2].str();
    if (verb == "cordon") return SendNode(res, 200, s->CordonNode(c, name));
    if (verb == "uncordon") return SendNode(res, 200, s->UncordonNode(c, name));
    SendNode(res, 200, s->DrainNode(c, name));
  }));
  h.Delete(R"(/api/v1/nodes/([^/:]+))", authed([s](const Caller& c, Req req, Res res) {
    auto r = s->RemoveNode(c, req.matches[1].str());
    if (!r.ok()) return SendJson(res, HttpStatusOf(r.error().code), ErrorJson(r.error()));
    res.status = 204;
  }));
}

}  // namespace tessera
