#pragma once
// JobBook: the jobs room. It owns each job's versions as the API shows them (the latest, which may not be
// durable yet, and the latest durable one), the job ids and version numbers, the submissions' idempotency
// keys, who may submit, see and change a job, and the read queries (a job by id, the lists, the queue as a
// caller sees it).
//
// Contracts:
//  - A job is visible (by id, in lists and in the queue) only once a version of it is durable: a version is
//    made current before its write (SetCurrent) and visible after the write committed (Commit).
//  - Reads take mu_ shared, and nothing holds it across a store write or a cycle: a GET never waits for
//    the driver.
//  - Retention (Page): with a store, ended jobs (Succeeded, Failed, Cancelled) beyond the `retain_ended`
//    most recently ended leave memory, and every read answers as if they were kept: a job by id, the lists
//    and the replays of their idempotency keys read ended jobs from the store (durable = visible), paged in
//    through `page_in` (which takes the driver's lock; it is never called with mu_ held).
//  - Writes (SetCurrent, Commit, Restore, the ids) come from the driver with the driver's lock held. Lock
//    order: the driver's lock, then mu_; the JobBook calls nothing that takes another lock while holding
//    mu_. The idempotency keys have their own lock (idem_mu_), never held with mu_.
//
// Thread safety: every method may be called from any thread.

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <shared_mutex>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "service/identity.h"
#include "service/job_record.h"
#include "store/store.h"

namespace tessera {

class JobBook {
 public:
  // Who may see a job (an admin, or its team), and change it (an admin, its team's lead, its own user).
  static bool CanSee(const Caller& c, const JobRecord& j);
  static bool CanChange(const Caller& c, const JobRecord& j);
  // The team a submission by `c` goes to (`named`: the team its spec names, may be empty), or why `c` may
  // not submit it (a viewer submits nothing; an admin names the team; others submit to their own team).
  static Outcome<std::string> SubmitTeam(const Caller& c, const std::string& named);

  // Ended jobs beyond `retain_ended` (>= 0) leave memory; reads of ended jobs go to `store` (outlives the
  // book), each row made a record by `page_in`; durable idempotency keys beyond the `recent_keys` most
  // recently settled leave memory too. Before any job is restored or written.
  void Page(Store* store, int64_t retain_ended, std::function<JobPtr(const JobRow&)> page_in,
            size_t recent_keys = kRecentKeys);
  // After Restore: the restored ended jobs beyond the retention leave memory (oldest end first).
  void FinishRestore();
  // Stored ended job `id` as a record (null: not stored, not ended, or no store).
  JobPtr PageIn(int64_t id) const;
  // Jobs held in memory (tests and metrics).
  size_t InMemory() const;

  // A new version number, increasing over all jobs.
  uint64_t NextVersion() { return versions_.fetch_add(1) + 1; }
  // The id the next submission gets, and taking it (REQUIRES: the driver's lock, which orders submissions).
  int64_t PeekId() const;
  void TakeId(int64_t id);

  // The job's latest version (null: unknown), and its latest durable one (null: not visible).
  JobPtr Current(int64_t id) const;
  JobPtr Visible(int64_t id) const;
  // Calls `f` with every job's latest version, in id order, under the shared lock (`f` takes no lock).
  void ForEachCurrent(const std::function<void(const JobRecord&)>& f) const;

  // Makes `next` the latest versions; for each, whether it is its job's first version.
  std::vector<bool> SetCurrent(const std::vector<JobPtr>& next);
  // After the write of `next` (`fresh` as SetCurrent returned): when `ok`, each becomes visible unless a
  // later version already is; else a first version still current is forgotten. Returns, per job, whether
  // it is a first version that became visible and is still the latest.
  std::vector<bool> Commit(const std::vector<JobPtr>& next, const std::vector<bool>& fresh, bool ok);
  // A stored job, current and visible (restore).
  void Restore(JobPtr j);

  // Idempotency keys by (user, key): the body's hash and the job it made, durable once its job is.
  struct IdemEntry {
    std::string body_hash;
    int64_t job_id = 0;
    bool durable = false;
  };
  // With a store (Page), only the recent durable keys stay in memory (those beyond Page's `recent_keys`
  // leave, oldest first): a key not in memory is looked up in the store (StoredKey).
  using IdemKey = std::pair<std::string, std::string>;
  std::optional<IdemEntry> FindKey(const IdemKey& key) const;
  void PutKey(const IdemKey& key, IdemEntry e);
  // After the key's job was written: durable when `ok`, else forgotten (a retry makes a new job).
  void SettleKey(const IdemKey& key, bool ok);
  bool KeysInStore() const { return paged(); }
  // The key as stored (durable), or nullopt. REQUIRES: KeysInStore().
  Result<std::optional<IdemEntry>> StoredKey(const IdemKey& key) const;
  // Whether the key may be in the store while not in memory: a filter of 64-bit hashes of every stored key
  // that is not held here (filled from the store at its first use, then by every key that leaves memory).
  // "No" is exact, so a new key costs no store read; a false "maybe" (a hash collision) costs one.
  // An error: the store could not be scanned (the caller reads the store then).
  Result<bool> MaybeStoredKey(const IdemKey& key);
  // How many durable keys have left memory so far.
  uint64_t KeysEvicted() const;
  static constexpr size_t kRecentKeys = 2048;
  // Keys in memory (tests).
  size_t KeysInMemory() const;

