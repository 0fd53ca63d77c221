#include "k8s/fake_apiserver.h"

#include <fmt/format.h>
#include <httplib.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>

namespace tessera::testing {

using json = nlohmann::json;

namespace {

struct Res {
  const char* group;
  const char* version;
  const char* plural;
  const char* kind;
  bool namespaced;
  const char* short_name;
  const char* key = nullptr;  // the store's name for it (Create, List, ...); the plural when null
  bool on_request = false;     // served only once the test asks (ServeKind); else 404, as a CRD not installed
  std::string Key() const { return key != nullptr ? key : plural; }
};

const Res kResources[] = {
    {"", "v1", "nodes", "Node", false, "no"},
    {"", "v1", "pods", "Pod", true, "po"},
    {"", "v1", "events", "Event", true, "ev"},
    {"", "v1", "configmaps", "ConfigMap", true, "cm"},
    {"", "v1", "namespaces", "Namespace", false, "ns"},
    {"coordination.k8s.io", "v1", "leases", "Lease", true, ""},
    {"scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", false, "pc"},
    {"policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", true, "pdb"},
    {"scheduling.x-k8s.io", "v1alpha1", "podgroups", "PodGroup", true, "pg"},
    {"scheduling.volcano.sh", "v1beta1", "queues", "Queue", false, "q"},
    {"scheduling.run.ai", "v2", "queues", "Queue", false, "", "kai-queues"},
    {"resource.k8s.io", "v1", "deviceclasses", "DeviceClass", false, ""},
    {"resource.k8s.io", "v1", "resourceslices", "ResourceSlice", false, ""},
    {"resource.k8s.io", "v1", "resourceclaims", "ResourceClaim", true, ""},
    {"resource.k8s.io", "v1", "resourceclaimtemplates", "ResourceClaimTemplate", true, ""},
    {"nvidia.com", "v1", "clusterpolicies", "ClusterPolicy", false, "", nullptr, true},
};

const Res* FindRes(const std::string& group, const std::string& version, const std::string& plural) {
  for (const Res& r : kResources)
    if (r.group == group && r.version == version && r.plural == plural) return &r;
  return nullptr;
}

const Res* ResNamed(const std::string& key) {
  for (const Res& r : kResources)
    if (r.Key() == key) return &r;
  return nullptr;
}

std::string GroupVersion(const Res& r) {
  return std::string(r.group).empty() ? r.version : fmt::format("{}/{}", r.group, r.version);
}

json StatusOf(int code, const std::string& reason, const std::string& message) {
  return {{"kind", "Status"}, {"apiVersion", "v1"}, {"metadata", json::object()},
          {"status", code < 300 ? "Success" : "Failure"}, {"message", message}, {"reason", reason}, {"code", code}};
}

std::string Str(const json& o, const char* a, const char* b) {
  if (!o.is_object() || !o.contains(a) || !o[a].is_object() || !o[a].contains(b) || !o[a][b].is_string()) return "";
  return o[a][b].get<std::string>();
}

// nvidia.com/* device limits of a pod's containers (whole numbers).
std::map<std::string, int64_t> DeviceLimits(const json& pod) {
  std::map<std::string, int64_t> out;
  if (!pod.contains("spec") || !pod["spec"].contains("containers")) return out;
  for (const json& c : pod["spec"]["containers"]) {
    const json limits = c.contains("resources") ? c["resources"].value("limits", json::object()) : json::object();
    for (const auto& [r, v] : limits.items())
      if (r.rfind("nvidia.com/", 0) == 0 && v.is_string()) out[r] += std::stoll(v.get<std::string>());
  }
  return out;
}

std::vector<std::string> Split(const std::string& path) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string::npos) j = path.size();
    if (j > i) out.push_back(path.substr(i, j - i));
    i = j + 1;
  }
  return out;
}

// A strategic merge patch of pod status: conditions merged by type, the rest as a merge patch.
void PatchStatus(json* pod, json patch) {
  json conditions = patch.contains("status") && patch["status"].is_object() && patch["status"].contains("conditions")
                        ? patch["status"]["conditions"] : json();
  if (!conditions.is_null()) patch["status"].erase("conditions");
  pod->merge_patch(patch);
  if (!conditions.is_array()) return;
  json& have = (*pod)["status"]["conditions"];
  if (!have.is_array()) have = json::array();
  for (const json& c : conditions) {
    auto it = std::find_if(have.begin(), have.end(), [&](const json& h) { return h.value("type", "") == c.value("type", ""); });
    if (it == have.end()) have.push_back(c);
    else *it = c;
  }
}

}  // namespace

