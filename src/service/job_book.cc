// The jobs room: versions, visibility, idempotency keys and the read queries (the jobs list is in
// jobs_list.cc).
#include "service/job_book.h"

#include <fmt/format.h>

#include <algorithm>

#include "base/random.h"

namespace tessera {
namespace {

// A 64-bit hash of an idempotency key (user, key), for JobBook's filter of keys held only in the store.
uint64_t KeyHash(const std::pair<std::string, std::string>& k) {
  return std::hash<std::string>{}(k.first + '\0' + k.second);
}

// The view of visible job `j` with its PendingInfo from `snap` when pending.
JobView ViewOf(const JobPtr& j, const Snapshot& snap) {
  JobView v{j, std::nullopt};
  if (j->state == JobState::kPending) {
    auto it = snap.pending.find(j->id);
    if (it != snap.pending.end()) v.pending = it->second;
  }
  return v;
}

}  // namespace

const char* JobStateName(JobState s) {
  switch (s) {
    case JobState::kPending:
      return "Pending";
    case JobState::kRunning:
      return "Running";
    case JobState::kSucceeded:
      return "Succeeded";
    case JobState::kFailed:
      return "Failed";
    case JobState::kCancelled:
      return "Cancelled";
  }
  return "Pending";
}

bool ParseJobState(std::string_view s, JobState* out) {
  for (JobState j : {JobState::kPending, JobState::kRunning, JobState::kSucceeded, JobState::kFailed,
                     JobState::kCancelled})
    if (s == JobStateName(j)) {
      *out = j;
      return true;
    }
  return false;
}

bool JobBook::CanSee(const Caller& c, const JobRecord& j) {
  return c.role == Role::kAdmin || j.team == c.team;
}

bool JobBook::CanChange(const Caller& c, const JobRecord& j) {
  switch (c.role) {
    case Role::kAdmin:
      return true;
    case Role::kTeamLead:
      return j.team == c.team;
    case Role::kMember:
      return j.team == c.team && j.user == c.user;
    case Role::kViewer:
      return false;
  }
  return false;
}

Outcome<std::string> JobBook::SubmitTeam(const Caller& c, const std::string& named) {
  if (c.role == Role::kViewer)
    return ApiError{ErrorCode::kPermissionDenied, "", "a viewer cannot submit jobs"};
  if (c.role == Role::kAdmin) {
    if (named.empty()) return Invalid("team", "field 'team': an admin names the team of the job");
    return named;
  }
  if (!named.empty() && named != c.team)
    return ApiError{ErrorCode::kPermissionDenied, "team", "a job can be submitted to the caller's team only"};
  return c.team;
}

int64_t JobBook::PeekId() const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  return next_id_;
}

void JobBook::TakeId(int64_t id) {
  std::unique_lock<std::shared_mutex> lock(mu_);
  next_id_ = std::max(next_id_, id + 1);
}

JobPtr JobBook::LookupLocked(int64_t id, bool visible) const {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return nullptr;
  return visible ? it->second.visible : it->second.current;
}

void JobBook::Page(Store* store, int64_t retain_ended, std::function<JobPtr(const JobRow&)> page_in,
                   size_t recent_keys) {
  std::unique_lock<std::shared_mutex> lock(mu_);
  if (store == nullptr || retain_ended < 0) return;
  {
    std::lock_guard<std::mutex> keys_lock(idem_mu_);
    recent_keys_ = recent_keys;
  }
  store_ = store;
  retain_ended_ = retain_ended;
  page_in_ = std::move(page_in);
}

void JobBook::EndedLocked(const JobPtr& j) {
  if (!paged()) return;
  ended_.emplace_back(j->finished_at, j->id);
  TrimLocked();
}

void JobBook::TrimLocked() {
  while (static_cast<int64_t>(ended_.size()) > retain_ended_) {
    const int64_t id = ended_.front().second;
    ended_.pop_front();
    auto it = jobs_.find(id);
    if (it != jobs_.end() && it->second.current == it->second.visible && it->second.visible &&
        Terminal(it->second.visible->state))
      jobs_.erase(it);
  }
}

void JobBook::FinishRestore() {
  std::unique_lock<std::shared_mutex> lock(mu_);
  if (!paged()) return;
  std::sort(ended_.begin(), ended_.end());
  TrimLocked();
}

size_t JobBook::InMemory() const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  return jobs_.size();
}

JobPtr JobBook::PageIn(int64_t id) const {
  if (!paged() || id < 1) return nullptr;
  JobRowQuery q;
  q.id = id;
  q.states = {"Succeeded", "Failed", "Cancelled"};
  q.limit = 1;
  auto rows = store_->ReadJobs(q, nullptr);
  if (!rows.ok() || rows->empty()) return nullptr;
  return page_in_(rows->front());
}

