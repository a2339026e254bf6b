// core/base/utf8.h: the bytes a program writes, made safe to keep and to
// show. Each test names what it proves.
#include "core/base/utf8.h"

#include <gtest/gtest.h>

#include <string>

namespace pilot {
namespace {

const std::string kEuro = "\xE2\x82\xAC";          // U+20AC, three bytes
const std::string kGrin = "\xF0\x9F\x98\x80";      // U+1F600, four bytes
const std::string kBlock = "\xE2\x96\x88";         // U+2588, tqdm's bar
const std::string kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// Proves the validator follows RFC 3629: it takes every length of
// character and refuses overlong forms, surrogates, code points above
// U+10FFFF, stray continuation bytes and cut sequences.
TEST(Utf8, ValidityFollowsRfc3629) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("plain ascii\n"));
  EXPECT_TRUE(IsValidUtf8("caf\xC3\xA9 " + kEuro + kGrin));
  EXPECT_FALSE(IsValidUtf8("caf\xE9"));              // latin-1
  EXPECT_FALSE(IsValidUtf8("\xC0\xAF"));             // overlong '/'
  EXPECT_FALSE(IsValidUtf8("\xE0\x80\xAF"));         // overlong, three bytes
  EXPECT_FALSE(IsValidUtf8("\xED\xA0\x80"));         // a surrogate
  EXPECT_FALSE(IsValidUtf8("\xF4\x90\x80\x80"));     // above U+10FFFF
  EXPECT_FALSE(IsValidUtf8("\x80"));                 // a stray continuation
  EXPECT_FALSE(IsValidUtf8(kEuro.substr(0, 2)));     // cut
  EXPECT_EQ(Utf8SequenceAt(kGrin, 0), 4u);
  EXPECT_EQ(Utf8SequenceAt(kGrin, 1), 0u);
}

// Proves ValidUtf8 keeps valid text byte for byte and replaces each
// ill-formed part with one U+FFFD by Unicode's maximal-subpart rule (a cut
// character is one replacement, a latin-1 byte one, each stray byte one).
TEST(Utf8, ValidUtf8ReplacesIllFormedParts) {
  const std::string fine = "step 7 " + kEuro + kGrin + " \x1b[2K";
  EXPECT_EQ(ValidUtf8(fine), fine);
  EXPECT_EQ(ValidUtf8("caf\xE9!"), "caf" + kReplacement + "!");
  EXPECT_EQ(ValidUtf8(kEuro.substr(0, 2) + "x"), kReplacement + "x");
  EXPECT_EQ(ValidUtf8("\x80\x80"), kReplacement + kReplacement);
  EXPECT_EQ(ValidUtf8("\xF0\x9F\x98"), kReplacement);
  EXPECT_EQ(ValidUtf8("\xED\xA0\x80"), kReplacement + kReplacement + kReplacement);
  for (const std::string& s : {std::string("\xFF\xFE"), kGrin.substr(1), std::string("a\xC3")}) {
    EXPECT_TRUE(IsValidUtf8(ValidUtf8(s))) << s;
  }
}

// Proves a tail never starts inside a character: a progress bar cut at the
// byte limit in the middle of a block character loses that character
// whole, and the result is valid UTF-8 and within the limit.
TEST(Utf8, TailStartsOnACharacterBoundary) {
  std::string bar;
  for (int i = 0; i < 10; ++i) bar += kBlock;  // 30 bytes
  for (size_t max = 0; max <= bar.size() + 1; ++max) {
    const std::string_view tail = Utf8Tail(bar, max);
    EXPECT_LE(tail.size(), max);
    EXPECT_TRUE(IsValidUtf8(tail)) << max;
    EXPECT_EQ(tail.size(), max / 3 * 3) << max;
  }
  EXPECT_EQ(Utf8Tail("abc", 10), "abc");
  // Bytes that were never UTF-8: at most three are skipped, the rest kept.
  EXPECT_EQ(Utf8Tail(std::string(8, '\x80'), 5).size(), 2u);
}