FakeApiServer::FakeApiServer() : server_(std::make_unique<httplib::Server>()) {
  server_->new_task_queue = [] { return new httplib::ThreadPool(128); };  // kept-alive connections hold a thread each
  // As kube-apiserver (Go's net/http): a kept-alive connection serves any number of requests.
  server_->set_keep_alive_max_count(1 << 20);
  Routes();
  port_ = server_->bind_to_any_port("127.0.0.1");
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  while (!server_->is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

FakeApiServer::~FakeApiServer() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  server_->stop();
  thread_.join();
  for (std::thread& t : timers_) t.join();
}

std::string FakeApiServer::url() const { return fmt::format("http://127.0.0.1:{}", port_); }

void FakeApiServer::WriteKubeconfig(const std::string& path, const std::string& ns) const {
  std::ofstream(path) << fmt::format(
      "apiVersion: v1\nkind: Config\ncurrent-context: fake\nclusters:\n- name: fake\n  cluster:\n    server: {}\n"
      "contexts:\n- name: fake\n  context:\n    cluster: fake\n    user: fake\n    namespace: {}\n"
      "users:\n- name: fake\n  user:\n    token: fake-token\n",
      url(), ns);
}

void FakeApiServer::ServeKind(const std::string& resource) {
  std::lock_guard<std::mutex> l(mu_);
  served_on_request_.insert(resource);
}

bool FakeApiServer::KindServed(const std::string& resource) const {
  std::lock_guard<std::mutex> l(mu_);
  return served_on_request_.count(resource) > 0;
}

void FakeApiServer::Routes() {
  auto handler = [this](const httplib::Request& req, httplib::Response& res) {
    std::map<std::string, std::string> query;
    for (const auto& [k, v] : req.params) query[k] = v;
    const bool watch = query.count("watch") && (query["watch"] == "1" || query["watch"] == "true");
    if (req.method == "GET" && watch) {
      const std::vector<std::string> segs = Split(req.path);
      const std::string group = segs.size() > 2 && segs[0] == "apis" ? segs[1] : "";
      const std::string version = segs.size() > 2 && segs[0] == "apis" ? segs[2] : segs.size() > 1 ? segs[1] : "";
      const Res* r = FindRes(group, version, segs.empty() ? "" : segs.back());
      if (r != nullptr && r->on_request && !KindServed(r->Key())) r = nullptr;
      if (r == nullptr) {
        res.status = 404;
        res.set_content(StatusOf(404, "NotFound", "the server could not find the requested resource").dump(),
                         "application/json");
        return;
      }
      const int64_t rv = query.count("resourceVersion") && !query["resourceVersion"].empty()
                             ? std::stoll(query["resourceVersion"]) : 0;
      const bool bookmarks = query.count("allowWatchBookmarks") && query["allowWatchBookmarks"] == "true";
      const int timeout_s = query.count("timeoutSeconds") ? std::stoi(query["timeoutSeconds"]) : 300;
      {
        std::lock_guard<std::mutex> l(mu_);
        requests_.push_back({"WATCH", req.path, 200, ""});
      }
      const std::string plural = r->Key();
      res.set_chunked_content_provider("application/json", [this, plural, rv, bookmarks, timeout_s](
                                                               size_t, httplib::DataSink& sink) {
        StreamWatch(plural, rv, bookmarks, timeout_s, [&](const std::string& s) { return sink.write(s.data(), s.size()); });
        sink.done();
        return true;
      });
      return;
    }
    if (req.method != "GET") HoldWrite(req.path);
    std::optional<Answer> injected = InjectedFor(req.method, req.path);
    const Answer a = injected ? *injected : Handle(req.method, req.path, query, req.body);
    {
      std::lock_guard<std::mutex> l(mu_);
      requests_.push_back({req.method, req.path, a.status, req.body});
    }
    res.status = a.status;
    res.set_content(a.body.dump(), "application/json");
  };
  server_->Get(".*", handler);
  server_->Post(".*", handler);
  server_->Put(".*", handler);
  server_->Patch(".*", handler);
  server_->Delete(".*", handler);
}

FakeApiServer::Answer FakeApiServer::Handle(const std::string& method, const std::string& path,
                                            const std::map<std::string, std::string>& query, const std::string& body) {
  std::vector<std::string> segs = Split(path);
  if (segs.empty() || segs == std::vector<std::string>{"version"} || segs == std::vector<std::string>{"api"} ||
      segs == std::vector<std::string>{"apis"} || (segs[0] == "api" && segs.size() == 2) ||
      (segs[0] == "apis" && segs.size() <= 3))
    return Discovery(segs);
  size_t at = segs[0] == "api" ? 2 : 3;
  const std::string group = segs[0] == "apis" ? segs[1] : "";
  const std::string version = segs[0] == "apis" ? segs[2] : segs[1];
  std::string ns;
  if (segs.size() > at + 2 && segs[at] == "namespaces") ns = segs[at + 1], at += 2;
  const Res* r = segs.size() > at ? FindRes(group, version, segs[at]) : nullptr;
  if (r != nullptr && r->on_request && !KindServed(r->Key())) r = nullptr;
  if (r == nullptr) return {404, StatusOf(404, "NotFound", "the server could not find the requested resource")};
  const std::string name = segs.size() > at + 1 ? segs[at + 1] : "";
  const std::string sub = segs.size() > at + 2 ? segs[at + 2] : "";
  if (name.empty()) return Collection(method, r->Key(), ns, body);
  return Object(method, r->Key(), ns, name, sub, body);
}

FakeApiServer::Answer FakeApiServer::Discovery(const std::vector<std::string>& segs) const {
  if (segs == std::vector<std::string>{"version"})
    return {200, {{"major", "1"}, {"minor", "32"}, {"gitVersion", "v1.32.0"}, {"platform", "linux/amd64"}}};
  if (segs == std::vector<std::string>{"api"})
    return {200, {{"kind", "APIVersions"}, {"versions", {"v1"}},
                  {"serverAddressByClientCIDRs", {{{"clientCIDR", "0.0.0.0/0"}, {"serverAddress", fmt::format("127.0.0.1:{}", port_)}}}}}};
  if (segs == std::vector<std::string>{"apis"}) {
    json groups = json::array();
    for (const Res& r : kResources) {
      if (std::string(r.group).empty() || (r.on_request && !KindServed(r.Key()))) continue;
      const json v = {{"groupVersion", GroupVersion(r)}, {"version", r.version}};
      groups.push_back({{"name", r.group}, {"versions", {v}}, {"preferredVersion", v}});
    }
    return {200, {{"kind", "APIGroupList"}, {"apiVersion", "v1"}, {"groups", groups}}};
  }
  const std::string group = segs.size() >= 3 && segs[0] == "apis" ? segs[1] : "";
  const std::string version = segs.size() >= 2 ? segs.back() : "";
  json resources = json::array();
  for (const Res& r : kResources) {
    if (r.group != group || r.version != version || (r.on_request && !KindServed(r.Key()))) continue;
    json item = {{"name", r.plural}, {"singularName", ""}, {"namespaced", r.namespaced}, {"kind", r.kind},
                 {"verbs", {"create", "delete", "get", "list", "patch", "update", "watch"}}};
    if (*r.short_name) item["shortNames"] = {r.short_name};
    resources.push_back(item);
  }
  if (resources.empty()) return {404, StatusOf(404, "NotFound", "the server could not find the requested resource")};
  return {200, {{"kind", "APIResourceList"}, {"apiVersion", "v1"},
                {"groupVersion", group.empty() ? version : group + "/" + version}, {"resources", resources}}};
}

FakeApiServer::Answer FakeApiServer::Collection(const std::string& method, const std::string& resource,
                                                const std::string& ns, const std::string& body) {
  const Res& r = *ResNamed(resource);
  if (method == "POST") {
    json obj = json::parse(body, nullptr, false);
    if (!obj.is_object()) return {400, StatusOf(400, "BadRequest", "the body is not a JSON object")};
    if (r.namespaced) obj["metadata"]["namespace"] = ns;
    const std::string name = Str(obj, "metadata", "name");
    if (name.empty()) return {422, StatusOf(422, "Invalid", "metadata.name: Required value")};
    if (Get(resource, ns, name)) return {409, StatusOf(409, "AlreadyExists", fmt::format("{} \"{}\" already exists", resource, name))};
    return {201, Create(resource, obj)};
  }
  if (method != "GET") return {405, StatusOf(405, "MethodNotAllowed", method + " is not supported here")};
  std::lock_guard<std::mutex> l(mu_);
  json items = json::array();
  for (const auto& [key, o] : objects_[resource])
    if (ns.empty() || Str(o, "metadata", "namespace") == ns) items.push_back(o);
  return {200, {{"kind", std::string(r.kind) + "List"}, {"apiVersion", GroupVersion(r)},
                {"metadata", {{"resourceVersion", std::to_string(rv_)}}}, {"items", items}}};
}

FakeApiServer::Answer FakeApiServer::Object(const std::string& method, const std::string& resource,
                                            const std::string& ns, const std::string& name, const std::string& sub,
                                            const std::string& body) {
  const json in = body.empty() ? json() : json::parse(body, nullptr, false);
  if (resource == "pods" && method == "POST" && sub == "binding") return Bind(ns, name, in);
  if (resource == "pods" && method == "POST" && sub == "eviction") return Evict(ns, name);
  if (resource == "leases" && method == "PUT") return PutLease(ns, name, in);
  std::unique_lock<std::mutex> l(mu_);
  json* o = FindLocked(resource, ns, name);
  if (o == nullptr) return {404, StatusOf(404, "NotFound", fmt::format("{} \"{}\" not found", resource, name))};
  if (method == "GET") return {200, *o};
  if (method == "PATCH" && in.is_object()) {
    if (resource == "pods" && sub == "status") PatchStatus(o, in);
    else o->merge_patch(in);
    (*o)["metadata"]["resourceVersion"] = std::to_string(++rv_);
    RecordLocked(resource, "MODIFIED", *o);
    return {200, *o};
  }
  if (method == "PUT" && in.is_object()) return PutLocked(resource, o, sub, in);
  if (method == "DELETE") {
    const std::string uid = in.is_object() && in.contains("preconditions") ? in["preconditions"].value("uid", "") : "";
    if (!uid.empty() && uid != Str(*o, "metadata", "uid"))
      return {409, StatusOf(409, "Conflict", fmt::format("Precondition failed: UID in precondition: {}, UID in object "
                                                         "meta: {}", uid, Str(*o, "metadata", "uid")))};
    l.unlock();
    Delete(resource, ns, name);
    return {200, StatusOf(200, "", "deleted")};
  }
  return {405, StatusOf(405, "MethodNotAllowed", method + " is not supported here")};
}

// An update (PUT) as the API server makes it: the body's resourceVersion must be the object's (409
// otherwise); the status subresource changes only the status, the object itself everything but the status.
FakeApiServer::Answer FakeApiServer::PutLocked(const std::string& resource, json* o, const std::string& sub,
                                               const json& in) {
  const std::string rv = Str(in, "metadata", "resourceVersion");
  if (!rv.empty() && rv != Str(*o, "metadata", "resourceVersion"))
    return {409, StatusOf(409, "Conflict", fmt::format("Operation cannot be fulfilled on {} \"{}\": the object has "
                                                       "been modified; please apply your changes to the latest "
                                                       "version and try again", resource, Str(*o, "metadata", "name")))};
  if (sub == "status") {
    (*o)["status"] = in.value("status", json::object());
  } else if (sub.empty()) {
    const json status = o->value("status", json());
    const json uid = (*o)["metadata"]["uid"];
    *o = in;
    (*o)["metadata"]["uid"] = uid;
    if (!status.is_null()) (*o)["status"] = status;
    else o->erase("status");
  } else {
    return {404, StatusOf(404, "NotFound", "no subresource " + sub)};
  }
  (*o)["metadata"]["resourceVersion"] = std::to_string(++rv_);
  RecordLocked(resource, "MODIFIED", *o);
  return {200, *o};
}

FakeApiServer::Answer FakeApiServer::Bind(const std::string& ns, const std::string& name, const json& binding) {
  std::lock_guard<std::mutex> l(mu_);
  json* pod = FindLocked("pods", ns, name);
  if (pod == nullptr) return {404, StatusOf(404, "NotFound", fmt::format("pods \"{}\" not found", name))};
  const std::string uid = Str(binding, "metadata", "uid");
  if (!uid.empty() && uid != Str(*pod, "metadata", "uid"))
    return {409, StatusOf(409, "Conflict", fmt::format("Operation cannot be fulfilled on pods/binding \"{}\": Precondition "
                                                       "failed: UID in precondition: {}, UID in object meta: {}",
                                                       name, uid, Str(*pod, "metadata", "uid")))};
  if (!Str(*pod, "spec", "nodeName").empty())
    return {409, StatusOf(409, "Conflict", fmt::format("pod {} is already assigned to node \"{}\"", name,
                                                       Str(*pod, "spec", "nodeName")))};
  if (fail_binding_.erase(name)) return {500, StatusOf(500, "InternalError", "injected binding failure")};
  const std::string node = Str(binding, "target", "name");
  if (node.empty()) return {422, StatusOf(422, "Invalid", "target.name: Required value")};
  CheckFitLocked(*pod, node);
  (*pod)["spec"]["nodeName"] = node;
  PatchStatus(pod, {{"status", {{"phase", "Running"}, {"conditions", {{{"type", "PodScheduled"}, {"status", "True"}}}}}}});
  (*pod)["metadata"]["resourceVersion"] = std::to_string(++rv_);
  RecordLocked("pods", "MODIFIED", *pod);
  return {201, StatusOf(201, "", "")};
}

FakeApiServer::Answer FakeApiServer::Evict(const std::string& ns, const std::string& name) {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (FindLocked("pods", ns, name) == nullptr) return {404, StatusOf(404, "NotFound", fmt::format("pods \"{}\" not found", name))};
    if (refuse_evictions_ > 0) {
      --refuse_evictions_;
      return {429, StatusOf(429, "TooManyRequests", "Cannot evict pod as it would violate the pod's disruption budget.")};
    }
  }
  std::lock_guard<std::mutex> l(mu_);
  json* pod = FindLocked("pods", ns, name);
  const int grace = pod != nullptr ? (*pod)["spec"].value("terminationGracePeriodSeconds", 0) : 0;
  if (pod != nullptr && grace > 0 && !(*pod)["metadata"].contains("deletionTimestamp")) {
    // The kubelet stops the containers within the grace period; the pod is deleted when it has.
    (*pod)["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z";
    (*pod)["metadata"]["deletionGracePeriodSeconds"] = grace;
    (*pod)["metadata"]["resourceVersion"] = std::to_string(++rv_);
    RecordLocked("pods", "MODIFIED", *pod);
    timers_.emplace_back([this, ns, name, grace] {
      std::unique_lock<std::mutex> tl(mu_);
      if (!cv_.wait_for(tl, std::chrono::seconds(grace), [this] { return stopping_; })) {
        tl.unlock();
        Delete("pods", ns, name);
      }
    });
  } else if (pod != nullptr && grace == 0) {
    auto& m = objects_["pods"];
    json o = m.at(Key(ns, name));
    m.erase(Key(ns, name));
    o["metadata"]["resourceVersion"] = std::to_string(++rv_);
    RecordLocked("pods", "DELETED", o);
  }
  return {201, StatusOf(201, "", "")};
}

FakeApiServer::Answer FakeApiServer::PutLease(const std::string& ns, const std::string& name, json lease) {
  std::lock_guard<std::mutex> l(mu_);
  json* have = FindLocked("leases", ns, name);
  if (have == nullptr) return {404, StatusOf(404, "NotFound", fmt::format("leases \"{}\" not found", name))};
  if (!lease.is_object() || Str(lease, "metadata", "resourceVersion") != Str(*have, "metadata", "resourceVersion"))
    return {409, StatusOf(409, "Conflict", fmt::format("Operation cannot be fulfilled on leases.coordination.k8s.io "
                                                       "\"{}\": the object has been modified; please apply your "
                                                       "changes to the latest version and try again", name))};
  lease["metadata"]["uid"] = (*have)["metadata"]["uid"];
  lease["metadata"]["namespace"] = ns;
  lease["metadata"]["resourceVersion"] = std::to_string(++rv_);
  *have = lease;
  RecordLocked("leases", "MODIFIED", *have);
  return {200, *have};
}

void FakeApiServer::StreamWatch(const std::string& resource, int64_t rv, bool bookmarks, int timeout_s,
                                const std::function<bool(const std::string&)>& write) {
  const Res& r = *ResNamed(resource);
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  std::unique_lock<std::mutex> l(mu_);
  if (rv > 0 && rv < compacted_) {
    const json gone = StatusOf(410, "Expired", fmt::format("too old resource version: {} ({})", rv, compacted_));
    l.unlock();
    write(json{{"type", "ERROR"}, {"object", gone}}.dump() + "\n");
    return;
  }
  int64_t cursor = rv;
  if (rv == 0) {  // from now, every object as ADDED first
    std::string out;
    for (const auto& [k, o] : objects_[resource]) out += json{{"type", "ADDED"}, {"object", o}}.dump() + "\n";
    cursor = rv_;
    l.unlock();
    if (!out.empty() && !write(out)) return;
    l.lock();
  }
  const uint64_t gen = cut_gen_;
  while (!stopping_ && cut_gen_ == gen && std::chrono::steady_clock::now() < end) {
    std::string out;
    for (const Change& c : changes_[resource])
      if (c.rv > cursor) out += json{{"type", c.type}, {"object", c.object}}.dump() + "\n", cursor = c.rv;
    if (out.empty()) {
      cv_.wait_for(l, std::chrono::milliseconds(bookmark_ms_));
      bool more = false;
      for (const Change& c : changes_[resource]) more |= c.rv > cursor;
      if (more || !bookmarks || stopping_ || cut_gen_ != gen) continue;
      cursor = rv_;
      out = json{{"type", "BOOKMARK"},
                 {"object", {{"kind", r.kind}, {"apiVersion", GroupVersion(r)},
                             {"metadata", {{"resourceVersion", std::to_string(cursor)}}}}}}.dump() + "\n";
    }
    l.unlock();
    if (!write(out)) return;
    l.lock();
  }
}

void FakeApiServer::CheckFitLocked(const json& pod, const std::string& node) {
  const json* n = FindLocked("nodes", "", node);
  if (n == nullptr) return overcommits_.push_back(fmt::format("{} bound to {}, which does not exist", Str(pod, "metadata", "name"), node));
  const json alloc = (*n)["status"].value("allocatable", json::object());
  for (const auto& [resource, want] : DeviceLimits(pod)) {
    int64_t used = want;
    for (const auto& [k, other] : objects_["pods"]) {
      const std::string phase = other.contains("status") ? other["status"].value("phase", "") : "";
      if (Str(other, "spec", "nodeName") != node || phase == "Succeeded" || phase == "Failed") continue;
      auto d = DeviceLimits(other);
      if (d.count(resource)) used += d[resource];
    }
    const int64_t have = alloc.contains(resource) ? std::stoll(alloc[resource].get<std::string>()) : 0;
    if (used > have)
      overcommits_.push_back(fmt::format("{} bound to {}: {} {} in use with it, {} allocatable",
                                         Str(pod, "metadata", "name"), node, used, resource, have));
  }
}

void FakeApiServer::RecordLocked(const std::string& resource, const std::string& type, const json& obj) {
  changes_[resource].push_back({rv_, type, obj});
  cv_.notify_all();
}

json* FakeApiServer::FindLocked(const std::string& resource, const std::string& ns, const std::string& name) {
  auto& m = objects_[resource];
  auto it = m.find(Key(ns, name));
  return it == m.end() ? nullptr : &it->second;
}

json FakeApiServer::Create(const std::string& resource, json obj) {
  const Res& r = *ResNamed(resource);
  std::lock_guard<std::mutex> l(mu_);
  obj["apiVersion"] = GroupVersion(r);
  obj["kind"] = r.kind;
  json& meta = obj["metadata"];
  if (!r.namespaced) meta.erase("namespace");
  else if (!meta.contains("namespace")) meta["namespace"] = "default";
  meta["uid"] = fmt::format("00000000-0000-4000-8000-{:012}", ++uid_seq_);
  meta["resourceVersion"] = std::to_string(++rv_);
  meta["creationTimestamp"] = "2026-01-01T00:00:00Z";
  if (resource == "pods") {
    const std::string pc = obj["spec"].value("priorityClassName", "");
    json* cls = pc.empty() ? nullptr : FindLocked("priorityclasses", "", pc);
    if (!obj["spec"].contains("priority")) obj["spec"]["priority"] = cls != nullptr ? (*cls).value("value", 0) : 0;
    if (!obj.contains("status")) obj["status"] = {{"phase", "Pending"}};
  }
  const std::string ns = r.namespaced ? meta["namespace"].get<std::string>() : "";
  objects_[resource][Key(ns, meta.value("name", ""))] = obj;
  RecordLocked(resource, "ADDED", obj);
  return obj;
}

std::optional<json> FakeApiServer::Get(const std::string& resource, const std::string& ns, const std::string& name) const {
  std::lock_guard<std::mutex> l(mu_);
  auto m = objects_.find(resource);
  if (m == objects_.end()) return std::nullopt;
  auto it = m->second.find(Key(ns, name));
  if (it == m->second.end()) return std::nullopt;
  return it->second;
}

std::vector<json> FakeApiServer::List(const std::string& resource) const {
  std::lock_guard<std::mutex> l(mu_);
  std::vector<json> out;
  auto m = objects_.find(resource);
  if (m != objects_.end())
    for (const auto& [k, o] : m->second) out.push_back(o);
  return out;
}

bool FakeApiServer::Patch(const std::string& resource, const std::string& ns, const std::string& name, const json& patch) {
  std::lock_guard<std::mutex> l(mu_);
  json* o = FindLocked(resource, ns, name);
  if (o == nullptr) return false;
  o->merge_patch(patch);
  (*o)["metadata"]["resourceVersion"] = std::to_string(++rv_);
  RecordLocked(resource, "MODIFIED", *o);
  return true;
}

bool FakeApiServer::Delete(const std::string& resource, const std::string& ns, const std::string& name) {
  std::lock_guard<std::mutex> l(mu_);
  auto& m = objects_[resource];
  auto it = m.find(Key(ns, name));
  if (it == m.end()) return false;
  json o = it->second;
  m.erase(it);
  o["metadata"]["resourceVersion"] = std::to_string(++rv_);
  RecordLocked(resource, "DELETED", o);
  return true;
}

void FakeApiServer::Compact() {
  std::lock_guard<std::mutex> l(mu_);
  compacted_ = ++rv_;  // a list from now on carries a resourceVersion a watch may start from
  changes_.clear();
  ++cut_gen_;  // open watches end; resuming from before now is 410 Gone
  cv_.notify_all();
}

void FakeApiServer::CutWatches() {
  std::lock_guard<std::mutex> l(mu_);
  ++cut_gen_;
  cv_.notify_all();
}

void FakeApiServer::FailBindingOf(const std::string& pod_name) {
  std::lock_guard<std::mutex> l(mu_);
  fail_binding_.insert(pod_name);
}

void FakeApiServer::HoldWrites(const std::string& path_part, double seconds) {
  std::lock_guard<std::mutex> l(mu_);
  holds_[path_part] = std::chrono::steady_clock::now() +
                      std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(seconds));
  cv_.notify_all();
}

