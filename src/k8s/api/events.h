#pragma once
// core/v1 Events (what `kubectl describe` shows under Events) about a Node or a Pod, written by Tessera
// (source.component and reportingComponent = `component`). The Event lives in the object's namespace
// ("default" for cluster-scoped objects such as Nodes).

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "k8s/api/api_client.h"

namespace tessera {

// RFC 3339 UTC time of the wall clock, to the second.
std::string Rfc3339Now();

// The Event for `object` (its kind, metadata.name, namespace, uid); type is Normal or Warning.
nlohmann::json EventFor(const nlohmann::json& object, const std::string& type, const std::string& reason,
                        const std::string& message, const std::string& component, const std::string& now);
// Posts it; returns the API server's answer.
ApiResponse PostEvent(const ApiClient& api, const nlohmann::json& object, const std::string& type,
                      const std::string& reason, const std::string& message, const std::string& component);

// Writes Events off the caller's path, as client-go's broadcaster does: Record queues and returns at once; a
// thread of its own posts them at most `qps` per second with bursts of `burst` (a token bucket), so a burst
// of bindings is not slowed by an Event per pod. When `max_queued` wait, a new one is dropped and counted
// (an Event is a hint for `kubectl describe`, never state). Stop (or the destructor) posts nothing more.
class EventRecorder {
 public:
  EventRecorder(const ApiClient* api, std::string component, double qps = 20, int burst = 100,
                size_t max_queued = 1000);
  ~EventRecorder();
  void Record(const nlohmann::json& object, const std::string& type, const std::string& reason,
              const std::string& message);
  void Stop();
  int64_t posted() const;
  int64_t dropped() const;
  // Returns once nothing is queued (tests).
  void Flush();

 private:
  void Loop();

  const ApiClient* api_;
  const std::string component_;
  const double qps_;
  const int burst_;
  const size_t max_queued_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<nlohmann::json> queue_;
  bool stop_ = false, posting_ = false;
  int64_t posted_ = 0, dropped_ = 0;
  std::thread thread_;
};

}  // namespace tessera
