#include "base/thread_priority.h"

#include <algorithm>
#include <cerrno>

#if defined(__linux__)
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace tessera {

void LowerThreadPriority(int by) {
#if defined(__linux__)
  if (by <= 0) return;
  const id_t tid = static_cast<id_t>(syscall(SYS_gettid));
  errno = 0;
  const int base = getpriority(PRIO_PROCESS, tid);
  if (errno == 0) (void)setpriority(PRIO_PROCESS, tid, std::min(19, base + by));
#else
  (void)by;
#endif
}

}  // namespace tessera
