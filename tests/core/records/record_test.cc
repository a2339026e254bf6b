// The record mechanism itself (core/records/record.h), on small records of its own;
// the formats' tests cover each format's field lists.
#include "core/records/record.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

namespace pilot {
namespace {

enum class Colour { kRed, kGreen };

const std::vector<std::string>& EnumNames(std::type_identity<Colour>) {
  static const std::vector<std::string> k = {"red", "green"};
  return k;
}

std::string NoSpaces(const std::string& v) {
  return v.find(' ') == std::string::npos ? "" : "must not contain spaces";
}

struct Inner {
  int64_t n = 0;
  bool operator==(const Inner&) const = default;
};

struct Outer {
  std::string name;
  Colour colour = Colour::kRed;
  int count = 0;
  double ratio = 0;
  std::string kind = "a";
  std::vector<Inner> items;
  std::map<std::string, double> weights;
  std::optional<Inner> maybe;    // null when unset
  std::optional<int64_t> extra;  // left out when unset
  std::string note = "default";  // may be absent
  bool operator==(const Outer&) const = default;
};

template <class V, class S>
void Fields(V& v, S& s, std::type_identity<Inner>) {
  v("n", s.n);
}

template <class V, class S>
void Fields(V& v, S& s, std::type_identity<Outer>) {
  v("name", s.name, Validate{&NoSpaces}, Doc{"a word"});
  v("colour", s.colour);
  v("count", s.count, IntRange{0, 10});
  v("ratio", s.ratio, NumRange{0, 1});
  v("kind", s.kind, OneOf{{"a", "b"}});
  v("items", s.items);
  v("weights", s.weights);
  v("maybe", s.maybe);
  v("extra", s.extra, kOmitIfUnset);
  v("note", s.note, kMayBeAbsent);
}

Outer Sample() {
  Outer o;
  o.name = "x";
  o.colour = Colour::kGreen;
  o.count = 3;
  o.ratio = 0.5;
  o.kind = "b";
  o.items = {{1}, {2}};
  o.weights = {{"w", 0.25}};
  o.note = "kept";
  return o;
}

std::string ErrorRecord(const nlohmann::json& j, const JsonStyle& style = kPinnedStyle) {
  Outer o;
  return RecordFromJson(j, &o, style).Message();
}

TEST(Record, RoundTripInFieldOrderOrSorted) {
  const Outer o = Sample();
  const auto ordered = RecordToJson<nlohmann::ordered_json>(o);
  EXPECT_EQ(ordered.dump(),
            R"({"name":"x","colour":"green","count":3,"ratio":0.5,"kind":"b","items":[{"n":1},{"n":2}],)"
            R"("weights":{"w":0.25},"maybe":null,"note":"kept"})");
  EXPECT_EQ(RecordToJson(o).begin().key(), "colour");  // nlohmann::json sorts
  Outer back;
  ASSERT_TRUE(RecordFromJson(ordered, &back).ok());
  EXPECT_EQ(back, o);

  Outer with = o;
  with.maybe = Inner{7};
  with.extra = 9;
  const auto j = RecordToJson(with);
  EXPECT_EQ(j["extra"], 9);
  ASSERT_TRUE(RecordFromJson(j, &back).ok());
  EXPECT_EQ(back, with);
}

TEST(Record, AbsentMembers) {
  auto j = RecordToJson(Sample());
  j.erase("note");
  Outer o;
  ASSERT_TRUE(RecordFromJson(j, &o).ok());
  EXPECT_EQ(o.note, "default");
  j = RecordToJson(Sample());
  j.erase("count");
  EXPECT_EQ(ErrorRecord(j), "count: missing");
}

TEST(Record, RefusesWhatTheFieldListDoesNotAllow) {
  const auto good = RecordToJson(Sample());
  auto with = [&](const char* key, const nlohmann::json& value) {
    auto j = good;
    j[key] = value;
    return j;
  };
  EXPECT_EQ(ErrorRecord(with("count", "3")), "count: expected integer, got string");
  EXPECT_EQ(ErrorRecord(with("count", "3"), kMeasuredStyle), "count: expected an integer, got a string");
  EXPECT_EQ(ErrorRecord(with("count", 1.5)), "count: expected integer, got number");
  EXPECT_EQ(ErrorRecord(with("count", 11)), "count: must be between 0 and 10, got 11");
  EXPECT_EQ(ErrorRecord(with("count", int64_t{1} << 40)), "count: integer out of range");
  EXPECT_EQ(ErrorRecord(with("ratio", 2)), "ratio: must be between 0 and 1, got 2");
  EXPECT_EQ(ErrorRecord(with("kind", "c")), "kind: expected one of \"a\", \"b\", got \"c\"");
  EXPECT_EQ(ErrorRecord(with("colour", "blue")), "colour: expected one of \"red\", \"green\", got \"blue\"");
  EXPECT_EQ(ErrorRecord(with("name", "a b")), "name: must not contain spaces");
  EXPECT_EQ(ErrorRecord(with("items", nlohmann::json::array({1}))), "items[0]: expected object, got number");
  EXPECT_EQ(ErrorRecord(with("weights", {{"w", "x"}})), "weights.w: expected number, got string");
  EXPECT_EQ(ErrorRecord(with("other", 1)), "other: unknown field");
  EXPECT_EQ(ErrorRecord(with("other", 1), kMeasuredStyle), "other: unknown key");
  EXPECT_EQ(ErrorRecord(nlohmann::json::array()), "expected object, got array");
  EXPECT_EQ(ErrorRecord(nlohmann::json::array(), kMeasuredStyle),
            "(top level): expected an object, got an array");
  Outer o;
  EXPECT_EQ(RecordFromJson(with("count", "3"), &o).code(), Code::kCorrupt);
  EXPECT_EQ(RecordFromJson(with("count", "3"), &o, kMeasuredStyle).code(), Code::kInvalid);
}

TEST(Record, NonFiniteNumbersOnlyAsStringsInTheMeasuredStyle) {
  Outer o = Sample();
  o.weights["w"] = std::nan("");
  const auto measured = RecordToJson(o, kMeasuredStyle);
  EXPECT_EQ(measured["weights"]["w"], "nan");
  Outer back;
  ASSERT_TRUE(RecordFromJson(measured, &back, kMeasuredStyle).ok());
  EXPECT_TRUE(std::isnan(back.weights["w"]));
  EXPECT_EQ(ErrorRecord(measured), "weights.w: expected number, got string");
}

TEST(Record, KeysInFieldOrderWithTheirHints) {
  const std::vector<RecordKey> keys = RecordKeys<Outer>();
  ASSERT_EQ(keys.size(), 10u);
  EXPECT_EQ(keys[0].name, "name");
  EXPECT_EQ(keys[0].doc, "a word");
  EXPECT_EQ(keys[7].name, "maybe");
  EXPECT_EQ(keys[9].name, "note");
}

}  // namespace
}  // namespace pilot
