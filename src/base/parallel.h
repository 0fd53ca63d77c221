#pragma once
// Runs independent work items on a few threads.
#include <cstddef>
#include <functional>

namespace tessera {

// Calls body(i) once for every i in [0, count), on at most max(1, threads) threads (the calling thread is
// one of them); items are handed out in index order as threads become free. Returns when all are done.
// body must be safe to call concurrently for different i (e.g. each writes only its own slot of a
// pre-sized vector); results must not depend on which thread runs an item.
// If body throws, no further item is started, the items already running finish, every thread is joined,
// and then the first exception thrown is rethrown on the caller (later ones are dropped).
void ParallelFor(size_t count, int threads, const std::function<void(size_t)>& body);

}  // namespace tessera
