#pragma once
// The devices of DRA pools, per node, mapped onto Tessera's catalog: NVIDIA's full GPUs ("gpu-<minor>") and
// DynamicMIG placements ("gpu-<minor>-mig-<profile without dots>-<GI profile id>-<start>") become GPUs of a
// catalog kind and MIG instances (profile index, start); an unknown product or profile is reported in
// `problems`, never guessed (the device keeps its counters and stays allocatable, without geometry).
// Shared counters are resolved to indices so DraUsage can check them exactly: a device fits only if every
// counter it consumes stays within its set, summed over the devices in use, and it is not in use itself.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "base/ids.h"
#include "k8s/dra/dra_objects.h"
#include "model/catalog.h"

namespace tessera {

inline constexpr const char* kNvidiaDraDriver = "gpu.nvidia.com";

// "gpu-3" or "gpu-0-mig-1g10gb-me-20-0"; nullopt for other names.
struct NvidiaDeviceName {
  int minor = -1;
  bool mig = false;
  std::string profile_token;  // "1g10gb", "1g10gb-me"
  int profile_id = -1, start = -1;
};
std::optional<NvidiaDeviceName> ParseNvidiaDeviceName(const std::string& name);

enum class DraDeviceRole { kOther, kFullGpu, kMig };

struct DraModelConsumption {
  int set = -1;                                   // index into DraModelNode::sets
  std::vector<std::pair<int, int64_t>> counters;  // (counter index in the set, thousandths)
};

struct DraModelDevice {
  std::string driver, pool;
  DraDevice device;
  DraDeviceRole role = DraDeviceRole::kOther;
  int gpu = -1;            // index into DraModelNode::gpus (full GPUs and MIG placements)
  int profile = -1;        // catalog profile index of a MIG placement, -1 when unknown
  int start = -1;          // memory-slice start of a MIG placement
  uint8_t slice_mask = 0;  // the memory-slice-<i> counters it consumes
  std::vector<DraModelConsumption> consumes;
  bool pool_complete = true;
  bool usable = true;  // false when it consumes from a counter set its pool does not publish
};

struct DraModelCounterSet {
  std::string driver, pool, name;
  std::vector<std::string> counters;
  std::vector<int64_t> capacity;
  std::vector<int> slice_counter;  // memory slice i -> counter index, -1 when absent
};

struct DraModelGpu {
  int minor = -1;
  std::string product;
  KindId kind = kNone;             // kNone when the product is not in the catalog
  int set = -1;                    // its counter set
  std::vector<uint8_t> mig_masks;  // slice masks of its announced MIG placements (fallback geometry)
};

struct DraModelNode {
  std::string name;
  std::vector<DraModelDevice> devices;  // sorted by device name (the upstream allocator's order)
  std::vector<DraModelCounterSet> sets;
  std::vector<DraModelGpu> gpus;
  bool incomplete = false;  // some pool of this node is incomplete
};

struct DraModel {
  std::vector<DraModelNode> nodes;  // sorted by name
  std::vector<std::string> problems;
  // (node index, device index) of a published device, or nullopt.
  std::optional<std::pair<int, int>> Find(const std::string& driver, const std::string& pool,
                                          const std::string& device) const;
  int NodeIndex(const std::string& name) const;  // -1 when unknown

  std::map<std::tuple<std::string, std::string, std::string>, std::pair<int, int>> index_;
};

// Node-local pools only (others are reported in `problems` and left out).
DraModel BuildDraModel(const std::vector<DraPool>& pools, const Catalog& catalog);

// What is in use: devices taken and counters consumed, per node. Invariant: for every set and counter,
// used <= capacity for everything added through Add after Fits said yes.
class DraUsage {
 public:
  explicit DraUsage(const DraModel& model);
  bool Taken(int node, int device) const { return taken_[node][device]; }
  bool Fits(int node, int device) const;
  void Add(int node, int device);
  void Remove(int node, int device);
  int64_t Used(int node, int set, int counter) const { return used_[node][set][counter]; }
  uint8_t UsedSlices(int node, int gpu) const;  // memory slices of the GPU in use
  int DevicesOnGpu(int node, int gpu) const { return on_gpu_[node][gpu]; }
  // Marks the results of existing allocations; returns one line per result naming no published device
  // (a device of an older generation or of a lost GPU) or a device already in use.
  std::vector<std::string> AddResults(const std::vector<DraDeviceResult>& results);
  void RemoveResults(const std::vector<DraDeviceResult>& results);
  const DraModel& model() const { return *model_; }

 private:
  const DraModel* model_;
  std::vector<std::vector<char>> taken_;
  std::vector<std::vector<std::vector<int64_t>>> used_;
  std::vector<std::vector<int>> on_gpu_;
};

}  // namespace tessera
