#pragma once
// ReplicaRole: what an ApiServer asks of the replica it serves for (server/replica.h) when several
// `tessera serve` processes share one database: whether this one leads now, and who does.

#include <cstdint>
#include <string>

namespace tessera {

struct LeaderInfo {
  std::string leader;  // the leader's advertised URL ("" = none known)
  int64_t epoch = 0;   // the lease's epoch as this replica last saw it (its own while it leads)
  std::string self;    // this replica's advertised URL
  bool leading = false;
};

class ReplicaRole {
 public:
  virtual ~ReplicaRole() = default;
  // True while this replica holds the lease and its term has not run out by its own clock: only then does
  // it accept a write.
  virtual bool Leading() const = 0;
  virtual LeaderInfo Info() const = 0;
};

}  // namespace tessera
