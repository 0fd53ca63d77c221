#pragma once
// Informer: one kind of object kept current from the API server by list-then-watch, as client-go's
// reflector does: a list gives the objects and a resourceVersion; a watch from it (allowWatchBookmarks)
// brings ADDED, MODIFIED, DELETED and BOOKMARK events; a cut stream resumes from the last resourceVersion
// seen; 410 Gone (an ERROR event or status) relists, and the objects that vanished meanwhile are reported
// deleted. A 404 on the first list means the kind is not served (a CRD group that is not installed): the
// informer reports itself absent and stops, never an error.
//
// Thread safety: Start runs the loop on its own thread; the handler is called from it; Objects() from any.

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "k8s/api/api_client.h"
#include "k8s/api/object_map.h"

namespace tessera {

enum class WatchEvent : uint8_t { kAdded, kModified, kDeleted };

class Informer {
 public:
  // `path`: the collection (e.g. /api/v1/pods). `on_change` gets every change (the object after it; the
  // last known object for kDeleted); may be empty.
  using Handler = std::function<void(WatchEvent, const nlohmann::json&)>;
  Informer(const ApiClient* api, std::string path, Handler on_change,
           std::function<void(const std::string&)> log);
  ~Informer();

  void Start();
  void Stop();
  // True once the first list completed (or the kind turned out absent).
  bool synced() const { return synced_.load(); }
  bool absent() const { return absent_.load(); }
  // Waits until synced or `timeout_s` passed; returns synced().
  bool WaitSynced(double timeout_s);
  using ObjectMap = tessera::ObjectMap;
  // The objects now, by namespace/name: an immutable snapshot shared by every caller until the next change
  // (one copy of the map's pointers per change, however many readers; the objects are shared values).
  // Keep the pointer while reading it.
  std::shared_ptr<const ObjectMap> Snapshot() const;
  // The objects now (a copy of pointers).
  ObjectMap Objects() const { return *Snapshot(); }
  // Grows with every change applied (a reader that saw version v has nothing new while it stays v).
  uint64_t version() const { return version_.load(); }
  // One object now, or null: no snapshot is made.
  ObjectMap::Ptr Get(const std::string& key) const;
  const std::string& path() const { return path_; }
  int relists() const { return relists_.load(); }

  // The cache key of an object: "namespace/name" (or "name" for cluster objects).
  static std::string KeyOf(const nlohmann::json& obj);

 private:
  void Loop();
  // Lists and replaces the cache; returns false on an error (after logging it with what to fix: RBAC,
  // credentials, TLS). Failed lists are retried with back-off (1 s doubling to 16 s).
  bool List();
  std::string ListProblem(const ApiResponse& r) const;
  // Watches from rv_ until the stream ends; returns false when a relist is needed (410).
  bool WatchOnce();
  void Apply(WatchEvent e, const nlohmann::json& obj);
  void Sleep(double s);

  const ApiClient* api_;
  std::string path_;
  Handler on_change_;
  std::function<void(const std::string&)> log_;
  mutable std::mutex mu_;
  ObjectMap objects_;
  mutable std::shared_ptr<const ObjectMap> snapshot_;  // of objects_; null once it changed
  std::string rv_;
  std::atomic<bool> stop_{false}, synced_{false}, absent_{false};
  std::atomic<int> relists_{0};
  std::atomic<uint64_t> version_{0};
  std::condition_variable cv_;
  std::thread thread_;
};

}  // namespace tessera