JobPtr JobBook::Current(int64_t id) const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  return LookupLocked(id, false);
}

JobPtr JobBook::Visible(int64_t id) const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  return LookupLocked(id, true);
}

void JobBook::ForEachCurrent(const std::function<void(const JobRecord&)>& f) const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  for (const auto& [id, e] : jobs_)
    if (e.current) f(*e.current);
}

std::vector<bool> JobBook::SetCurrent(const std::vector<JobPtr>& next) {
  std::vector<bool> fresh;
  fresh.reserve(next.size());
  std::unique_lock<std::shared_mutex> lock(mu_);
  for (const JobPtr& j : next) {
    Entry& e = jobs_[j->id];
    fresh.push_back(e.current == nullptr);
    SetCurrentLocked(e, j);
  }
  return fresh;
}

std::vector<bool> JobBook::Commit(const std::vector<JobPtr>& next, const std::vector<bool>& fresh, bool ok) {
  std::vector<bool> added(next.size(), false);
  std::unique_lock<std::shared_mutex> lock(mu_);
  for (size_t i = 0; i < next.size(); ++i) {
    const JobPtr& j = next[i];
    auto it = jobs_.find(j->id);
    if (it == jobs_.end()) continue;
    Entry& e = it->second;
    if (ok) {
      if (!e.visible || e.visible->version < j->version) e.visible = j;
      added[i] = fresh[i] && e.current == j;
      if (e.current == j && e.visible == j && Terminal(j->state) && !j->stopping) EndedLocked(j);  // may erase e
    } else if (fresh[i] && e.current == j) {
      SetCurrentLocked(e, nullptr);
      jobs_.erase(it);
    }
  }
  return added;
}

void JobBook::Restore(JobPtr j) {
  std::unique_lock<std::shared_mutex> lock(mu_);
  next_id_ = std::max(next_id_, j->id + 1);
  Entry& e = jobs_[j->id];
  SetCurrentLocked(e, j);
  e.visible = j;
  if (paged() && Terminal(j->state) && !j->stopping) ended_.emplace_back(j->finished_at, j->id);
}

void JobBook::SetCurrentLocked(Entry& e, JobPtr j) {
  auto count = [this](const JobPtr& v, int64_t sign) {
    if (v == nullptr || Terminal(v->state)) return;
    auto& [pending, running] = active_[v->team];
    (v->state == JobState::kPending ? pending : running) += sign;
  };
  count(e.current, -1);
  count(j, 1);
  if (e.current) DigestLocked(*e.current, -1);
  if (j) DigestLocked(*j, 1);
  e.current = std::move(j);
}

void JobBook::DigestLocked(const JobRecord& v, int sign) {
  if (Terminal(v.state) || v.queue < 0) return;
  if (static_cast<size_t>(v.queue) >= queues_.size()) queues_.resize(static_cast<size_t>(v.queue) + 1);
  QueueDigest& q = queues_[static_cast<size_t>(v.queue)];
  const uint64_t digest = SplitMix64Mix(SplitMix64Mix(static_cast<uint64_t>(v.id)) ^ v.version);
  q.signature += sign > 0 ? digest : -digest;
  if (v.state != JobState::kRunning || v.duration_s <= 0 || v.started_at < 0) return;
  int64_t milli = 0;
  for (const TaskPlacement& t : v.placements)
    for (const GpuGrant& g : t.gpus) milli += g.milli;
  const std::pair<int64_t, int64_t> end{v.started_at + v.duration_s, milli};
  if (sign > 0) {
    q.ends.insert(end);
  } else if (auto it = q.ends.find(end); it != q.ends.end()) {
    q.ends.erase(it);
  }
}

void JobBook::QueueDigests(size_t n, std::vector<uint64_t>* signatures,
                           std::vector<std::vector<std::pair<int64_t, int64_t>>>* ends) const {
  signatures->assign(n, 0);
  ends->assign(n, {});
  std::shared_lock<std::shared_mutex> lock(mu_);
  for (size_t i = 0; i < std::min(n, queues_.size()); ++i) {
    (*signatures)[i] = queues_[i].signature;
    (*ends)[i].assign(queues_[i].ends.begin(), queues_[i].ends.end());
  }
}

std::map<std::string, std::pair<int64_t, int64_t>> JobBook::ActiveByTeam() const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  return active_;
}

std::optional<JobBook::IdemEntry> JobBook::FindKey(const IdemKey& key) const {
  std::lock_guard<std::mutex> lock(idem_mu_);
  auto it = idem_.find(key);
  if (it == idem_.end()) return std::nullopt;
  return it->second;
}

