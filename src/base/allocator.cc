#include "base/allocator.h"

#include <cstdlib>

// gperftools' C interface (gperftools/malloc_extension_c.h). Weak: in a binary without tcmalloc they are
// null and nothing is done.
extern "C" void MallocExtension_MarkThreadIdle(void) __attribute__((weak));
extern "C" void MallocExtension_ReleaseFreeMemory(void) __attribute__((weak));
extern "C" int MallocExtension_GetNumericProperty(const char* property, size_t* value) __attribute__((weak));
extern "C" int MallocExtension_SetNumericProperty(const char* property, size_t value) __attribute__((weak));

namespace tessera {

void AllocatorThreadIdle() {
  if (MallocExtension_MarkThreadIdle != nullptr) MallocExtension_MarkThreadIdle();
}

void AllocatorReleaseFree() {
  if (MallocExtension_ReleaseFreeMemory != nullptr) MallocExtension_ReleaseFreeMemory();
}

void AllocatorCapThreadCaches(size_t bytes) {
  if (MallocExtension_SetNumericProperty == nullptr) return;
  if (std::getenv("TCMALLOC_MAX_TOTAL_THREAD_CACHE_BYTES") != nullptr) return;
  (void)MallocExtension_SetNumericProperty("tcmalloc.max_total_thread_cache_bytes", bytes);
}

namespace {

std::optional<size_t> Property(const char* name) {
  size_t v = 0;
  if (MallocExtension_GetNumericProperty == nullptr || !MallocExtension_GetNumericProperty(name, &v))
    return std::nullopt;
  return v;
}

}  // namespace

AllocatorStats ReadAllocatorStats() {
  return {Property("generic.current_allocated_bytes"), Property("tcmalloc.current_total_thread_cache_bytes"),
          Property("tcmalloc.max_total_thread_cache_bytes")};
}

}  // namespace tessera
