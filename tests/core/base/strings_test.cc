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

}  // namespace
}  // namespace pilot
