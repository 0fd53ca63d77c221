#pragma once
// SharedText: an immutable string whose copies share one allocation. A scheduling cycle gives thousands of
// pending jobs the same sentence (why a request of that shape does not fit); copying a SharedText is a
// reference-count increment, not an allocation. Reads see a const std::string; there is no mutation.

#include <fmt/format.h>

#include <memory>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>

namespace tessera {

class SharedText {
 public:
  SharedText() = default;
  SharedText(std::string s)  // NOLINT(google-explicit-constructor): a text is built from a string anywhere
      : p_(s.empty() ? nullptr : std::make_shared<const std::string>(std::move(s))) {}
  SharedText(const char* s) : SharedText(std::string(s)) {}  // NOLINT(google-explicit-constructor)

  const std::string& str() const { return p_ ? *p_ : Empty(); }
  operator const std::string&() const { return str(); }  // NOLINT(google-explicit-constructor)
  bool empty() const { return !p_; }
  size_t size() const { return str().size(); }
  const char* c_str() const { return str().c_str(); }
  size_t find(std::string_view s, size_t pos = 0) const { return str().find(s, pos); }

  friend bool operator==(const SharedText& a, std::string_view b) { return a.str() == b; }
  friend bool operator==(const SharedText& a, const SharedText& b) { return a.str() == b.str(); }
  friend bool operator==(const SharedText& a, const char* b) { return a.str() == b; }
  friend std::ostream& operator<<(std::ostream& os, const SharedText& t) { return os << t.str(); }

 private:
  static const std::string& Empty() {
    static const std::string kEmpty;
    return kEmpty;
  }
  std::shared_ptr<const std::string> p_;
};

}  // namespace tessera

template <>
struct fmt::formatter<tessera::SharedText> : fmt::formatter<std::string_view> {
  template <typename Context>
  auto format(const tessera::SharedText& t, Context& ctx) const {
    return fmt::formatter<std::string_view>::format(t.str(), ctx);
  }
};
