// What the supervisor reads of a program: metrics records, loss lines of
// its standard output, lines out of a pipe (the end of standard error:
// TailLines, tests/core/base/strings_test.cc).
#include "supervisor/program/metrics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <string_view>

#include "supervisor/program/group.h"

namespace pilot::supervisor {
namespace {

TEST(ParseMetricLine, RequiredAndOptionalFields) {
  auto r = ParseMetricLine(
      R"({"step": 3, "loss": 2.5, "rank": 1, "tokens": 8192, "seq_len": 2048, "micro_batch": 4,)"
      R"( "lr": 3e-4, "grad_norm": 1.25, "eval_loss": 2.75, "data_wait_ms": 0.5, "step_ms": 120,)"
      R"( "probe_ms": 0.1, "device": "cuda", "peak_allocated_bytes": 1000, "peak_reserved_bytes": 2000,)"
      R"( "device_free_bytes": 3000, "device_total_bytes": 9000, "alloc_retries": 0, "ooms": 0,)"
      R"( "peak_rss_bytes": 4000, "params": 124, "param_bytes": 496, "grad_bytes": 496,)"
      R"( "optimizer_state_bytes": 992})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->step, 3);
  EXPECT_EQ(r->loss, 2.5);
  EXPECT_EQ(r->rank, 1);
  EXPECT_EQ(r->tokens, 8192);
  EXPECT_EQ(r->seq_len, 2048);
  EXPECT_EQ(r->micro_batch, 4);
  EXPECT_EQ(r->lr, 3e-4);
  EXPECT_EQ(r->grad_norm, 1.25);
  EXPECT_EQ(r->eval_loss, 2.75);
  EXPECT_EQ(r->data_wait_ms, 0.5);
  EXPECT_EQ(r->step_ms, 120);
  EXPECT_EQ(r->probe_ms, 0.1);
  EXPECT_EQ(r->device, "cuda");
  EXPECT_EQ(r->peak_allocated_bytes, 1000);
  EXPECT_EQ(r->peak_reserved_bytes, 2000);
  EXPECT_EQ(r->device_free_bytes, 3000);
  EXPECT_EQ(r->device_total_bytes, 9000);
  EXPECT_EQ(r->alloc_retries, 0);
  EXPECT_EQ(r->ooms, 0);
  EXPECT_EQ(r->peak_rss_bytes, 4000);
  EXPECT_EQ(r->params, 124);
  EXPECT_EQ(r->param_bytes, 496);
  EXPECT_EQ(r->grad_bytes, 496);
  EXPECT_EQ(r->optimizer_state_bytes, 992);

  auto bare = ParseMetricLine(R"({"step": 1, "loss": 7})");
  ASSERT_TRUE(bare.ok());
  EXPECT_FALSE(bare->rank.has_value());
  EXPECT_FALSE(bare->tokens.has_value());
  EXPECT_FALSE(bare->lr.has_value());
  EXPECT_EQ(bare->device, "");
}

// Python's json module writes a diverged loss as a bare token.
TEST(ParseMetricLine, NonFiniteTokens) {
  auto nan = ParseMetricLine(R"({"step": 4, "loss": NaN, "lr": Infinity, "grad_norm": -Infinity})");
  ASSERT_TRUE(nan.ok()) << nan.status().ToString();
  EXPECT_TRUE(std::isnan(nan->loss));
  EXPECT_EQ(nan->lr, INFINITY);
  EXPECT_EQ(nan->grad_norm, -INFINITY);
  auto quoted = ParseMetricLine(R"({"step": 4, "loss": "inf"})");
  ASSERT_TRUE(quoted.ok());
  EXPECT_EQ(quoted->loss, INFINITY);
  // A token inside a string is left alone.
  auto in_string = ParseMetricLine(R"({"step": 4, "loss": 1, "device": "NaN"})");
  ASSERT_TRUE(in_string.ok());
  EXPECT_EQ(in_string->device, "NaN");
}

TEST(ParseMetricLine, AWholeFloatStepIsThatStep) {
  auto r = ParseMetricLine(R"({"step": 7.0, "loss": 2})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->step, 7);
}

TEST(ParseMetricLine, Refusals) {
  auto message = [](const char* line) { return ParseMetricLine(line).status().ToString(); };
  EXPECT_NE(message(R"({"loss": 1})").find("\"step\" is missing"), std::string::npos);
  EXPECT_NE(message(R"({"step": 1})").find("\"loss\" is missing"), std::string::npos);
  EXPECT_NE(message(R"({"step": 0, "loss": 1})").find("integer >= 1"), std::string::npos);
  EXPECT_NE(message(R"({"step": -2, "loss": 1})").find("integer >= 1"), std::string::npos);
  EXPECT_NE(message(R"({"step": 1.5, "loss": 1})").find("integer >= 1"), std::string::npos);
  EXPECT_NE(message(R"({"step": "1", "loss": 1})").find("integer >= 1"), std::string::npos);
  EXPECT_NE(message(R"({"step": 1, "loss": "low"})").find("\"loss\" must be a number"),
            std::string::npos);
  EXPECT_NE(message("[1, 2]").find("not a JSON object"), std::string::npos);
  EXPECT_NE(message("step 1 loss 2").find("not valid JSON"), std::string::npos);
  EXPECT_NE(message("").find("not valid JSON"), std::string::npos);
  // A record naming a key twice has no one meaning: refused, the key named.
  EXPECT_EQ(message(R"({"step": 1, "loss": 9.5, "loss": 0.1})"),
            "pilot: metrics record: duplicate key \"loss\"");
}

// Optional fields of the wrong type are ignored; unknown fields are no
// errors and end up nowhere.
TEST(ParseMetricLine, WrongTypesIgnoredUnknownFieldsKeptOutOfTheWay) {
  auto r = ParseMetricLine(
      R"({"step": 2, "loss": 1.5, "tokens": "many", "seq_len": 2048.0, "micro_batch": 2.5,)"
      R"( "lr": "fast", "device": 7, "params": [1], "my_metric": {"a": 1},)"
      R"( "epoch": 3})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->tokens.has_value());
  EXPECT_EQ(r->seq_len, 2048);  // an integral float is an integer
  EXPECT_FALSE(r->micro_batch.has_value());
  EXPECT_FALSE(r->lr.has_value());
  EXPECT_EQ(r->device, "");
  EXPECT_FALSE(r->params.has_value());
  // The rank alone is never ignored: a record whose rank is not one would
  // otherwise be credited to whichever process wrote it.
  for (const char* bad : {"-1", "1048576", "\"0\"", "1.5"}) {
    auto b = ParseMetricLine(std::string(R"({"step": 2, "loss": 1, "rank": )") + bad + "}");
    EXPECT_FALSE(b.ok()) << bad;
  }
  auto long_device = ParseMetricLine(R"({"step": 2, "loss": 1, "device": "cuda-with-a-very-long-name"})");
  ASSERT_TRUE(long_device.ok());
  EXPECT_EQ(long_device->device.size(), 16u);
}

TEST(MetricFieldNames, RequiredFirstEachOnce) {
  const auto& names = MetricFieldNames();
  ASSERT_GE(names.size(), 2u);
  EXPECT_EQ(names[0], "step");
  EXPECT_EQ(names[1], "loss");
  for (size_t i = 0; i < names.size(); ++i) {
    for (size_t j = i + 1; j < names.size(); ++j) EXPECT_NE(names[i], names[j]);
  }
}

TEST(MatchLoss, TheGroupAsANumber) {
  const LossPattern p(R"(loss[=: ]+(\S+))");
  EXPECT_EQ(MatchLoss(p, "step 3 loss=2.5 lr=1e-3"), 2.5);
  EXPECT_EQ(MatchLoss(p, "loss: 1e-2"), 0.01);
  EXPECT_TRUE(std::isnan(*MatchLoss(p, "loss=NaN")));
  EXPECT_TRUE(std::isnan(*MatchLoss(p, "loss=-nan")));
  EXPECT_EQ(MatchLoss(p, "loss=inf"), INFINITY);
  EXPECT_EQ(MatchLoss(p, "loss=Infinity"), INFINITY);
  EXPECT_FALSE(MatchLoss(p, "loss=2.5,"));  // not all of the group is a number
  EXPECT_FALSE(MatchLoss(p, "loss=low"));
  EXPECT_FALSE(MatchLoss(p, "eval 3.0"));
  EXPECT_FALSE(MatchLoss(p, std::string("loss=2.5\0" "9", 10)));  // a NUL cuts no number short
  EXPECT_FALSE(MatchLoss(LossPattern("loss"), "loss=2"));  // no group
  EXPECT_FALSE(MatchLoss(LossPattern("loss=(\\d+)?x"), "loss=x"));  // group unmatched
  EXPECT_FALSE(MatchLoss(LossPattern("loss=(\\d+"), "loss=2"));  // RE2 refused it
}

// What a program prints on the way (tqdm's bars, latin-1 bytes, cut UTF-8)
// neither stops a match nor is taken into the group.
TEST(MatchLoss, OrdinaryLinesOfATrainingProgram) {
  const LossPattern p("loss[=:] *([0-9.eE+-]+)");
  EXPECT_EQ(MatchLoss(p, "epoch 1 | step 40/100 | loss=3.1416 | lr 3e-4"), 3.1416);
  EXPECT_EQ(MatchLoss(p, "\r 40%|\xe2\x96\x88\xe2\x96 | loss: 2.75e+00 \xe9t\xe9"), 2.75);
  EXPECT_EQ(MatchLoss(LossPattern(R"(^step \d+ (?:train )?loss (\S+)$)"), "step 7 train loss 0.5"), 0.5);
  EXPECT_EQ(MatchLoss(LossPattern(R"((?P<loss>[0-9.]+) nats)"), "at 0.25 nats"), 0.25);
  EXPECT_FALSE(MatchLoss(p, "validation: no loss yet"));
}

// The protocol's lines are shorter than 4096 bytes: a longer line is not
// matched at all, where matching its start could read a number cut short.
TEST(MatchLoss, OnlyLinesShorterThanTheProtocolsLimit) {
  const LossPattern p("loss[=:] *([0-9.eE+-]+)");
  EXPECT_EQ(MatchLoss(p, std::string(kMaxLossLine - 9, 'x') + "loss=2.5"), 2.5);  // 4095 bytes
  EXPECT_FALSE(MatchLoss(p, std::string(kMaxLossLine - 8, 'x') + "loss=2.5"));    // 4096
  EXPECT_FALSE(MatchLoss(p, "loss=2." + std::string(100000, '5')));
  EXPECT_FALSE(MatchLoss(p, "loss:" + std::string(100000, ' ')));
}

// The pattern of the attack (issue: a supervisor at 99% CPU past
// step_timeout): "(?:a|aa)*c" takes a backtracking engine (std::regex)
// exponential time in the a's before it; at 1000 a's it never returned.
// RE2 is linear: 100000 a's take milliseconds. This suite runs under a ctest
// TIMEOUT of a few seconds (tests/supervisor/CMakeLists.txt), so an engine
// that backtracks fails it by time, not by an assertion.
TEST(LossPatternTime, NoBacktrackingOnAHostileLine) {
  const LossPattern p(R"((?:a|aa)*c(\S+))");
  ASSERT_TRUE(p.ok()) << p.Check().ToString();
  const std::string as(100000, 'a');
  EXPECT_FALSE(p.FirstGroup(as));
  EXPECT_EQ(p.FirstGroup(as + "c1.5"), "1.5");  // matched across all of it
  // The longest line MatchLoss reads, all of it the hostile part.
  EXPECT_FALSE(MatchLoss(p, std::string(kMaxLossLine - 1, 'a')));
  EXPECT_EQ(MatchLoss(p, std::string(kMaxLossLine - 5, 'a') + "c1.5"), 1.5);
  // Nested repetition, the other classic.
  const LossPattern nested(R"(^(?:(?:a+)+)+b(\d))");
  ASSERT_TRUE(nested.ok());
  EXPECT_FALSE(nested.FirstGroup(as));
}

void Feed(LineBuffer& b, std::string_view s) { b.Append(s.data(), s.size()); }

TEST(LineBuffer, LinesSplitAcrossAppends) {
  LineBuffer b;
  Feed(b, "{\"st");
  EXPECT_FALSE(b.Next());
  Feed(b, "ep\": 1}\n{\"step\"");
  EXPECT_EQ(b.Next(), "{\"step\": 1}");
  EXPECT_FALSE(b.Next());
  Feed(b, ": 2}\n\n");
  EXPECT_EQ(b.Next(), "{\"step\": 2}");
  EXPECT_EQ(b.Next(), "");
  EXPECT_FALSE(b.Next());
  EXPECT_FALSE(b.Rest());
  EXPECT_EQ(b.overlong(), 0);
}

TEST(LineBuffer, AnOverlongLineIsCutAndCounted) {
  LineBuffer b;
  const std::string longest(kMaxMetricLine, 'x');
  b.Append(longest.data(), longest.size());
  b.Append("\n", 1);
  EXPECT_EQ(b.Next(), longest);  // at the limit: kept
  const std::string over(kMaxMetricLine + 10, 'y');
  b.Append("a\n", 2);
  b.Append(over.data(), 100);
  b.Append(over.data(), over.size() - 100);  // no newline yet: dropped as it comes
  b.Append("zzz\nb\n", 6);
  EXPECT_EQ(b.Next(), "a");
  EXPECT_EQ(b.Next(), "b");  // the overlong line is gone, up to its newline
  EXPECT_FALSE(b.Next());
  EXPECT_EQ(b.overlong(), 1);
  b.Append(over.data(), over.size());  // overlong, and the writer is gone
  EXPECT_FALSE(b.Rest());
  EXPECT_EQ(b.overlong(), 2);
}

// A read of a full pipe (64 KiB of complete lines) after the start of a
// line: every line comes out, none is taken for an overlong one.
TEST(LineBuffer, AFullReadOfShortLinesAfterAPartialOne) {
  LineBuffer b;
  b.Append("{\"step\": 1, ", 12);
  std::string chunk = "\"loss\": 2}\n";
  int64_t lines = 1;
  while (chunk.size() < kMaxMetricLine) {
    chunk += "{\"step\": " + std::to_string(++lines) + ", \"loss\": 2}\n";
  }
  b.Append(chunk.data(), chunk.size());
  int64_t got = 0;
  while (auto l = b.Next()) {
    ++got;
    EXPECT_EQ(l->front(), '{') << *l;
  }
  EXPECT_EQ(got, lines);
  EXPECT_EQ(b.overlong(), 0);
}

TEST(LineBuffer, RestIsTheLastLineWithoutNewline) {
  LineBuffer b;
  b.Append("one\ntwo", 7);
  EXPECT_EQ(b.Next(), "one");
  EXPECT_FALSE(b.Next());
  EXPECT_EQ(b.Rest(), "two");
  EXPECT_FALSE(b.Rest());
  // Many lines: the consumed part is dropped, what is left stays right.
  for (int i = 0; i < 20000; ++i) {
    const std::string l = "line " + std::to_string(i) + "\n";
    b.Append(l.data(), l.size());
    ASSERT_EQ(b.Next(), "line " + std::to_string(i));
  }
  b.Append("end", 3);
  EXPECT_EQ(b.Rest(), "end");
}

}  // namespace
}  // namespace pilot::supervisor
