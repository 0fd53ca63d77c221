// ReadOnlyView (store.h): reads from another store, refuses every write.
#include "store/store.h"

namespace tessera {
namespace {

class ReadOnlyStore final : public Store {
 public:
  ReadOnlyStore(Store* base, std::string why) : base_(base), why_(std::move(why)) {}
  Result<StoredState> Load() override { return base_->Load(); }
  void Write(WriteBatch, Done done) override { done(Status::Error(why_)); }
  void Close() override {}
  int schema_version() const override { return base_->schema_version(); }
  Result<std::vector<AuditRow>> ReadAudit(const AuditQuery& q, bool* more) override {
    return base_->ReadAudit(q, more);
  }

 private:
  Store* base_;
  std::string why_;
};

}  // namespace

std::unique_ptr<Store> ReadOnlyView(Store* base, std::string why) {
  return std::make_unique<ReadOnlyStore>(base, std::move(why));
}

}  // namespace tessera
