#include "k8s/api/informer.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>

namespace tessera {
namespace {

using json = nlohmann::json;

std::string NestedString(const json& o, const char* a, const char* b) {
  if (!o.is_object() || !o.contains(a) || !o[a].is_object()) return "";
  const json& m = o[a];
  return m.contains(b) && m[b].is_string() ? m[b].get<std::string>() : "";
}

}  // namespace

std::string Informer::KeyOf(const json& obj) {
  const std::string ns = NestedString(obj, "metadata", "namespace"),
                    name = NestedString(obj, "metadata", "name");
  return ns.empty() ? name : ns + "/" + name;
}

Informer::Informer(const ApiClient* api, std::string path, Handler on_change,
                   std::function<void(const std::string&)> log)
    : api_(api), path_(std::move(path)), on_change_(std::move(on_change)), log_(std::move(log)) {}

Informer::~Informer() { Stop(); }

void Informer::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void Informer::Stop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool Informer::WaitSynced(double timeout_s) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (!synced() && std::chrono::steady_clock::now() < end)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  return synced();
}

std::shared_ptr<const Informer::ObjectMap> Informer::Snapshot() const {
  std::lock_guard<std::mutex> l(mu_);
  if (!snapshot_) snapshot_ = std::make_shared<const ObjectMap>(objects_);
  return snapshot_;
}

ObjectMap::Ptr Informer::Get(const std::string& key) const {
  std::lock_guard<std::mutex> l(mu_);
  return objects_.Get(key);
}

void Informer::Sleep(double s) {
  std::unique_lock<std::mutex> l(mu_);
  cv_.wait_for(l, std::chrono::duration<double>(s), [this] { return stop_.load(); });
}

void Informer::Apply(WatchEvent e, const json& obj) {
  const std::string key = KeyOf(obj);
  {
    std::lock_guard<std::mutex> l(mu_);
    if (e == WatchEvent::kDeleted)
      objects_.Erase(key);
    else
      objects_.Put(key, obj);
    snapshot_.reset();
    ++version_;
  }
  if (on_change_) on_change_(e, obj);
}

std::string Informer::ListProblem(const ApiResponse& r) const {
  if (r.status == 401)
    return fmt::format(
        "list {}: the API server refuses the credentials (401): the kubeconfig's token or client "
        "certificate is wrong or expired",
        path_);
  if (r.status == 403)
    return fmt::format(
        "list {}: RBAC: list and watch are forbidden (403): grant the scheduler's service account "
        "get, list and watch on this resource ({})",
        path_, r.error);
  if (r.status == 0)
    return fmt::format("list {}: no answer from the API server ({}): check the kubeconfig's server address{}",
                       path_, r.error,
                       r.error.find("SSL") != std::string::npos ? " and certificate-authority (TLS)" : "");
  return fmt::format("list {}: {} {}", path_, r.status, r.error);
}

bool Informer::List() {
  const ApiResponse r = api_->Get(path_);
  if (r.status == 404 && !synced()) {
    if (log_) log_(fmt::format("{}: not served (404): this kind of object is not used", path_));
    absent_ = true;
    synced_ = true;
    return false;
  }
  if (!r.ok() || !r.body.is_object() || !r.body.contains("items") || !r.body["items"].is_array()) {
    if (log_) log_(ListProblem(r));
    return false;
  }
  std::map<std::string, json> fresh;
  for (const json& item : r.body["items"]) fresh[KeyOf(item)] = item;
  ObjectMap old;
  {
    std::lock_guard<std::mutex> l(mu_);
    old = objects_;
    rv_ = NestedString(r.body, "metadata", "resourceVersion");
  }
  for (const auto& [key, obj] : old)
    if (!fresh.count(key)) Apply(WatchEvent::kDeleted, obj);
  for (const auto& [key, obj] : fresh) {
    auto it = old.find(key);
    if (it == old.end())
      Apply(WatchEvent::kAdded, obj);
    else if (it->second != obj)
      Apply(WatchEvent::kModified, obj);
  }
  synced_ = true;
  return true;
}

bool Informer::WatchOnce() {
  std::string rv;
  {
    std::lock_guard<std::mutex> l(mu_);
    rv = rv_;
  }
  const char* sep = path_.find('?') == std::string::npos ? "?" : "&";
  const std::string path =
      fmt::format("{}{}watch=1&allowWatchBookmarks=true&resourceVersion={}&timeoutSeconds=300", path_, sep,
                  QueryEscape(rv));
  bool gone = false;
  const int status = api_->Watch(
      path,
      [&](const json& ev) {
        const std::string type = ev.value("type", "");
        const json obj = ev.contains("object") ? ev["object"] : json();
        if (type == "ERROR") {
          if (obj.is_object() && obj.value("code", 0) == 410)
            gone = true;
          else if (log_)
            log_(fmt::format("watch {}: {}", path_, obj.dump().substr(0, 200)));
          return false;
        }
        const std::string new_rv = NestedString(obj, "metadata", "resourceVersion");
        if (type == "ADDED")
          Apply(WatchEvent::kAdded, obj);
        else if (type == "MODIFIED")
          Apply(WatchEvent::kModified, obj);
        else if (type == "DELETED")
          Apply(WatchEvent::kDeleted, obj);
        if (!new_rv.empty()) {
          std::lock_guard<std::mutex> l(mu_);
          rv_ = new_rv;
        }
        return !stop_.load();
      },
      stop_, 330);
  if (status == 410) gone = true;
  if (gone) return false;
  if (status != 200 && !stop_.load()) {
    if (log_) log_(fmt::format("watch {}: status {}; resuming", path_, status));
    Sleep(0.5);
  }
  return true;
}

void Informer::Loop() {
  bool listed = false;
  double backoff_s = 1;
  while (!stop_.load()) {
    if (!listed) {
      listed = List();
      if (absent_.load()) return;
      if (!listed) {
        Sleep(backoff_s);
        backoff_s = std::min(backoff_s * 2, 16.0);  // a configuration problem is said less and less often
        continue;
      }
      backoff_s = 1;
    }
    if (!WatchOnce()) {
      if (log_) log_(fmt::format("watch {}: 410 Gone; relisting", path_));
      ++relists_;
      listed = false;
    }
  }
}

}  // namespace tessera
