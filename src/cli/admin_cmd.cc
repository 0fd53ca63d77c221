// `tessera team ...`, `tessera user ...`, `tessera cluster`: the administration half of the API's client, so
// that every action of the portal's Team, Cluster and Admin pages is also a command. Exit codes as in
// cli/client_common.h.
#include <nlohmann/json.hpp>

#include "cli/client_common.h"
#include "cli/commands.h"
#include "client/format.h"

namespace tessera::cli {
namespace {

using client::ApiClient;
using client::ApiResponse;

// Quota flags: only the ones given go into the request body.
struct QuotaArgs {
  double guaranteed = 0, limit = 0;
  CLI::Option* guaranteed_opt = nullptr;
  CLI::Option* limit_opt = nullptr;

  void Add(CLI::App* cmd) {
    guaranteed_opt = cmd->add_option("--guaranteed", guaranteed, "guaranteed GPUs")->check(CLI::NonNegativeNumber);
    limit_opt = cmd->add_option("--limit", limit, "GPU limit (borrowing stops there)")->check(CLI::NonNegativeNumber);
  }
  nlohmann::json Body() const {
    nlohmann::json b = nlohmann::json::object();
    if (guaranteed_opt->count() > 0) b["guaranteed_gpus"] = guaranteed;
    if (limit_opt->count() > 0) b["limit_gpus"] = limit;
    return b;
  }
};

void RegisterTeam(CLI::App& app, int* exit_code) {
  CLI::App* team = app.add_subcommand("team", "List teams, create one, change its quota");
  team->require_subcommand(1);
  static ClientArgs a;
  static std::string name;
  static QuotaArgs create_quota, set_quota;
  auto print_team = [](const ApiResponse& r) {
    return client::TeamsTable(nlohmann::json{{"teams", nlohmann::json::array({r.body})}});
  };

  CLI::App* list = team->add_subcommand("list", "Teams with guaranteed, limit, allocated and fair-share GPUs");
  AddClientOptions(list, &a);
  list->callback([exit_code] {
    *exit_code = RunClient(a, [](ApiClient& c) { return c.Teams(); },
                           [](const ApiResponse& r) { return client::TeamsTable(r.body); });
  });

  CLI::App* create = team->add_subcommand("create", "Create a team (admin)");
  create->add_option("name", name, "team name")->required();
  create_quota.Add(create);
  AddClientOptions(create, &a);
  create->callback([exit_code, print_team] {
    nlohmann::json body = create_quota.Body();
    body["name"] = name;
    *exit_code = RunClient(a, [&body](ApiClient& c) { return c.CreateTeam(body); }, print_team);
  });

  CLI::App* set = team->add_subcommand("set", "Change a team's guaranteed GPUs and/or limit (admin)");
  set->add_option("name", name, "team name")->required();
  set_quota.Add(set);
  AddClientOptions(set, &a);
  set->callback([exit_code, print_team] {
    const nlohmann::json body = set_quota.Body();
    if (body.empty()) return void(*exit_code = (fmt::print(stderr, "error: give --guaranteed and/or --limit\n"), 2));
    *exit_code = RunClient(a, [&body](ApiClient& c) { return c.UpdateTeam(name, body); }, print_team);
  });
}

void RegisterUser(CLI::App& app, int* exit_code) {
  CLI::App* user = app.add_subcommand("user", "List users, create one, give a new token or revoke it");
  user->require_subcommand(1);
  static ClientArgs a;
  static std::string name, team, role = "member";
  auto detail = [](const ApiResponse& r) { return client::UserDetail(r.body); };

  CLI::App* list = user->add_subcommand("list", "Users the caller may manage, with their token's state");
  AddClientOptions(list, &a);
  list->callback([exit_code] {
    *exit_code = RunClient(a, [](ApiClient& c) { return c.Users(); },
                           [](const ApiResponse& r) { return client::UsersTable(r.body); });
  });

  CLI::App* create = user->add_subcommand("create", "Create a user and print its token once");
  create->add_option("name", name, "user name")->required();
  create->add_option("--team", team, "the user's team")->required();
  create->add_option("--role", role, "admin, team-lead, member or viewer")->capture_default_str();
  AddClientOptions(create, &a);
  create->callback([exit_code, detail] {
    const nlohmann::json body = {{"name", name}, {"team", team}, {"role", role}};
    *exit_code = RunClient(a, [&body](ApiClient& c) { return c.CreateUser(body); }, detail);
  });

  for (const bool revoke : {false, true}) {
    CLI::App* cmd = revoke ? user->add_subcommand("revoke", "Revoke a user's token (it can no longer sign in)")
                           : user->add_subcommand("token", "Give a user a new token (the old one stops working)");
    cmd->add_option("name", name, "user name")->required();
    AddClientOptions(cmd, &a);
    cmd->callback([exit_code, detail, revoke] {
      *exit_code = RunClient(a, [revoke](ApiClient& c) { return c.ReplaceToken(name, revoke); }, detail);
    });
  }
}

}  // namespace

void RegisterAdminClient(CLI::App& app, int* exit_code) {
  RegisterTeam(app, exit_code);
  RegisterUser(app, exit_code);
  static ClientArgs a;
  CLI::App* cluster = app.add_subcommand("cluster", "Nodes, GPUs and MIG layouts as the last cycle left them");
  AddClientOptions(cluster, &a);
  cluster->callback([exit_code] {
    *exit_code = RunClient(a, [](ApiClient& c) { return c.Cluster(); },
                           [](const ApiResponse& r) { return client::ClusterTable(r.body); });
  });
}

}  // namespace tessera::cli
