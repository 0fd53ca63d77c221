#pragma once
// ServiceSlot: the Service an ApiServer answers with, replaceable while it serves (a replica that becomes
// the leader, or follows with a fresher view of the database: server/replica.h). A request pins the
// service current at its start (Pin, from the server's pre-routing handler) and uses that one to its end
// (Unpin), so a replacement never changes or frees it mid-request; the replaced one goes when its last
// request ends. ServiceRef is the handle the route handlers hold: `s->Submit(...)`, `*s`.
//
// Thread safety: every method may be called from any thread.

#include <memory>
#include <mutex>

#include "service/service.h"

namespace tessera {

class ServiceSlot {
 public:
  explicit ServiceSlot(std::shared_ptr<Service> s) : current_(std::move(s)) {}
  // A slot that does not own `s` (the caller keeps it alive as long as the slot).
  static std::unique_ptr<ServiceSlot> Unowned(Service* s);

  std::shared_ptr<Service> current() const;
  void Replace(std::shared_ptr<Service> s);
  // Pins the current service to the calling thread until Unpin (one request).
  void Pin() const;
  void Unpin() const;
  // The calling thread's pinned service; without a pin, the current one, which the thread holds until its
  // next call (a background thread's each call may see a newer one).
  Service* Get() const;

 private:
  mutable std::mutex mu_;
  std::shared_ptr<Service> current_;
};

class ServiceRef {
 public:
  explicit ServiceRef(const ServiceSlot* slot) : slot_(slot) {}
  Service* operator->() const { return slot_->Get(); }
  Service& operator*() const { return *slot_->Get(); }

 private:
  const ServiceSlot* slot_;
};

}  // namespace tessera