  // The read queries. Pending jobs carry their PendingInfo from `snap` (the latest published snapshot).
  // A visible job `c` may see, or 404.
  Outcome<JobView> Get(const Caller& c, int64_t id, const Snapshot& snap) const;
  // Visible jobs with id > after_id, in id order, at most `limit`; filters empty = any; `more` is set when
  // further jobs match.
  std::vector<JobView> List(const Caller& c, const std::string& state, const std::string& team,
                            const std::string& project, int64_t after_id, int limit, bool* more,
                            const Snapshot& snap) const;
  // One page of the visible jobs matching `q`, in its order (jobs_list.cc).
  JobPage ListJobs(const Caller& c, const JobQuery& q, const Snapshot& snap) const;
  // The snapshot's queue with each job's latest visible version, the pending ones `c` may see.
  std::vector<QueueEntry> Queue(const Caller& c, const Snapshot& snap) const;
  // Per team, its jobs pending and running (latest versions), kept as versions change: a read of a few
  // entries under the shared lock, whatever the number of jobs ever submitted (/metrics).
  std::map<std::string, std::pair<int64_t, int64_t>> ActiveByTeam() const;
  // Per queue 0..n-1 (JobRecord::queue), kept as versions change: a signature of its unfinished jobs'
  // latest versions (it changes when one arrives, ends or gets a new version; 0 for none), and the declared
  // ends of its running jobs that declared a duration, ascending (end, GPU thousandths held). A copy of a
  // few entries per running job instead of a pass over every job in memory.
  void QueueDigests(size_t n, std::vector<uint64_t>* signatures,
                    std::vector<std::vector<std::pair<int64_t, int64_t>>>* ends) const;

 private:
  struct Entry {
    JobPtr current;  // latest version (may not be durable yet)
    JobPtr visible;  // latest durable version
  };
  JobPtr LookupLocked(int64_t id, bool visible) const;
  bool paged() const { return store_ != nullptr; }
  // An ended version became visible: it counts towards the retention; the oldest beyond it leave.
  void EndedLocked(const JobPtr& j);
  void TrimLocked();
  // ListJobs with ended jobs from the store (jobs_list.cc).
  JobPage ListPaged(const Caller& c, const JobQuery& q, const Snapshot& snap) const;
  // The jobs held in memory (`live_only`: not ended) that `c` may see and `q` matches: counted into
  // page->total, those past the cursor added to `rows` with their sort key (jobs_list.cc).
  void CollectHeld(const Caller& c, const JobQuery& q, const std::string& needle, bool live_only,
                   std::vector<std::pair<int64_t, JobPtr>>* rows, JobPage* page) const;
  // The first q.limit of `rows` in the order of `q` into `page` (`more` when rows are left).
  static void TakePage(const JobQuery& q, const Snapshot& snap, std::vector<std::pair<int64_t, JobPtr>>* rows,
                       JobPage* page);
  // Entry `e`'s latest version becomes `j` (may be null): active_ and queues_ follow. REQUIRES: mu_ held
  // exclusively.
  void SetCurrentLocked(Entry& e, JobPtr j);
  struct QueueDigest {
    uint64_t signature = 0;  // sum (mod 2^64) of a hash of (id, version) of its unfinished jobs
    std::multiset<std::pair<int64_t, int64_t>> ends;
  };
  // Adds (sign 1) or removes (-1) version `v`'s part in its queue's digest.
  void DigestLocked(const JobRecord& v, int sign);

  std::atomic<uint64_t> versions_{1};
  mutable std::shared_mutex mu_;  // jobs_ and next_id_
  std::map<int64_t, Entry> jobs_;  // by id: live jobs and the retained ended ones
  std::deque<std::pair<int64_t, int64_t>> ended_;  // (finished_at, id) of ended jobs in memory, oldest first
  Store* store_ = nullptr;
  int64_t retain_ended_ = -1;
  std::function<JobPtr(const JobRow&)> page_in_;
  std::map<std::string, std::pair<int64_t, int64_t>> active_;  // per team: (pending, running) of current
  std::vector<QueueDigest> queues_;                            // by queue index, grown as jobs name one
  int64_t next_id_ = 1;
  mutable std::mutex idem_mu_;
  std::map<IdemKey, IdemEntry> idem_;
  std::deque<IdemKey> settled_;  // with a store: the durable keys in memory, oldest first
  uint64_t evicted_ = 0;
  size_t recent_keys_ = kRecentKeys;
  std::unordered_set<uint64_t> stored_hashes_;  // MaybeStoredKey's filter (idem_mu_)
  bool hashes_loaded_ = false;                  // the store's keys are in it (idem_mu_)
};

}  // namespace tessera
