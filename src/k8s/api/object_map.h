#pragma once
// ObjectMap: Kubernetes objects by cache key ("namespace/name"), each held as an immutable shared value. It
// reads like a std::map<std::string, json> (iteration yields {key, object} references, find, count, at), but
// copying one copies pointers, not objects: an informer's snapshot of thousands of pods costs a map of
// pointers, and an object changed later is a new value, never an edit of one a reader holds.
//
// Thread safety: a const ObjectMap may be read from any thread; the values are never changed in place.

#include <cstddef>
#include <iterator>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

namespace tessera {

class ObjectMap {
 public:
  using Ptr = std::shared_ptr<const nlohmann::json>;
  using Base = std::map<std::string, Ptr, std::less<>>;
  using value_type = std::pair<const std::string&, const nlohmann::json&>;

  class const_iterator {
   public:
    using iterator_category = std::bidirectional_iterator_tag;
    using value_type = ObjectMap::value_type;
    using difference_type = std::ptrdiff_t;
    using reference = value_type;
    struct Arrow {  // it->first, it->second
      value_type v;
      const value_type* operator->() const { return &v; }
    };
    using pointer = Arrow;

    const_iterator() = default;
    explicit const_iterator(Base::const_iterator it) : it_(it) {}
    value_type operator*() const { return {it_->first, *it_->second}; }
    Arrow operator->() const { return Arrow{**this}; }
    const_iterator& operator++() { return ++it_, *this; }
    const_iterator operator++(int) {
      const_iterator c = *this;
      ++it_;
      return c;
    }
    const_iterator& operator--() { return --it_, *this; }
    const_iterator operator--(int) {
      const_iterator c = *this;
      --it_;
      return c;
    }
    bool operator==(const const_iterator& o) const { return it_ == o.it_; }
    bool operator!=(const const_iterator& o) const { return it_ != o.it_; }
    // The shared value (kept alive past the map's life by whoever holds it).
    const Ptr& ptr() const { return it_->second; }

   private:
    Base::const_iterator it_;
  };
  using iterator = const_iterator;

  ObjectMap() = default;
  // From plain objects (tests, callers that built their own): each copied once into a shared value.
  ObjectMap(const std::map<std::string, nlohmann::json>& objects) {  // NOLINT: implicit by design
    for (const auto& [k, v] : objects)
      map_.emplace_hint(map_.end(), k, std::make_shared<const nlohmann::json>(v));
  }

  const_iterator begin() const { return const_iterator(map_.begin()); }
  const_iterator end() const { return const_iterator(map_.end()); }
  size_t size() const { return map_.size(); }
  bool empty() const { return map_.empty(); }
  template <typename K>
  const_iterator find(const K& key) const {
    return const_iterator(map_.find(key));
  }
  template <typename K>
  size_t count(const K& key) const {
    return map_.count(key);
  }
  template <typename K>
  bool contains(const K& key) const {
    return map_.find(key) != map_.end();
  }
  // The object under `key`; throws std::out_of_range as std::map::at does.
  template <typename K>
  const nlohmann::json& at(const K& key) const {
    auto it = map_.find(key);
    if (it == map_.end()) throw std::out_of_range("ObjectMap::at");
    return *it->second;
  }
  // The shared value under `key`, or null.
  template <typename K>
  Ptr Get(const K& key) const {
    auto it = map_.find(key);
    return it == map_.end() ? nullptr : it->second;
  }

  void Put(const std::string& key, Ptr value) { map_[key] = std::move(value); }
  void Put(const std::string& key, nlohmann::json value) {
    map_[key] = std::make_shared<const nlohmann::json>(std::move(value));
  }
  size_t Erase(const std::string& key) { return map_.erase(key); }
  void Clear() { map_.clear(); }

  // A plain copy of every object (for code that edits them).
  std::map<std::string, nlohmann::json> ToMap() const {
    std::map<std::string, nlohmann::json> out;
    for (const auto& [k, v] : map_) out.emplace_hint(out.end(), k, *v);
    return out;
  }

 private:
  Base map_;
};

}  // namespace tessera
