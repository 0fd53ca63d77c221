#include "service/scheduler.h"

namespace tessera {

Scheduler::Scheduler() {
  auto p = MakePolicy("tessera");
  TESSERA_CHECK(p.ok(), p.error());
  policy_ = std::move(p).value();
}

}  // namespace tessera
