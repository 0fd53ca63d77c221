#include "base/json_depth.h"

#include <gtest/gtest.h>

#include <string>

namespace tessera {
namespace {

std::string Nested(int depth) { return std::string(depth, '[') + std::string(depth, ']'); }

TEST(JsonDepth, CountsArraysAndObjectsNotBracketsInStrings) {
  EXPECT_EQ(JsonNestingDepth("1"), 0);
  EXPECT_EQ(JsonNestingDepth(R"({"a":[1,{"b":[]}]})"), 4);
  EXPECT_EQ(JsonNestingDepth(R"({"a":"[[[[{{{{\"[[[["})"), 1);  // inside a string, an escaped quote included
  EXPECT_EQ(JsonNestingDepth(R"([[]][[[]]])"), 3);                 // siblings do not add up
  EXPECT_TRUE(CheckJsonDepth(Nested(kMaxJsonDepth)).ok());
  const Status deep = CheckJsonDepth(Nested(kMaxJsonDepth + 1));
  ASSERT_FALSE(deep.ok());
  EXPECT_NE(deep.message().find("64"), std::string::npos) << deep.message();
}

TEST(JsonDepth, StopsEarlyOnHugeNests) {
  const std::string huge = Nested(200000);
  EXPECT_EQ(JsonNestingDepth(huge, 100), 101);  // it stops past the bound: no full scan needed
  EXPECT_FALSE(CheckJsonDepth(huge).ok());
  EXPECT_EQ(JsonNestingDepth("]]]]{"), 1);      // closing brackets never go below zero
}

}  // namespace
}  // namespace tessera
