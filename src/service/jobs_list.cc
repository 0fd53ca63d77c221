// The jobs list: every visible job, live or ended, filtered by state, team, project and a search text,
// sorted by id or newest first by submit, start or end time, one page at a time (keyset cursor: the last
// row's sort key and id, so that a page never repeats or skips a row when jobs are added).
#include <algorithm>
#include <cctype>

#include "service/job_book.h"

namespace tessera {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool Matches(const JobRecord& j, const JobQuery& q, const std::string& needle) {
  if (!q.states.empty() && std::find(q.states.begin(), q.states.end(), j.state) == q.states.end())
    return false;
  if (!q.team.empty() && q.team != j.team) return false;
  if (!q.project.empty() && q.project != j.project) return false;
  if (needle.empty()) return true;
  if (needle == std::to_string(j.id)) return true;
  return Lower(j.name).find(needle) != std::string::npos ||
         Lower(j.project).find(needle) != std::string::npos ||
         Lower(j.user).find(needle) != std::string::npos;
}

// The store's column of each JobSort.
constexpr const char* kSortColumn[] = {"id", "submitted_at", "started_at", "finished_at"};

// Whether row (key, id) comes after the cursor in the order of `q`.
bool AfterCursor(const JobQuery& q, int64_t key, int64_t id) {
  if (!q.has_after) return true;
  if (q.sort == JobSort::kId) return id > q.after_id;
  return key < q.after_key || (key == q.after_key && id < q.after_id);
}

}  // namespace

int64_t JobSortKey(const JobRecord& j, JobSort sort) {
  switch (sort) {
    case JobSort::kId:
      return j.id;
    case JobSort::kSubmitted:
      return j.submitted_at;
    case JobSort::kStarted:
      return j.started_at;
    case JobSort::kEnded:
      return j.finished_at;
  }
  return j.id;
}

JobPage JobBook::ListJobs(const Caller& c, const JobQuery& q, const Snapshot& snap) const {
  if (paged()) return ListPaged(c, q, snap);
  JobPage page;
  const std::string needle = Lower(q.search);
  std::vector<std::pair<int64_t, JobPtr>> rows;  // (sort key, job)
  CollectHeld(c, q, needle, /*live_only=*/false, &rows, &page);
  TakePage(q, snap, &rows, &page);
  return page;
}

void JobBook::CollectHeld(const Caller& c, const JobQuery& q, const std::string& needle, bool live_only,
                          std::vector<std::pair<int64_t, JobPtr>>* rows, JobPage* page) const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  for (const auto& [id, s] : jobs_) {
    const JobPtr& j = s.visible;
    if (!j || (live_only && Terminal(j->state)) || !CanSee(c, *j) || !Matches(*j, q, needle)) continue;
    ++page->total;
    const int64_t key = JobSortKey(*j, q.sort);
    if (AfterCursor(q, key, j->id)) rows->push_back({key, j});
  }
}

// The ended jobs come from the store (every visible version is durable), the live ones from memory: a job
// live in memory is shown live even when the store already has its end (its commit is being applied).
JobPage JobBook::ListPaged(const Caller& c, const JobQuery& q, const Snapshot& snap) const {
  JobPage page;
  const std::string needle = Lower(q.search);
  std::vector<std::pair<int64_t, JobPtr>> rows;  // (sort key, job)
  CollectHeld(c, q, needle, /*live_only=*/true, &rows, &page);
  JobRowQuery sq;
  for (JobState s : {JobState::kSucceeded, JobState::kFailed, JobState::kCancelled})
    if (q.states.empty() || std::find(q.states.begin(), q.states.end(), s) != q.states.end())
      sq.states.push_back(JobStateName(s));
  sq.team = q.team;
  if (c.role != Role::kAdmin) {
    if (!q.team.empty() && q.team != c.team) sq.states.clear();  // no ended job of another team
    sq.team = c.team;
  }
  sq.project = q.project;
  sq.search = needle;
  sq.order = kSortColumn[static_cast<int>(q.sort)];
  sq.has_after = q.has_after;
  sq.after_key = q.after_key;
  sq.after_id = q.after_id;
  sq.limit = std::max(q.limit, 0) + 1;
  int64_t stored = 0;
  auto ended = sq.states.empty() ? Result<std::vector<JobRow>>(std::vector<JobRow>{}) : store_->ReadJobs(sq, &stored);
  if (ended.ok()) {
    page.total += stored;
    for (const JobRow& row : *ended) {
      JobPtr held = Visible(row.id);
      if (held && !Terminal(held->state)) {  // live in memory: listed (or not) from there
        --page.total;
        continue;
      }
      JobPtr j = held ? held : page_in_(row);
      if (j) rows.push_back({JobSortKey(*j, q.sort), j});
    }
  }
  TakePage(q, snap, &rows, &page);
  return page;
}

void JobBook::TakePage(const JobQuery& q, const Snapshot& snap, std::vector<std::pair<int64_t, JobPtr>>* rows,
                       JobPage* page) {
  const size_t n = std::min(rows->size(), static_cast<size_t>(std::max(q.limit, 0)));
  auto order = [&](const auto& a, const auto& b) {
    if (q.sort == JobSort::kId) return a.second->id < b.second->id;
    return a.first != b.first ? a.first > b.first : a.second->id > b.second->id;
  };
  std::partial_sort(rows->begin(), rows->begin() + static_cast<std::ptrdiff_t>(n), rows->end(), order);
  page->more = rows->size() > n;
  for (size_t i = 0; i < n; ++i) {
    JobView v{(*rows)[i].second, std::nullopt};
    if (v.job->state == JobState::kPending) {
      auto it = snap.pending.find(v.job->id);
      if (it != snap.pending.end()) v.pending = it->second;
    }
    page->jobs.push_back(std::move(v));
  }
}

}  // namespace tessera
