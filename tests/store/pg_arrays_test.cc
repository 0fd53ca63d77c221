// PgArrayRows: the array literals of a group's rows, column by column.
#include "store/pg_arrays.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

TEST(PgArrayRows, EachColumnIsOneQuotedLiteralInRowOrder) {
  PgArrayRows rows(3);
  rows.Add({"1", "plain", "t"});
  rows.Add({"-2", "", "f"});
  EXPECT_EQ(rows.rows(), 2u);
  const std::vector<std::string> l = rows.Literals();
  ASSERT_EQ(l.size(), 3u);
  EXPECT_EQ(l[0], R"({"1","-2"})");
  EXPECT_EQ(l[1], R"({"plain",""})");
  EXPECT_EQ(l[2], R"({"t","f"})");
}

TEST(PgArrayRows, QuotesAndBackslashesAreEscapedAndNothingElse) {
  PgArrayRows rows(1);
  rows.Add({R"(say "hi" {a,b} \n NULL)"});
  EXPECT_EQ(rows.Literals()[0], R"({"say \"hi\" {a,b} \\n NULL"})");
}

TEST(PgArrayRows, NoRowsIsAnEmptyArrayAndMissingValuesAreEmpty) {
  PgArrayRows none(2);
  EXPECT_EQ(none.rows(), 0u);
  EXPECT_EQ(none.Literals(), (std::vector<std::string>{"{}", "{}"}));
  PgArrayRows short_row(2);
  short_row.Add({"x"});
  EXPECT_EQ(short_row.Literals()[1], R"({""})");
}

}  // namespace
}  // namespace tessera
