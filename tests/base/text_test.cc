#include "base/text.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

TEST(CleanText, RefusesControlsBadUtf8AndBidiFormatting) {
  EXPECT_TRUE(CleanText("résumé-7b ü 日本"));
  EXPECT_FALSE(CleanText("a\nb"));
  EXPECT_FALSE(CleanText("a\tb"));
  EXPECT_TRUE(CleanText("a\tb", /*allow_tab=*/true));
  EXPECT_FALSE(CleanText("\x7f"));
  EXPECT_FALSE(CleanText("\xc2\x85"));      // C1 NEL
  EXPECT_FALSE(CleanText("\xc0\xae"));      // overlong
  EXPECT_FALSE(CleanText("\xed\xa0\x80"));  // surrogate
  EXPECT_FALSE(CleanText("\xe2\x82"));      // cut short
  // Trojan-source characters: RLO, the isolates, RLM, LRM, ALM.
  for (const char* bidi : {"evil\xe2\x80\xaetxt.exe", "\xe2\x81\xa7x\xe2\x81\xa9", "\xe2\x81\xa6", "\xe2\x81\xa8",
                           "a\xe2\x80\x8f", "a\xe2\x80\x8e", "a\xd8\x9c"})
    EXPECT_FALSE(CleanText(bidi)) << bidi;
  EXPECT_TRUE(CleanText("a\xe2\x80\x8d"));  // a zero-width joiner (emoji sequences) is no bidi control
}

}  // namespace
}  // namespace tessera
