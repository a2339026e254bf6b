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

TEST(FormatBytes, BinaryUnitsDownToTheSmallestAllowed) {
  constexpr double kMiB = 1024.0 * 1024, kGiB = kMiB * 1024;
  EXPECT_EQ(FormatBytes(18.24 * kGiB), "18.2 GiB");
  EXPECT_EQ(FormatBytes(812 * kMiB), "812.0 MiB");
  EXPECT_EQ(FormatBytes(40 * 1024.0, ByteUnit::kKiB, 2), "40 KiB");
  EXPECT_EQ(FormatBytes(-12 * kMiB, ByteUnit::kKiB, 2), "-12.0 MiB");
  EXPECT_EQ(FormatBytes(1.5 * kGiB, ByteUnit::kKiB, 2), "1.50 GiB");
  EXPECT_EQ(FormatBytes(512 * kMiB, ByteUnit::kGiB, 2), "0.50 GiB");
  EXPECT_EQ(FormatGiB(int64_t{53} << 30), "53.0 GiB");
}

TEST(FirstLine, TrimmedFirstLineCutWithDots) {
  EXPECT_EQ(FirstLine("  \nerror: no such file\nsecond line\n"), "error: no such file");
  EXPECT_EQ(FirstLine(""), "");
  EXPECT_EQ(FirstLine(std::string(301, 'x')), std::string(300, 'x') + "...");
  EXPECT_EQ(FirstLine(std::string(300, 'x')), std::string(300, 'x'));
  EXPECT_EQ(FirstLine("abcdef", 3), "abc...");
}

TEST(TailLines, TheLastLinesWithinBytes) {
  EXPECT_EQ(TailLines("a\nb\nc\n", 2), "b\nc");
  EXPECT_EQ(TailLines("a\nb\nc", 1), "c");
  EXPECT_EQ(TailLines("a\nb\nc\n\n\r\n", 1), "c");
  EXPECT_EQ(TailLines("a\nb", 5), "a\nb");
  EXPECT_EQ(TailLines("\nb", 2), "b");
  EXPECT_EQ(TailLines("", 3), "");
  EXPECT_EQ(TailLines("\n\n", 3), "");
  EXPECT_EQ(TailLines("first\n0123456789", 1, 4), "6789");
  EXPECT_EQ(TailLines("x\n" + std::string(10, 'y') + "\nz", 2, 5), "yyy\nz");
  // A cut inside a character drops the whole character.
  EXPECT_EQ(TailLines("x\n\xE2\x96\x88\xE2\x96\x88", 1, 4), "\xE2\x96\x88");
}

}  // namespace
}  // namespace pilot