void FakeApiServer::HoldWrite(const std::string& path) {
  std::unique_lock<std::mutex> l(mu_);
  for (const auto& [part, until] : holds_)
    if (path.find(part) != std::string::npos)
      cv_.wait_until(l, until, [&, p = part] { return stopping_ || holds_[p] <= std::chrono::steady_clock::now(); });
}

void FakeApiServer::AnswerWith(const std::string& method, const std::string& path_part, int status,
                               const std::string& message, int times) {
  std::lock_guard<std::mutex> l(mu_);
  injected_.push_back({method, path_part, message, status, times});
}

std::optional<FakeApiServer::Answer> FakeApiServer::InjectedFor(const std::string& method, const std::string& path) {
  std::lock_guard<std::mutex> l(mu_);
  for (Injected& i : injected_)
    if (i.times > 0 && i.method == method && path.find(i.path_part) != std::string::npos) {
      --i.times;
      return Answer{i.status, StatusOf(i.status, "Injected", i.message)};
    }
  return std::nullopt;
}

void FakeApiServer::RefuseEvictions(int n) {
  std::lock_guard<std::mutex> l(mu_);
  refuse_evictions_ = n;
}

std::vector<std::string> FakeApiServer::Overcommits() const {
  std::lock_guard<std::mutex> l(mu_);
  return overcommits_;
}

std::vector<FakeRequest> FakeApiServer::Requests() const {
  std::lock_guard<std::mutex> l(mu_);
  return requests_;
}

}  // namespace tessera::testing
