#pragma once
// JSON renderings of the service's answers (the API's wire format, docs/api.md).

#include <nlohmann/json_fwd.hpp>

#include "service/service.h"

namespace tessera {

// ISO 8601 UTC of a service time, or null for -1.
nlohmann::json TimeJson(int64_t t);
nlohmann::json JobJson(const JobView& v, const Service& s);
// One job's page: JobJson plus the body it was submitted with (`spec`) and why its placement differs
// from what it asked for (`placement_note`, null when it does not).
nlohmann::json JobDetailJson(const JobView& v, const Service& s);
nlohmann::json QueueEntryJson(const QueueEntry& e, const Service& s);
nlohmann::json TeamJson(const TeamView& t);
nlohmann::json UserJson(const UserView& u);
// {"id", "time", "actor", "action", "target", "source", "before", "after", "changed"}.
nlohmann::json AuditJson(const AuditRow& a);

// The snapshot's live nodes (removed ones left out), each with its state (Service::NodeStates).
nlohmann::json ClusterJson(const Snapshot& snap);
// A node of the nodes API: its spec as in the cluster YAML, its state and the tasks running there.
nlohmann::json NodeJson(const NodeView& v);
nlohmann::json ErrorJson(const ApiError& e);
// CSV with a header: team,project,job,tier,idle,gpu_hours,cost,idle_share_cost,price_book_date. A text cell that a
// spreadsheet would read as a formula (starting with =, +, -, @, tab or CR) gets a leading ' (OWASP).
std::string UsageCsv(const std::vector<UsageRow>& rows);
nlohmann::json UsageJson(const std::vector<UsageRow>& rows, int64_t from, int64_t to, const std::string& group_by);

}  // namespace tessera
