#pragma once
// Dynamic Resource Allocation state kept current from the API server: informers for DeviceClasses,
// ResourceSlices, ResourceClaims and ResourceClaimTemplates (resource.k8s.io/v1). A 404 for the group
// means DRA is off (enabled() false): pods then use device-plugin resources only. The device model is
// rebuilt from the newest pool generations whenever a slice changes or goes (a driver restart, a lost GPU);
// the usage is rebuilt on every Snapshot from every allocated claim (so after a restart the allocations are
// read back, and capacity is free again only once the claim controller deallocated the claim). Claims this
// process wrote are overlaid until the watch catches up, so nothing is allocated twice in between.
//
// Thread safety: Start/Stop from one thread; Snapshot and Wrote from one thread at a time, the view used
// meanwhile (the model is rebuilt in Snapshot; the scheduler serializes its loop and its backend's launches);
// informer handlers set flags, drop overlay entries the watch caught up with (a claim deleted meanwhile
// included), and wake the loop.

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "k8s/api/api_client.h"
#include "k8s/api/informer.h"
#include "k8s/dra/dra_allocator.h"
#include "k8s/dra/dra_model.h"

namespace tessera {

// Claims by "namespace/name": the watched ones with our newer writes laid over them. An overlay entry is
// dropped once the watched claim is at least as new (resourceVersion compared as a number when both are),
// has another uid, or after `max_age_s` (the watch missed nothing for that long: it was deleted).
struct DraOverlayEntry {
  nlohmann::json claim;
  double written_s = 0;
};
std::map<std::string, nlohmann::json> OverlayClaims(const std::map<std::string, nlohmann::json>& watched,
                                                    std::map<std::string, DraOverlayEntry>* overlay,
                                                    double now_s, double max_age_s = 30);

// The usage of every allocated claim in `claims`; `notes` gets what AddResults reports (devices no longer
// published, devices held twice).
DraUsage UsageOfClaims(const DraModel& model, const std::map<std::string, nlohmann::json>& claims,
                       std::vector<std::string>* notes);

class DraSync {
 public:
  DraSync(const ApiClient* api, std::function<void()> wake, std::function<void(const std::string&)> log);
  ~DraSync();
  void Start();
  // Waits for the first lists; false when one did not complete within `timeout_s`.
  bool WaitSynced(double timeout_s);
  void Stop();
  // The group is served (the ResourceSlice informer was not answered 404).
  bool enabled() const;

  struct View {
    const DraModel* model = nullptr;
    DraClassMap classes;
    std::map<std::string, nlohmann::json> claims;
    std::unique_ptr<DraUsage> usage;
  };
  // The model (rebuilt when slices changed), classes, claims and usage now.
  View Snapshot();
  // A claim as the API server returned it after our write.
  void Wrote(const nlohmann::json& claim);

 private:
  void RebuildModel();
  // Informer thread: drops the overlay entry the watch has caught up with (or that was deleted).
  void ForgetOverlay(WatchEvent e, const nlohmann::json& claim);
  void Log(const std::string& s) const;

  const ApiClient* api_;
  std::function<void()> wake_;
  std::function<void(const std::string&)> log_;
  std::unique_ptr<Informer> classes_, slices_, claims_, templates_;
  std::atomic<bool> slices_dirty_{true};
  DraModel model_;
  std::mutex overlay_mu_;
  std::map<std::string, DraOverlayEntry> overlay_;  // guarded by overlay_mu_
  std::vector<std::string> said_;                   // model problems and usage notes logged last time
};

}  // namespace tessera
