#include "k8s/api/events.h"

#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <ctime>
#include <nlohmann/json.hpp>

#include "base/utc_time.h"
#include "k8s/api/objects.h"

namespace tessera {

using json = nlohmann::json;

namespace {

// A name unique to this process: the object's name, then a hex suffix (as client-go's recorder does).
std::string EventName(const std::string& object_name) {
  static std::atomic<uint64_t> seq{0};
  const auto ns = std::chrono::system_clock::now().time_since_epoch().count();
  return fmt::format("{}.{:x}", object_name, static_cast<uint64_t>(ns) + seq.fetch_add(1));
}

}  // namespace

std::string Rfc3339Now() { return FormatIsoUtc(static_cast<int64_t>(std::time(nullptr))); }

json EventFor(const json& object, const std::string& type, const std::string& reason,
              const std::string& message, const std::string& component, const std::string& now) {
  const json* meta = Field(object, "metadata");
  const json empty = json::object();
  const json& m = meta != nullptr && meta->is_object() ? *meta : empty;
  const std::string kind = StringField(object, "kind").empty() ? "Pod" : StringField(object, "kind");
  const std::string ns = StringField(m, "namespace");
  json regarding = {{"apiVersion", "v1"}, {"kind", kind}, {"name", StringField(m, "name")}};
  if (!ns.empty()) regarding["namespace"] = ns;
  if (!StringField(m, "uid").empty()) regarding["uid"] = StringField(m, "uid");
  return {
      {"apiVersion", "v1"},
      {"kind", "Event"},
      {"metadata", {{"name", EventName(StringField(m, "name"))}, {"namespace", ns.empty() ? "default" : ns}}},
      {"involvedObject", regarding},
      {"reason", reason},
      {"message", message.size() > 1024 ? message.substr(0, 1024) : message},
      {"type", type},
      {"source", {{"component", component}}},
      {"reportingComponent", component},
      {"firstTimestamp", now},
      {"lastTimestamp", now},
      {"count", 1}};
}

ApiResponse PostEvent(const ApiClient& api, const json& object, const std::string& type,
                      const std::string& reason, const std::string& message, const std::string& component) {
  const json e = EventFor(object, type, reason, message, component, Rfc3339Now());
  return api.Post(fmt::format("/api/v1/namespaces/{}/events", e["metadata"]["namespace"].get<std::string>()),
                  e);
}

EventRecorder::EventRecorder(const ApiClient* api, std::string component, double qps, int burst,
                             size_t max_queued)
    : api_(api),
      component_(std::move(component)),
      qps_(qps),
      burst_(std::max(1, burst)),
      max_queued_(max_queued) {
  thread_ = std::thread([this] { Loop(); });
}

EventRecorder::~EventRecorder() { Stop(); }

void EventRecorder::Stop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
    queue_.clear();
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void EventRecorder::Record(const json& object, const std::string& type, const std::string& reason,
                           const std::string& message) {
  json e = EventFor(object, type, reason, message, component_, Rfc3339Now());
  {
    std::lock_guard<std::mutex> l(mu_);
    if (stop_) return;
    if (queue_.size() >= max_queued_) {
      ++dropped_;
      return;
    }
    queue_.push_back(std::move(e));
  }
  cv_.notify_all();
}

int64_t EventRecorder::posted() const {
  std::lock_guard<std::mutex> l(mu_);
  return posted_;
}

int64_t EventRecorder::dropped() const {
  std::lock_guard<std::mutex> l(mu_);
  return dropped_;
}

void EventRecorder::Flush() {
  std::unique_lock<std::mutex> l(mu_);
  cv_.wait(l, [this] { return stop_ || (queue_.empty() && !posting_); });
}

void EventRecorder::Loop() {
  using Clock = std::chrono::steady_clock;
  double tokens = burst_;
  Clock::time_point refilled = Clock::now();
  std::unique_lock<std::mutex> l(mu_);
  while (true) {
    cv_.wait(l, [this] { return stop_ || !queue_.empty(); });
    if (stop_) return;
    const Clock::time_point now = Clock::now();
    tokens = std::min<double>(burst_, tokens + qps_ * std::chrono::duration<double>(now - refilled).count());
    refilled = now;
    if (tokens < 1) {  // wait for the next token (or Stop)
      cv_.wait_for(l, std::chrono::duration<double>((1 - tokens) / qps_), [this] { return stop_; });
      continue;
    }
    tokens -= 1;
    json e = std::move(queue_.front());
    queue_.pop_front();
    posting_ = true;
    l.unlock();
    (void)api_->Post(
        fmt::format("/api/v1/namespaces/{}/events", e["metadata"]["namespace"].get<std::string>()), e);
    l.lock();
    posting_ = false;
    ++posted_;
    cv_.notify_all();
  }
}

}  // namespace tessera
