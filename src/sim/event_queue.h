#pragma once
// Simulated time and the event queue. Time is integer seconds from the start of the run; nothing reads a
// wall clock. Events at the same time are processed in a fixed order: completions and failures first
// (they free capacity), then starts (after a repartition delay), then arrivals; ties keep insertion order.

#include <cstdint>
#include <queue>
#include <vector>

#include "control/job_slot.h"

namespace tessera {

// The injected clock of a simulation (monotonic, set only by the event loop).
class SimClock {
 public:
  int64_t now_s() const { return now_s_; }
  void AdvanceTo(int64_t t) {
    if (t > now_s_) now_s_ = t;
  }

 private:
  int64_t now_s_ = 0;
};

// kVacate: a preempted job's grace period ends and it releases its GPUs.
enum class EventType : uint8_t { kCompletion = 0, kFailure = 1, kStart = 2, kArrival = 3, kVacate = 4 };

struct Event {
  int64_t time_s = 0;
  EventType type = EventType::kArrival;
  JobSlot job;          // the job's slot in the loop's table
  uint32_t epoch = 0;   // the job's epoch when scheduled; stale events (job preempted since) are dropped
  uint64_t seq = 0;     // insertion order (set by EventQueue::Push)
};

class EventQueue {
 public:
  void Push(Event e) {
    e.seq = next_seq_++;
    heap_.push(e);
  }
  bool empty() const { return heap_.empty(); }
  size_t size() const { return heap_.size(); }
  const Event& top() const { return heap_.top(); }
  Event Pop() {
    Event e = heap_.top();
    heap_.pop();
    return e;
  }

 private:
  struct Later {
    bool operator()(const Event& a, const Event& b) const {
      if (a.time_s != b.time_s) return a.time_s > b.time_s;
      if (a.type != b.type) return a.type > b.type;
      return a.seq > b.seq;
    }
  };
  std::priority_queue<Event, std::vector<Event>, Later> heap_;
  uint64_t next_seq_ = 0;
};

}  // namespace tessera
