// The scheduler's view of MIG nodes (scheduler.h): the ConfigMaps their nvidia.com/mig.config names are
// resolved in, and what cannot be read or modelled about a node, reported on that node.
#include <fmt/format.h>

#include <chrono>
#include <nlohmann/json.hpp>

#include "k8s/api/events.h"
#include "k8s/scheduler.h"

namespace tessera {

using json = nlohmann::json;

namespace {

constexpr int64_t kMigSourcesEveryS = 30;
constexpr const char* kOperatorNamespace = "gpu-operator";
constexpr const char* kDefaultMigConfigMap = "default-mig-parted-config";

int64_t SteadySeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The GPU Operator's MIG ConfigMap (NS/NAME) from its ClusterPolicies: the first one's
// spec.migManager.config.name in status.namespace. Without a ClusterPolicy (404: the kind is not served, or
// none exists) the operator's default; *said gets a line when the ClusterPolicies could not be read.
std::string OperatorMigConfigMap(const ApiClient& api, std::string* said) {
  const ApiResponse r = api.Get("/apis/nvidia.com/v1/clusterpolicies");
  std::string ns = kOperatorNamespace, name = kDefaultMigConfigMap;
  if (!r.ok() && r.status != 404)
    *said += fmt::format("; ClusterPolicies not read ({} {}), so {}/{} is assumed", r.status, r.error, ns, name);
  const json* items = r.ok() ? Field(r.body, "items") : nullptr;
  if (items == nullptr || !items->is_array() || items->empty()) return ns + "/" + name;
  const json& policy = items->front();
  const json* spec = Field(policy, "spec");
  const json* manager = spec != nullptr ? Field(*spec, "migManager") : nullptr;
  const json* config = manager != nullptr ? Field(*manager, "config") : nullptr;
  if (config != nullptr && !StringField(*config, "name").empty()) name = StringField(*config, "name");
  if (const json* status = Field(policy, "status"); status != nullptr && !StringField(*status, "namespace").empty())
    ns = StringField(*status, "namespace");
  return ns + "/" + name;
}

// The configs of ConfigMap NS/NAME (key config.yaml); an error line when it cannot be read. What of its
// content does not read (the key missing, not a mig-parted file, configs skipped) goes to *content, and the
// object to *object, so that it can be reported on the ConfigMap.
Result<MigConfigSource> ReadMigSource(const ApiClient& api, const std::string& config_map, std::string* content,
                                      json* object) {
  const size_t slash = config_map.find('/');
  const ApiResponse r = api.Get(fmt::format("/api/v1/namespaces/{}/configmaps/{}", config_map.substr(0, slash),
                                            config_map.substr(slash + 1)));
  if (!r.ok()) return Status::Error(fmt::format("{}: {} {}", config_map, r.status, r.error));
  *object = r.body;
  const json* data = Field(r.body, "data");
  const json* text = data != nullptr ? Field(*data, "config.yaml") : nullptr;
  if (text == nullptr || !text->is_string()) *content = config_map + ": no key config.yaml";
  std::vector<std::string> skipped;
  auto configs = content->empty() ? ReadMigPartedConfigs(text->get<std::string>(), &skipped)
                                  : Result<std::vector<MigPartedConfig>>(Status::Error(*content));
  if (!configs.ok() && content->empty()) *content = fmt::format("{}, key config.yaml: {}", config_map, configs.error());
  if (!configs.ok()) return Status::Error(*content);
  for (const std::string& s : skipped) *content += (content->empty() ? config_map + ": configs left out: " : "; ") + s;
  return MigConfigSource{config_map, std::move(configs).value()};
}

}  // namespace

void K8sScheduler::LoadMigSources(bool now) {
  const int64_t t = SteadySeconds();
  if (!now && t - mig_sources_at_ < kMigSourcesEveryS) return;
  mig_sources_at_ = t;
  std::string said;
  std::vector<std::string> names;
  if (!options_.mig_config_map.empty()) names.push_back(options_.mig_config_map);
  const std::string operator_map = OperatorMigConfigMap(api_, &said);
  if (operator_map != options_.mig_config_map) names.push_back(operator_map);
  std::vector<MigConfigSource> sources;
  std::string read;
  for (const std::string& name : names) {
    std::string content;
    json object;
    auto src = ReadMigSource(api_, name, &content, &object);
    if (!content.empty() && mig_sources_said_.find(content) == std::string::npos) {
      object["kind"] = "ConfigMap";  // its content is reported on it, once per change
      const ApiResponse r = PostEvent(api_, object, "Warning", "MigConfigNotRead", "tessera: " + content, "tessera");
      if (!r.ok()) Log(fmt::format("writing an Event about ConfigMap {} failed ({} {})", name, r.status, r.error));
    }
    if (!content.empty() && src.ok()) said += "; " + content;
    if (src.ok()) {
      read += fmt::format("{}{} from {}", read.empty() ? "" : ", ", src->configs.size(), name);
      sources.push_back(std::move(src).value());
    } else {
      said += "; not read: " + src.error();
    }
  }
  node_reads_.clear();  // specs read from the old sources are read again
  mig_sources_ = std::move(sources);
  said = fmt::format("MIG configs for nodes' nvidia.com/mig.config: {}, then Tessera's names, then what a node "
                     "advertises{}", read.empty() ? "none from ConfigMaps" : read, said);
  if (said != mig_sources_said_) Log(said);
  mig_sources_said_ = said;
}

Result<json> K8sScheduler::NodeSpecOf(const json& node, const std::map<std::string, NodeUse>& used, NodeModel* model) {
  auto m = ReadNodeModel(node, Catalog::Default(), options_.leaf_label, options_.spine_label);
  if (!m.ok()) {
    ReportNode(node, "NodeNotModelled", fmt::format("tessera: {}; Tessera places nothing there", m.error()));
    return m.status();
  }
  *model = *m;
  std::string note;
  auto spec = NodeSpecFor(*m, used.count(m->name) ? used.at(m->name) : NodeUse{}, Catalog::Default(), mig_sources_,
                          &note);
  if (!spec.ok())
    if (auto dra = dra_->NodeSpec(*m, used.count(m->name) ? used.at(m->name) : NodeUse{}))
      spec = std::move(*dra);
  const bool names_mig = m->kind != kNone && !m->mig_config.empty() && m->mig_config != "all-disabled";
  if (!spec.ok() && names_mig)
    ReportNode(node, "MigLayoutNotModelled", fmt::format("tessera: {}; Tessera places nothing there", spec.error()));
  else if (spec.ok() && !note.empty())
    ReportNode(node, "MigLayoutFromGfd", fmt::format("tessera: node {}: nvidia.com/mig.config={}: {}", m->name,
                                                     m->mig_config, note));
  else
    ReportNode(node, "", "");
  return spec;
}

void K8sScheduler::ReportNode(const json& node, const std::string& reason, const std::string& message) {
  const std::string name = Meta(node, "name");
  auto it = node_said_.find(name);
  if (message.empty() || (it != node_said_.end() && it->second == message)) {
    if (message.empty() && it != node_said_.end()) node_said_.erase(it);
    return;
  }
  node_said_[name] = message;
  Log(message);
  const json regarding = {{"kind", "Node"}, {"metadata", {{"name", name}, {"uid", Meta(node, "uid")}}}};
  const ApiResponse r = PostEvent(api_, regarding, "Warning", reason, message, "tessera");
  if (!r.ok()) Log(fmt::format("writing an Event about node {} failed ({} {})", name, r.status, r.error));
}

}  // namespace tessera
