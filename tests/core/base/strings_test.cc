// core/base/strings.h's SplitLines: the lines of a text as views into it.
#include "core/base/strings.h"

#include <gtest/gtest.h>

namespace pilot {
namespace {

TEST(SplitLines, EveryLineWithoutItsNewline) {
  using V = std::vector<std::string_view>;
  EXPECT_EQ(SplitLines("a\nbb\n"), V({"a", "bb"}));
  EXPECT_EQ(SplitLines("a\n\nlast"), V({"a", "", "last"}));
  EXPECT_EQ(SplitLines("\n"), V({""}));
  EXPECT_TRUE(SplitLines("").empty());
}

TEST(IsSimpleName, OneToMaxOfLettersDigitsDotUnderscoreDash) {
  EXPECT_TRUE(IsSimpleName("H100-80GB_sxm.5"));
  EXPECT_TRUE(IsSimpleName(std::string(64, 'a')));
  EXPECT_FALSE(IsSimpleName(std::string(65, 'a')));
  EXPECT_TRUE(IsSimpleName(std::string(128, 'a'), 128));
  EXPECT_FALSE(IsSimpleName(""));
  EXPECT_FALSE(IsSimpleName("a b"));
  EXPECT_FALSE(IsSimpleName("a/b"));
}

}  // namespace
}  // namespace pilot
