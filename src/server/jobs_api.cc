#include "server/jobs_api.h"

#include <fmt/format.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "server/json_views.h"
#include "server/request_checks.h"
#include "server/respond.h"

namespace tessera {
namespace {

bool Digits(const std::string& s, size_t max) {
  return !s.empty() && s.size() <= max && s.find_first_not_of("0123456789") == std::string::npos;
}

// `state`: a comma-separated list of Pending, Running, Succeeded, Failed, Cancelled; `active` (Pending and
// Running) or `all`; any case.
std::optional<ApiError> ParseStates(const std::string& v, std::vector<JobState>* out) {
  size_t start = 0;
  while (start <= v.size() && !v.empty()) {
    const size_t comma = v.find(',', start);
    std::string word = v.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    for (char& c : word) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    JobState st;
    std::string canon = word;
    if (!canon.empty()) canon[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(canon[0])));
    if (word == "active") {
      out->push_back(JobState::kPending);
      out->push_back(JobState::kRunning);
    } else if (word == "all") {
      out->clear();
      return std::nullopt;
    } else if (ParseJobState(canon, &st)) {
      out->push_back(st);
    } else {
      return Invalid("state",
                     "state: one or more (comma-separated) of Pending, Running, Succeeded, Failed, "
                     "Cancelled, or active or all");
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return std::nullopt;
}

// The cursor: for sort=id the last row's id; otherwise "<sort key>.<id>" (the key may be -1).
bool ParseCursor(const std::string& v, JobQuery* q) {
  if (v.empty()) return true;
  if (q->sort == JobSort::kId) {
    if (!Digits(v, 18)) return false;
    q->after_id = std::stoll(v);
  } else {
    const size_t dot = v.find('.');
    if (dot == std::string::npos) return false;
    const std::string key = v.substr(0, dot), id = v.substr(dot + 1);
    const bool neg = key == "-1";
    if ((!neg && !Digits(key, 18)) || !Digits(id, 18)) return false;
    q->after_key = std::stoll(key);
    q->after_id = std::stoll(id);
  }
  q->has_after = true;
  return true;
}

std::optional<ApiError> ParseQuery(const httplib::Request& req, JobQuery* q) {
  if (auto e = ReadPageSize(req, &q->limit)) return e;  // as every list of the API
  if (auto e = ParseStates(req.get_param_value("state"), &q->states)) return e;
  const std::string sort = req.has_param("sort") ? req.get_param_value("sort") : "id";
  if (sort == "id")
    q->sort = JobSort::kId;
  else if (sort == "submitted")
    q->sort = JobSort::kSubmitted;
  else if (sort == "started")
    q->sort = JobSort::kStarted;
  else if (sort == "ended")
    q->sort = JobSort::kEnded;
  else
    return Invalid("sort", "sort: one of id, submitted, started, ended");
  if (!ParseCursor(req.get_param_value("page_token"), q))
    return Invalid("page_token", "page_token: not a token this service gave");
  q->team = req.get_param_value("team");
  q->project = req.get_param_value("project");
  q->search = req.get_param_value("search");
  if (q->search.size() > 200) return Invalid("search", "search: at most 200 characters");
  return std::nullopt;
}

// FNV-1a of the answer: the page's version.
std::string VersionOf(const std::string& text) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ULL;
  return fmt::format("{:016x}", h);
}

}  // namespace

void RegisterJobListRoute(
    httplib::Server& h, ServiceRef s,
    const std::function<std::function<void(const httplib::Request&, httplib::Response&)>(AuthedHandler)>&
        authed) {
  h.Get("/api/v1/jobs", authed([s](const Caller& c, const httplib::Request& req, httplib::Response& res) {
          JobQuery q;
          if (auto e = ParseQuery(req, &q)) return SendJson(res, HttpStatusOf(e->code), ErrorJson(*e));
          JobPage page = s->ListJobs(c, q);
          nlohmann::json arr = nlohmann::json::array();
          for (const JobView& v : page.jobs) arr.push_back(JobJson(v, *s));
          std::string next;
          if (page.more && !page.jobs.empty()) {
            const JobRecord& last = *page.jobs.back().job;
            next = q.sort == JobSort::kId ? std::to_string(last.id)
                                          : fmt::format("{}.{}", JobSortKey(last, q.sort), last.id);
          }
          nlohmann::json body = {{"jobs", std::move(arr)}, {"next_page_token", next}, {"total", page.total}};
          const std::string version = VersionOf(body.dump());
          res.set_header("Cache-Control", "no-store");
          if (req.get_param_value("since") == version) {
            res.status = 304;
            return;
          }
          body["version"] = version;
          SendJson(res, 200, body);
        }));
}

}  // namespace tessera
