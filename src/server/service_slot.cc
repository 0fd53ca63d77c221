// ServiceSlot (service_slot.h).
#include "server/service_slot.h"

namespace tessera {
namespace {

// What the calling thread holds: the slot, its service, and whether a request pinned it.
struct HeldService {
  const ServiceSlot* slot = nullptr;
  std::shared_ptr<Service> service;
  bool pinned = false;
};
thread_local HeldService t_held;

}  // namespace

std::unique_ptr<ServiceSlot> ServiceSlot::Unowned(Service* s) {
  return std::make_unique<ServiceSlot>(std::shared_ptr<Service>(s, [](Service*) {}));
}

std::shared_ptr<Service> ServiceSlot::current() const {
  std::lock_guard<std::mutex> lock(mu_);
  return current_;
}

void ServiceSlot::Replace(std::shared_ptr<Service> s) {
  std::shared_ptr<Service> old;
  std::lock_guard<std::mutex> lock(mu_);
  old.swap(current_);
  current_ = std::move(s);
}

void ServiceSlot::Pin() const { t_held = {this, current(), true}; }

void ServiceSlot::Unpin() const {
  if (t_held.slot == this) t_held = {};
}

Service* ServiceSlot::Get() const {
  if (t_held.slot != this || !t_held.pinned) t_held = {this, current(), false};
  return t_held.service.get();
}

}  // namespace tessera