// Proves a head never ends inside a character, and keeps a character
// that ends exactly at the limit.
TEST(Utf8, HeadEndsOnACharacterBoundary) {
  const std::string s = "ab" + kGrin + "cd";  // 8 bytes
  EXPECT_EQ(Utf8Head(s, 2), "ab");
  EXPECT_EQ(Utf8Head(s, 3), "ab");
  EXPECT_EQ(Utf8Head(s, 5), "ab");
  EXPECT_EQ(Utf8Head(s, 6), "ab" + kGrin);
  EXPECT_EQ(Utf8Head(s, 100), s);
  EXPECT_EQ(Utf8Head(s, 0), "");
  EXPECT_EQ(Utf8Head("x\x80\x80\x80\x80y", 3), "x\x80\x80");  // stray bytes split nothing
}

// Proves a writer that sees text in pieces holds back exactly the start of
// a character still open, and nothing that can never become one.
TEST(Utf8, IncompleteSuffix) {
  EXPECT_EQ(Utf8IncompleteSuffix("abc"), 0u);
  EXPECT_EQ(Utf8IncompleteSuffix("a" + kGrin.substr(0, 1)), 1u);
  EXPECT_EQ(Utf8IncompleteSuffix("a" + kGrin.substr(0, 3)), 3u);
  EXPECT_EQ(Utf8IncompleteSuffix("a" + kGrin), 0u);
  EXPECT_EQ(Utf8IncompleteSuffix("a\xC0"), 0u);      // no character starts with C0
  EXPECT_EQ(Utf8IncompleteSuffix("a\xE0\x80"), 0u);  // E0 80 can never be completed
  EXPECT_EQ(Utf8IncompleteSuffix("\x80\x80"), 0u);
}

// Proves VisibleText leaves no byte a terminal acts on: the escape that
// erases a line and the carriage return that rewinds it are spelled out,
// and so are DEL, C1 controls in both forms, bidi overrides and bytes that
// are not UTF-8; printable text outside ASCII is kept.
TEST(Utf8, VisibleTextSpellsOutControls) {
  EXPECT_EQ(VisibleText("restore fail\x1b[2K\rrestore pass"),
            "restore fail\\x1b[2K\\rrestore pass");
  EXPECT_EQ(VisibleText("a\tb\nc\x7f\x01"), "a\\tb\\nc\\x7f\\x01");
  EXPECT_EQ(VisibleText("\xC2\x9B" "31m"), "\\u009b31m");  // CSI as UTF-8
  EXPECT_EQ(VisibleText("\x9B" "31m"), "\\x9b31m");        // CSI as a raw byte
  EXPECT_EQ(VisibleText("abc\xE2\x80\xAE" "cba"), "abc\\u202ecba");
  EXPECT_EQ(VisibleText("caf\xE9"), "caf\\xe9");
  EXPECT_EQ(VisibleText("caf\xC3\xA9 " + kEuro + " \\x"), "caf\xC3\xA9 " + kEuro + " \\x");
  EXPECT_EQ(VisibleText("one\ntwo", Newlines::kKeep), "one\ntwo");
  for (unsigned b = 0; b < 256; ++b) {
    const std::string shown = VisibleText(std::string(1, static_cast<char>(b)));
    for (unsigned char c : shown) {
      EXPECT_TRUE(c >= 0x20 && c < 0x7f) << "byte " << b << " shown as " << shown;
    }
  }
}

// Proves a multi-line tail keeps its line breaks, each later line under the
// first, and each line inert.
TEST(Utf8, VisibleLinesIndentsEveryLine) {
  EXPECT_EQ(VisibleLines("Traceback:\n  File \"x\"\x1b[1A\nKeyError", "    "),
            "Traceback:\n      File \"x\"\\x1b[1A\n    KeyError");
  EXPECT_EQ(VisibleLines("one", "  "), "one");
  EXPECT_EQ(VisibleLines("", "  "), "");
}

// Proves JSON text made visible is still JSON of the same value: DEL, C1
// controls and bidi controls become \u escapes, nothing else changes.
TEST(Utf8, VisibleJsonTextKeepsTheValue) {
  const std::string json = "{\n  \"a\": \"x\x7fy\xC2\x9Bz\xE2\x80\xAE" + kEuro + "\"\n}";
  EXPECT_EQ(VisibleJsonText(json), "{\n  \"a\": \"x\\u007fy\\u009bz\\u202e" + kEuro + "\"\n}");
  EXPECT_EQ(VisibleJsonText("[1, \"plain\"]"), "[1, \"plain\"]");
}

}  // namespace
}  // namespace pilot
