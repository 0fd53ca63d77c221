// SharedText: copies share one allocation; reads behave as the string.
#include "base/shared_text.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tessera {
namespace {

TEST(SharedText, CopiesShareOneString) {
  const SharedText a(std::string(100, 'x'));
  std::vector<SharedText> copies(1000, a);
  for (const SharedText& c : copies) EXPECT_EQ(c.c_str(), a.c_str()) << "a copy allocated its own string";
  EXPECT_EQ(copies.back().size(), 100u);
}

TEST(SharedText, ReadsAsTheString) {
  const SharedText empty;
  EXPECT_TRUE(empty.empty());
  EXPECT_EQ(empty.str(), "");
  EXPECT_TRUE(SharedText(std::string()).empty());
  const SharedText t("no idle MIG instance");
  EXPECT_EQ(t, "no idle MIG instance");
  EXPECT_EQ(t, SharedText(std::string("no idle MIG instance")));
  EXPECT_FALSE(t == "no idle");
  EXPECT_NE(t.find("MIG"), std::string::npos);
  EXPECT_EQ(fmt::format("[{}]", t), "[no idle MIG instance]");
  const std::string& s = t;
  EXPECT_EQ(s, "no idle MIG instance");
}

}  // namespace
}  // namespace tessera
