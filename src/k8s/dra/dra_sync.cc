#include "k8s/dra/dra_sync.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <nlohmann/json.hpp>

#include "k8s/api/objects.h"
#include "model/catalog.h"

namespace tessera {

using json = nlohmann::json;

namespace {

constexpr const char* kDraApi = "/apis/resource.k8s.io/v1/";

// -1: a older than b, 0: same, 1: newer; nullopt when either is not a number.
std::optional<int> CompareVersions(const std::string& a, const std::string& b) {
  uint64_t x = 0, y = 0;
  auto pa = std::from_chars(a.data(), a.data() + a.size(), x);
  auto pb = std::from_chars(b.data(), b.data() + b.size(), y);
  if (a.empty() || b.empty() || pa.ec != std::errc() || pb.ec != std::errc() ||
      pa.ptr != a.data() + a.size() || pb.ptr != b.data() + b.size())
    return std::nullopt;
  return x < y ? -1 : (x == y ? 0 : 1);
}

double NowS() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

std::map<std::string, json> OverlayClaims(const std::map<std::string, json>& watched,
                                          std::map<std::string, DraOverlayEntry>* overlay, double now_s,
                                          double max_age_s) {
  std::map<std::string, json> out = watched;
  for (auto it = overlay->begin(); it != overlay->end();) {
    const json& mine = it->second.claim;
    auto w = watched.find(it->first);
    bool drop = now_s - it->second.written_s > max_age_s;
    if (w != watched.end()) {
      if (Meta(w->second, "uid") != Meta(mine, "uid")) {
        drop = true;
      } else {
        auto cmp = CompareVersions(Meta(w->second, "resourceVersion"), Meta(mine, "resourceVersion"));
        drop |= !cmp || *cmp >= 0;
      }
    }
    if (drop) {
      it = overlay->erase(it);
      continue;
    }
    out[it->first] = mine;
    ++it;
  }
  return out;
}

DraUsage UsageOfClaims(const DraModel& model, const std::map<std::string, json>& claims,
                       std::vector<std::string>* notes) {
  DraUsage usage(model);
  for (const auto& [key, c] : claims) {
    auto parsed = ParseResourceClaim(c);
    if (!parsed.ok()) {
      notes->push_back(parsed.error());
      continue;
    }
    if (!parsed->allocation) continue;
    for (const std::string& n : usage.AddResults(parsed->allocation->results))
      notes->push_back(key + ": " + n);
  }
  return usage;
}

DraSync::DraSync(const ApiClient* api, std::function<void()> wake,
                 std::function<void(const std::string&)> log)
    : api_(api), wake_(std::move(wake)), log_(std::move(log)) {
  auto wake_h = [this](WatchEvent, const json&) {
    if (wake_) wake_();
  };
  auto slice_h = [this](WatchEvent, const json&) {
    slices_dirty_ = true;
    if (wake_) wake_();
  };
  const std::string base = kDraApi;
  classes_ = std::make_unique<Informer>(api_, base + "deviceclasses", wake_h, log_);
  slices_ = std::make_unique<Informer>(api_, base + "resourceslices", slice_h, log_);
  auto claim_h = [this](WatchEvent e, const json& c) {
    ForgetOverlay(e, c);
    if (wake_) wake_();
  };
  claims_ = std::make_unique<Informer>(api_, base + "resourceclaims", claim_h, log_);
  templates_ = std::make_unique<Informer>(api_, base + "resourceclaimtemplates", wake_h, log_);
}

DraSync::~DraSync() { Stop(); }

void DraSync::Log(const std::string& s) const {
  if (log_) log_(s);
}

void DraSync::Start() {
  for (Informer* i : {classes_.get(), slices_.get(), claims_.get(), templates_.get()}) i->Start();
}

bool DraSync::WaitSynced(double timeout_s) {
  for (Informer* i : {classes_.get(), slices_.get(), claims_.get(), templates_.get()})
    if (!i->WaitSynced(timeout_s)) return false;
  if (!enabled()) Log("resource.k8s.io/v1 is not served: DRA is off (device-plugin resources only)");
  return true;
}

void DraSync::Stop() {
  for (auto* i : {&classes_, &slices_, &claims_, &templates_})
    if (*i) (*i)->Stop();
}

bool DraSync::enabled() const { return slices_->synced() && !slices_->absent(); }

void DraSync::RebuildModel() {
  std::vector<DraSlice> slices;
  std::vector<std::string> notes;
  for (const auto& [key, s] : slices_->Objects()) {
    auto parsed = ParseResourceSlice(s);
    if (parsed.ok())
      slices.push_back(std::move(parsed).value());
    else
      notes.push_back(parsed.error());
  }
  model_ = BuildDraModel(BuildDraPools(slices, &notes), Catalog::Default());
  notes.insert(notes.end(), model_.problems.begin(), model_.problems.end());
  if (notes != said_)
    for (const std::string& n : notes) Log("DRA: " + n);
  said_ = notes;
  size_t devices = 0;
  for (const DraModelNode& n : model_.nodes) devices += n.devices.size();
  Log(fmt::format("DRA: {} nodes, {} devices published", model_.nodes.size(), devices));
}

DraSync::View DraSync::Snapshot() {
  if (slices_dirty_.exchange(false)) RebuildModel();
  View v;
  v.model = &model_;
  for (const auto& [key, c] : classes_->Objects()) {
    auto parsed = ParseDeviceClass(c);
    if (parsed.ok())
      v.classes[parsed->name] = std::move(parsed).value();
    else
      Log("DRA: " + parsed.error());
  }
  {
    std::lock_guard<std::mutex> l(overlay_mu_);
    v.claims = OverlayClaims(claims_->Objects().ToMap(), &overlay_, NowS());
  }
  std::vector<std::string> notes;
  v.usage = std::make_unique<DraUsage>(UsageOfClaims(model_, v.claims, &notes));
  return v;
}

void DraSync::ForgetOverlay(WatchEvent e, const json& claim) {
  std::lock_guard<std::mutex> l(overlay_mu_);
  auto it = overlay_.find(Meta(claim, "namespace") + "/" + Meta(claim, "name"));
  if (it == overlay_.end()) return;
  const auto cmp = CompareVersions(Meta(claim, "resourceVersion"), Meta(it->second.claim, "resourceVersion"));
  if (e == WatchEvent::kDeleted || Meta(claim, "uid") != Meta(it->second.claim, "uid") || !cmp || *cmp >= 0)
    overlay_.erase(it);
}

void DraSync::Wrote(const json& claim) {
  std::lock_guard<std::mutex> l(overlay_mu_);
  overlay_[Meta(claim, "namespace") + "/" + Meta(claim, "name")] = {claim, NowS()};
}

}  // namespace tessera
