// ReadOnlyView (store.h): reads from another store, refuses every write. As every store's, a write's
// `done` runs on the store's own thread, never inside Write (callers hold locks that `done` may take).
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "store/store.h"

namespace tessera {
namespace {

class ReadOnlyStore final : public Store {
 public:
  ReadOnlyStore(Store* base, std::string why) : base_(base), why_(std::move(why)) {
    refuser_ = std::thread([this] { RefuseLoop(); });
  }
  ~ReadOnlyStore() override { Close(); }
  using Store::Load;
  Result<StoredState> Load(const LoadLimits& limits) override { return base_->Load(limits); }
  Result<std::vector<JobRow>> ReadJobs(const JobRowQuery& q, int64_t* total) override {
    return base_->ReadJobs(q, total);
  }
  Result<UsageReadResult> ReadUsage(const UsageRead& q) override { return base_->ReadUsage(q); }
  Result<std::optional<IdempotencyRow>> FindKey(const std::string& user, const std::string& key) override {
    return base_->FindKey(user, key);
  }
  Result<std::vector<std::pair<std::string, std::string>>> ReadKeyNames(const std::string& after_user,
                                                                        const std::string& after_key,
                                                                        int limit) override {
    return base_->ReadKeyNames(after_user, after_key, limit);
  }
  void Write(WriteBatch, Done done) override {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(done));
    cv_.notify_one();
  }
  void Close() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (closed_) return;
      closed_ = true;
      cv_.notify_one();
    }
    refuser_.join();
  }
  int schema_version() const override { return base_->schema_version(); }
  Result<std::vector<AuditRow>> ReadAudit(const AuditQuery& q, bool* more) override {
    return base_->ReadAudit(q, more);
  }

 private:
  // Answers every queued write with the refusal, until closed and drained.
  void RefuseLoop() {
    for (;;) {
      std::deque<Done> batch;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return closed_ || !queue_.empty(); });
        if (queue_.empty()) return;
        batch.swap(queue_);
      }
      for (Done& d : batch) d(Status::Error(why_));
    }
  }

  Store* base_;
  std::string why_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Done> queue_;
  bool closed_ = false;
  std::thread refuser_;
};

}  // namespace

std::unique_ptr<Store> ReadOnlyView(Store* base, std::string why) {
  return std::make_unique<ReadOnlyStore>(base, std::move(why));
}

}  // namespace tessera
