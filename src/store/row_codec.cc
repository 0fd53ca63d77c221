// The stores' shared column encodings (row_codec.h).
#include "store/row_codec.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

namespace tessera {

std::string EncodeClasses(const std::optional<std::vector<std::string>>& c) {
  return c ? nlohmann::json(*c).dump() : std::string();
}

std::optional<std::vector<std::string>> DecodeClasses(const std::string& text) {
  if (text.empty()) return std::nullopt;
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  std::vector<std::string> out;
  if (j.is_array())
    for (const auto& c : j)
      if (c.is_string()) out.push_back(c.get<std::string>());
  return out;
}

std::string EncodePlacements(const std::vector<TaskPlacement>& tasks) {
  if (tasks.empty()) return "[]";
  nlohmann::json out = nlohmann::json::array();
  for (const TaskPlacement& t : tasks) {
    nlohmann::json gpus = nlohmann::json::array();
    for (const GpuGrant& g : t.gpus)
      gpus.push_back({g.gpu, g.milli, g.memory_mib, g.mig_profile, g.mig_start});
    out.push_back({{"node", t.node}, {"gpus", std::move(gpus)}});
  }
  return out.dump();
}

Result<std::vector<TaskPlacement>> DecodePlacements(const std::string& text, int64_t job) {
  std::vector<TaskPlacement> out;
  try {
    for (const auto& t : nlohmann::json::parse(text)) {
      TaskPlacement tp;
      tp.node = t.at("node").get<NodeId>();
      for (const auto& g : t.at("gpus")) {
        GpuGrant gg;
        gg.gpu = g.at(0).get<GpuId>();
        gg.milli = g.at(1).get<int>();
        gg.memory_mib = g.at(2).get<int64_t>();
        gg.mig_profile = g.at(3).get<int16_t>();
        gg.mig_start = g.at(4).get<int8_t>();
        tp.gpus.push_back(gg);
      }
      out.push_back(std::move(tp));
    }
  } catch (const nlohmann::json::exception& e) {
    return Status::Error(fmt::format("job {}: stored placements unreadable: {}", job, e.what()));
  }
  return out;
}

}  // namespace tessera
