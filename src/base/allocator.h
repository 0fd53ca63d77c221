#pragma once
// Hints to the memory allocator (gperftools' tcmalloc, where the binary links it; without it these do
// nothing). A long-running process calls them so that its resident memory follows what it holds, not the
// most it ever held.

#include <cstddef>
#include <optional>

namespace tessera {

// The calling thread's cache of freed objects goes back to the shared free lists (a thread about to idle).
void AllocatorThreadIdle();

// Free pages the allocator keeps go back to the operating system. Costs a few system calls; the next
// allocations that need those pages fault them in again, so call it every few seconds, not per request.
void AllocatorReleaseFree();

// Caps the memory all threads' caches of freed objects may hold together (tcmalloc's default is 32 MiB,
// which a process serving for hours fills slowly: its resident memory creeps up about 1 MiB a minute under
// a steady load). Unless the environment sets TCMALLOC_MAX_TOTAL_THREAD_CACHE_BYTES, which wins.
void AllocatorCapThreadCaches(size_t bytes);

// What the allocator reports, in bytes, where it can (nullopt without tcmalloc): in use by the program,
// held in the threads' caches, and the cap on those.
struct AllocatorStats {
  std::optional<size_t> in_use, thread_caches, thread_cache_limit;
};
AllocatorStats ReadAllocatorStats();

}  // namespace tessera
