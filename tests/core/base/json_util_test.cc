// core/base/json_util.h: every JSON text in through ParseJsonText (one value
// a key, or refused), every one out through DumpJson (any bytes, never a
// throw). Each test names what it proves.
#include "core/base/json_util.h"

#include <gtest/gtest.h>

#include <string>

#include "core/base/utf8.h"

namespace pilot {
namespace {

std::string Error(std::string_view text) {
  Result<Json> j = ParseJsonText(text, "v.json");
  return j.ok() ? "ok" : j.status().ToString();
}

// Proves a key named twice is refused at the top and at any depth, inside
// arrays too, with the key and where it is in the message: a reader that
// keeps the first value and one that keeps the last must never disagree.
TEST(ParseJsonText, RefusesADuplicateKeyAtAnyDepth) {
  EXPECT_EQ(Error(R"({"decision": "NO-GO", "decision": "GO"})"),
            "pilot: v.json: duplicate key \"decision\"");
  EXPECT_EQ(Error(R"({"job": {"id": 1, "user": "a", "id": 2}})"),
            "pilot: v.json: duplicate key \"id\" in \"job\"");
  EXPECT_EQ(Error(R"({"stages": {"single": {"x": {"loss": 1, "loss": 2}}}})"),
            "pilot: v.json: duplicate key \"loss\" in \"stages.single.x\"");
  EXPECT_EQ(Error(R"({"checks": [{"a": 1}, {"status": "pass", "status": "fail"}]})"),
            "pilot: v.json: duplicate key \"status\" in \"checks[1]\"");
  EXPECT_EQ(Error(R"([[], [{"k": 1, "k": 1}]])"), "pilot: v.json: duplicate key \"k\" in \"[1][0]\"");
  EXPECT_EQ(ParseJsonText(R"({"a": 1, "a": 1})", "x").status().code(), Code::kCorrupt);
}

// Proves the same key in different objects, and keys that differ only in
// bytes, are not duplicates, and the value is built as nlohmann's parser
// builds it.
TEST(ParseJsonText, BuildsTheSameValueAsNlohmann) {
  const std::string text =
      R"({"a": {"k": 1}, "b": {"k": [1, 2.5, -3, true, null, "s\u00e9", {"k": {}}]},)"
      R"( "K": 18446744073709551615, "e": [], "\u00e9": "x"})";
  Result<Json> j = ParseJsonText(text, "x");
  ASSERT_TRUE(j.ok()) << j.status().ToString();
  EXPECT_EQ(*j, Json::parse(text));
  EXPECT_EQ(DumpJson(*j), Json::parse(text).dump());
  Result<Json> scalar = ParseJsonText(" 42 ", "x");
  ASSERT_TRUE(scalar.ok());
  EXPECT_EQ(*scalar, Json(42));
}

// Proves syntax errors keep their message (line, column) and a key cut
// from its object, trailing text and invalid UTF-8 are refused.
TEST(ParseJsonText, SyntaxErrorsAsBefore) {
  EXPECT_EQ(Error("{"), "pilot: v.json: not valid JSON: parse error at line 1, column 2: syntax "
                        "error while parsing object key - unexpected end of input; expected "
                        "string literal");
  EXPECT_EQ(Error("{} x").rfind("pilot: v.json: not valid JSON: parse error at line 1, column 4", 0),
            0u);
  EXPECT_EQ(Error("").rfind("pilot: v.json: not valid JSON: ", 0), 0u);
  EXPECT_EQ(Error("\"caf\xE9\"").rfind("pilot: v.json: not valid JSON: ", 0), 0u);
  EXPECT_EQ(ParseJsonText("[1]", "x", 2).status().ToString(), "pilot: x: larger than 2 bytes");
}

// Proves a duplicate key's name is shown inert and cut: a key built to
// repaint a terminal reaches the message spelled out.
TEST(ParseJsonText, ShowsADuplicateKeyInert) {
  const std::string e = Error(R"({"\u001b[2K": 1, "\u001b[2K": 2})");
  EXPECT_EQ(e, "pilot: v.json: duplicate key \"\\x1b[2K\"");
  const std::string long_key(100, 'k');
  EXPECT_EQ(Error("{\"" + long_key + "\": 1, \"" + long_key + "\": 2}"),
            "pilot: v.json: duplicate key \"" + std::string(64, 'k') + "...\"");
}

// Proves a large document (results.json with calibration recordings runs
// to megabytes) parses whole: one object of many keys and a long array.
TEST(ParseJsonText, LargeDocuments) {
  std::string text = "{\"requests\": [";
  for (int i = 0; i < 200000; ++i) text += (i ? "," : "") + std::string("[1,2,3.5,\"free\"]");
  text += "], \"keys\": {";
  for (int i = 0; i < 50000; ++i) text += (i ? ",\"" : "\"") + std::to_string(i) + "\": 1";
  text += "}}";
  Result<Json> j = ParseJsonText(text, "big.json");
  ASSERT_TRUE(j.ok()) << j.status().ToString();
  EXPECT_EQ((*j)["requests"].size(), 200000u);
  EXPECT_EQ((*j)["keys"].size(), 50000u);
  text.insert(text.size() - 2, ",\"49999\": 2");
  EXPECT_EQ(ParseJsonText(text, "big.json").status().ToString(),
            "pilot: big.json: duplicate key \"49999\" in \"keys\"");
}

// Proves DumpJson writes what nlohmann's dump() would for valid text (the
// bytes of every file stay as they were) and never throws on bytes that
// are not UTF-8: a latin-1 byte and a three-byte character cut after two
// bytes become U+FFFD, and the result reads back.
TEST(DumpJson, ValidTextUnchangedInvalidBytesReplaced) {
  Json j = {{"b", "caf\xC3\xA9 \xE2\x82\xAC"}, {"a", {1, 2.5, nullptr}}, {"c", "\x1b[2K\r"}};
  EXPECT_EQ(DumpJson(j), j.dump());
  EXPECT_EQ(DumpJson(j, 2), j.dump(2));
  nlohmann::ordered_json o = {{"z", 1}, {"a", "x"}};
  EXPECT_EQ(DumpJson(o, 2), o.dump(2));

  Json bad = {{"tail", "caf\xE9 100%|\xE2\x96"}};
  EXPECT_THROW(bad.dump(), Json::type_error);  // what the writers did before
  const std::string text = DumpJson(bad, 2);
  EXPECT_TRUE(IsValidUtf8(text));
  Result<Json> back = ParseJsonText(text, "x");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ((*back)["tail"], "caf\xEF\xBF\xBD 100%|\xEF\xBF\xBD");
  nlohmann::ordered_json obad = {{"tail", "\xE9"}};
  EXPECT_EQ(DumpJson(obad), "{\"tail\":\"\xEF\xBF\xBD\"}");
}

}  // namespace
}  // namespace pilot
