// `tessera node list|add|cordon|uncordon|drain|remove`: the cluster's nodes through the API (admin). Exit
// codes as in cli/client_common.h.
#include <nlohmann/json.hpp>

#include "base/file.h"
#include "cli/client_common.h"
#include "cli/commands.h"
#include "client/format.h"

namespace tessera::cli {

void RegisterNode(CLI::App& app, int* exit_code) {
  using client::ApiClient;
  using client::ApiResponse;
  CLI::App* node = app.add_subcommand("node", "The cluster's nodes: list, add, cordon, uncordon, drain, remove (admin)");
  node->require_subcommand(1);
  static ClientArgs a;
  static std::string name, file;
  auto table = [](const ApiResponse& r) { return client::NodesTable(r.body); };

  CLI::App* list = node->add_subcommand("list", "Nodes with their state (ready, cordoned, draining, drained, unhealthy)");
  AddClientOptions(list, &a);
  list->callback([exit_code, table] { *exit_code = RunClient(a, [](ApiClient& c) { return c.Nodes(); }, table); });

  CLI::App* add = node->add_subcommand("add", "Add a node described as in the cluster YAML (a YAML or JSON file)");
  add->add_option("file", file, "the node: a mapping with name, gpu, gpus, cpu, memory_gib, leaf, spine, tier, ...")
      ->required();
  AddClientOptions(add, &a);
  add->callback([exit_code, table] {
    auto text = ReadFile(file);
    auto body = text.ok() ? client::MappingFromText(*text, file, "one node (a mapping with name, gpu, gpus, ...)")
                          : Result<nlohmann::json>(text.status());
    if (!body.ok()) return void(*exit_code = (fmt::print(stderr, "error: {}\n", body.error()), 2));
    *exit_code = RunClient(a, [&](ApiClient& c) { return c.AddNode(*body); }, table);
  });

  for (const char* action : {"cordon", "uncordon", "drain"}) {
    const std::string what = std::string(action) == "cordon"     ? "Stop new placements on a node (what runs stays)"
                             : std::string(action) == "uncordon" ? "Return a cordoned or drained node to service"
                                                                 : "Cordon a node, then stop and requeue its jobs";
    CLI::App* cmd = node->add_subcommand(action, what);
    cmd->add_option("name", name, "node name")->required();
    AddClientOptions(cmd, &a);
    cmd->callback([exit_code, table, action] {
      *exit_code = RunClient(a, [action](ApiClient& c) { return c.NodeAction(name, action); }, table);
    });
  }

  CLI::App* remove = node->add_subcommand("remove", "Remove a node (refused while anything runs there: drain it)");
  remove->add_option("name", name, "node name")->required();
  AddClientOptions(remove, &a);
  remove->callback([exit_code] {
    *exit_code = RunClient(a, [](ApiClient& c) { return c.RemoveNode(name); },
                           [](const ApiResponse&) { return fmt::format("removed node {}\n", name); });
  });
}

}  // namespace tessera::cli
