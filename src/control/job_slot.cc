#include "control/job_slot.h"

#include <ostream>

namespace tessera {

std::ostream& operator<<(std::ostream& os, JobSlot slot) { return os << slot.value(); }

}  // namespace tessera