void JobBook::PutKey(const IdemKey& key, IdemEntry e) {
  std::lock_guard<std::mutex> lock(idem_mu_);
  idem_[key] = std::move(e);
}

void JobBook::SettleKey(const IdemKey& key, bool ok) {
  std::lock_guard<std::mutex> lock(idem_mu_);
  if (!ok) {
    idem_.erase(key);
    return;
  }
  idem_[key].durable = true;
  if (!paged()) return;
  settled_.push_back(key);
  while (settled_.size() > recent_keys_) {
    stored_hashes_.insert(KeyHash(settled_.front()));
    idem_.erase(settled_.front());  // durable: the store answers for it from now on
    settled_.pop_front();
    ++evicted_;
  }
}

Result<std::optional<JobBook::IdemEntry>> JobBook::StoredKey(const IdemKey& key) const {
  auto row = store_->FindKey(key.first, key.second);
  if (!row.ok()) return row.status();
  if (!row->has_value()) return std::optional<IdemEntry>();
  return std::optional<IdemEntry>(IdemEntry{(*row)->body_hash, (*row)->job_id, true});
}

Result<bool> JobBook::MaybeStoredKey(const IdemKey& key) {
  {
    std::lock_guard<std::mutex> lock(idem_mu_);
    if (hashes_loaded_) return stored_hashes_.count(KeyHash(key)) > 0;
  }
  // The first use: every stored key's hash, in pages, outside idem_mu_ (keys that leave memory meanwhile
  // are added by SettleKey as well).
  constexpr int kPage = 10000;
  std::vector<uint64_t> hashes;
  std::pair<std::string, std::string> after;
  for (;;) {
    auto page = store_->ReadKeyNames(after.first, after.second, kPage);
    if (!page.ok()) return page.status();
    for (const auto& k : *page) hashes.push_back(KeyHash(k));
    if (static_cast<int>(page->size()) < kPage) break;
    after = page->back();
  }
  std::lock_guard<std::mutex> lock(idem_mu_);
  stored_hashes_.insert(hashes.begin(), hashes.end());
  hashes_loaded_ = true;
  return stored_hashes_.count(KeyHash(key)) > 0;
}

uint64_t JobBook::KeysEvicted() const {
  std::lock_guard<std::mutex> lock(idem_mu_);
  return evicted_;
}

size_t JobBook::KeysInMemory() const {
  std::lock_guard<std::mutex> lock(idem_mu_);
  return idem_.size();
}

Outcome<JobView> JobBook::Get(const Caller& c, int64_t id, const Snapshot& snap) const {
  JobPtr j = Visible(id);
  if (!j && Current(id) == nullptr) j = PageIn(id);  // an ended job that left memory
  if (!j || !CanSee(c, *j)) return ApiError{ErrorCode::kNotFound, "", fmt::format("no job {}", id)};
  return ViewOf(j, snap);
}

std::vector<JobView> JobBook::List(const Caller& c, const std::string& state, const std::string& team,
                                   const std::string& project, int64_t after_id, int limit, bool* more,
                                   const Snapshot& snap) const {
  if (paged()) {  // the paged list, in id order
    JobQuery q;
    JobState s;
    if (!state.empty() && !ParseJobState(state, &s)) {
      *more = false;
      return {};
    }
    if (!state.empty()) q.states = {s};
    q.team = team;
    q.project = project;
    q.has_after = after_id > 0;
    q.after_id = after_id;
    q.limit = limit;
    JobPage page = ListPaged(c, q, snap);
    *more = page.more;
    return std::move(page.jobs);
  }
  std::vector<JobView> out;
  *more = false;
  std::shared_lock<std::shared_mutex> lock(mu_);
  for (auto it = jobs_.upper_bound(std::max<int64_t>(after_id, 0)); it != jobs_.end(); ++it) {
    const JobPtr& j = it->second.visible;
    if (!j || !CanSee(c, *j)) continue;
    if (!state.empty() && state != JobStateName(j->state)) continue;
    if (!team.empty() && team != j->team) continue;
    if (!project.empty() && project != j->project) continue;
    if (static_cast<int>(out.size()) == limit) {
      *more = true;
      break;
    }
    out.push_back(ViewOf(j, snap));
  }
  return out;
}

std::vector<QueueEntry> JobBook::Queue(const Caller& c, const Snapshot& snap) const {
  std::vector<QueueEntry> out;
  std::shared_lock<std::shared_mutex> lock(mu_);
  for (const QueueEntry& e : snap.queue) {
    JobPtr j = LookupLocked(e.job->id, true);
    if (!j || j->state != JobState::kPending || !CanSee(c, *j)) continue;
    out.push_back({j, e.info});
  }
  return out;
}

}  // namespace tessera
