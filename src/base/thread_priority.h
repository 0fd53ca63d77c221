#pragma once
// CPU priority of the calling thread. Linux keeps a nice value per thread (getpriority/setpriority with the
// thread id), and threads inherit their creator's; elsewhere this does nothing.

namespace tessera {

// Adds `by` (> 0) to the calling thread's nice value, at most 19. Best effort: errors are ignored, since a
// thread that keeps its priority still works.
void LowerThreadPriority(int by);

}  // namespace tessera
