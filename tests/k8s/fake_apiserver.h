#pragma once
// An in-process fake Kubernetes API server for the tests (plain HTTP on 127.0.0.1, cpp-httplib), serving
// exactly what Tessera's scheduler uses, with the API server's semantics:
//  - discovery (/version, /api, /api/v1, /apis, /apis/GROUP/VERSION) for real clients (kubectl,
//    python3-kubernetes);
//  - list (metadata.resourceVersion of the list) and watch (?watch=1&resourceVersion=RV: the events after
//    RV, BOOKMARKs when allowWatchBookmarks, an ERROR event with a 410 Status when RV was compacted away;
//    the stream ends after timeoutSeconds or when CutWatches is called) of nodes, pods, priorityclasses,
//    poddisruptionbudgets (their status as the test writes it), coscheduling podgroups, Volcano and KAI Queues (Volcano's and KAI's PodGroups are not served: 404);
//    the GPU Operator's clusterpolicies (nvidia.com/v1) only once ServeKind asks for them (else 404);
//  - pods: binding (409 when the UID precondition does not match or the pod is already bound; an injected
//    failure answers 500), eviction (429 while refusals are injected; else the pod is deleted, after its
//    terminationGracePeriodSeconds with deletionTimestamp set meanwhile), DELETE with
//    a UID precondition, PATCH of status (strategic merge: conditions by type);
//  - nodes: PATCH (JSON merge patch); events: POST; configmaps: GET;
//  - coordination.k8s.io/v1 Leases: GET, POST (409 when it exists), PUT (409 unless metadata.resourceVersion
//    is the current one).
// Every request is recorded (method, path, status). Thread safety: every method may be called from any thread.

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

namespace httplib {
class Server;
}

namespace tessera::testing {

struct FakeRequest {
  std::string method, path;
  int status = 0;
  std::string body;  // as sent (empty for watches)
};

class FakeApiServer {
 public:
  FakeApiServer();
  ~FakeApiServer();

  int port() const { return port_; }
  std::string url() const;
  // A kubeconfig (token auth over http) for this server, written to `path`.
  void WriteKubeconfig(const std::string& path, const std::string& ns = "tessera-system") const;

  // `resource`: nodes, pods, events, configmaps, leases, priorityclasses, podgroups, queues (Volcano),
  // kai-queues (KAI), and the resource.k8s.io kinds. Create sets uid,
  // resourceVersion and creationTimestamp (and spec.priority of a pod from its PriorityClass).
  nlohmann::json Create(const std::string& resource, nlohmann::json obj);
  std::optional<nlohmann::json> Get(const std::string& resource, const std::string& ns, const std::string& name) const;
  std::vector<nlohmann::json> List(const std::string& resource) const;
  // Applies a JSON merge patch; returns false when the object does not exist.
  bool Patch(const std::string& resource, const std::string& ns, const std::string& name, const nlohmann::json& patch);
  bool Delete(const std::string& resource, const std::string& ns, const std::string& name);

  // Watches that start from a resourceVersion before now get 410 Gone.
  void Compact();
  // Ends every open watch stream (clients resume from their last resourceVersion).
  void CutWatches();
  // The binding of this pod answers 500 (once).
  void FailBindingOf(const std::string& pod_name);
  // The next `n` evictions answer 429 (a PodDisruptionBudget refuses).
  void RefuseEvictions(int n);
  // Writes (POST, PUT, PATCH, DELETE) whose path contains `path_part` are held `seconds` before they are
  // served (0 ends the hold), as an API server that stalls them.
  void HoldWrites(const std::string& path_part, double seconds);
  // The next `times` requests of `method` whose path contains `path_part` answer `status` (a Status with
  // `message`) without effect.
  void AnswerWith(const std::string& method, const std::string& path_part, int status, const std::string& message,
                  int times = 1000000);
  // Serves a kind that is not served until asked (clusterpolicies, nvidia.com/v1: the GPU Operator's CRD);
  // before, its paths answer 404 and discovery leaves it out, as an API server without the CRD.
  void ServeKind(const std::string& resource);
  void set_bookmark_ms(int ms) { bookmark_ms_ = ms; }
  std::vector<FakeRequest> Requests() const;
  // Bindings that took a node past its allocatable nvidia.com/* devices (counting terminating pods).
  std::vector<std::string> Overcommits() const;

 private:
  struct Change {
    int64_t rv;
    std::string type;
    nlohmann::json object;
  };
  struct Answer {
    int status = 200;
    nlohmann::json body;
  };
  void Routes();
  bool KindServed(const std::string& resource) const;
  Answer Handle(const std::string& method, const std::string& path, const std::map<std::string, std::string>& query,
                const std::string& body);
  Answer Discovery(const std::vector<std::string>& segs) const;
  Answer Collection(const std::string& method, const std::string& resource, const std::string& ns,
                    const std::string& body);
  Answer Object(const std::string& method, const std::string& resource, const std::string& ns, const std::string& name,
                const std::string& sub, const std::string& body);
  Answer PutLocked(const std::string& resource, nlohmann::json* o, const std::string& sub, const nlohmann::json& in);
  Answer Bind(const std::string& ns, const std::string& name, const nlohmann::json& binding);
  Answer Evict(const std::string& ns, const std::string& name);
  void HoldWrite(const std::string& path);  // waits while a HoldWrites covers `path`
  std::optional<Answer> InjectedFor(const std::string& method, const std::string& path);
  Answer PutLease(const std::string& ns, const std::string& name, nlohmann::json lease);
  // Streams watch events of `resource` after `rv` to `sink`; returns when it ends.
  void StreamWatch(const std::string& resource, int64_t rv, bool bookmarks, int timeout_s,
                   const std::function<bool(const std::string&)>& write);
  std::string Key(const std::string& ns, const std::string& name) const { return ns + "/" + name; }
  void CheckFitLocked(const nlohmann::json& pod, const std::string& node);
  void RecordLocked(const std::string& resource, const std::string& type, const nlohmann::json& obj);
  nlohmann::json* FindLocked(const std::string& resource, const std::string& ns, const std::string& name);

  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  int64_t rv_ = 100;
  int64_t compacted_ = 0;
  int64_t uid_seq_ = 0;
  uint64_t cut_gen_ = 0;
  bool stopping_ = false;
  int bookmark_ms_ = 1000;
  int refuse_evictions_ = 0;
  std::map<std::string, std::chrono::steady_clock::time_point> holds_;  // path part -> held until
  struct Injected {
    std::string method, path_part, message;
    int status = 0, times = 0;
  };
  std::vector<Injected> injected_;
  std::set<std::string> fail_binding_;
  std::set<std::string> served_on_request_;  // kinds served on request (ServeKind)
  std::map<std::string, std::map<std::string, nlohmann::json>> objects_;  // resource -> ns/name -> object
  std::map<std::string, std::vector<Change>> changes_;                    // resource -> changes in rv order
  std::vector<FakeRequest> requests_;
  std::vector<std::string> overcommits_;
  std::vector<std::thread> timers_;  // evicted pods deleted after their grace period
};

}  // namespace tessera::testing
