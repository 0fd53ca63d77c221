#include "base/parallel.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

namespace tessera {

void ParallelFor(size_t count, int threads, const std::function<void(size_t)>& body) {
  std::atomic<size_t> next{0};
  std::mutex error_mutex;
  std::exception_ptr first_error;  // guarded by error_mutex
  auto worker = [&] {
    for (size_t i; (i = next.fetch_add(1)) < count;) {
      try {
        body(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!first_error) first_error = std::current_exception();
        next.store(count);  // hand out no further item
      }
    }
  };
  const size_t n = std::min(count, static_cast<size_t>(std::max(1, threads)));
  std::vector<std::thread> pool;
  try {
    for (size_t t = 1; t < n; ++t) pool.emplace_back(worker);
  } catch (const std::system_error&) {
    // No more threads to be had: the ones started and the caller share the items.
  }
  worker();
  for (std::thread& t : pool) t.join();
  if (first_error) std::rethrow_exception(first_error);
}

}  // namespace tessera
