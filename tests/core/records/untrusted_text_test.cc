// The file formats against a program's bytes: text that is not UTF-8 is
// written (U+FFFD in its place) and reads back, and a document that names a
// key twice is refused by every reader. Each test names what it proves.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "core/base/crypto.h"
#include "core/base/utf8.h"
#include "core/records/lock.h"
#include "core/records/rank_report.h"
#include "core/records/results.h"
#include "core/records/verdict.h"

namespace pilot {
namespace {

using ::testing::HasSubstr;

// A standard error tail as an honest program leaves it: a latin-1 byte, an
// escape sequence, and a tqdm bar cut after two of the three bytes of
// U+2588.
const std::string kTail = "Epoch 1 caf\xE9\n\x1b[2K 42%|\xE2\x96\x88\xE2\x96";
const std::string kTailRead = "Epoch 1 caf\xEF\xBF\xBD\n\x1b[2K 42%|\xE2\x96\x88\xEF\xBF\xBD";

Results ProgramResultsUntrustedText() {
  Results r;
  r.workload = "program";
  r.instance = "i1";
  ProgramInfo p;
  p.command = {"python3", "train.py", "--name=\xE9t\xE9"};
  p.problems = {"metrics record: not valid JSON: last read: '\xE2\x82'"};
  ProgramProcess proc;
  proc.stage = "single";
  proc.process = "reference";
  proc.stderr_tail = kTail;
  p.processes = {proc};
  r.program = p;
  return r;
}

// Proves results.json is written for a program whose stderr tail, argv and
// refused record are not UTF-8 (the supervisor threw here before), that the
// file is valid UTF-8, and that it reads back with U+FFFD in place of each
// ill-formed part and the rest of every text as it was.
TEST(UntrustedText, ResultsWithBytesThatAreNotUtf8RoundTrip) {
  const std::string text = ResultsToJson(ProgramResultsUntrustedText());
  EXPECT_TRUE(IsValidUtf8(text));
  Result<Results> back = ParseResults(text, "results.json");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_TRUE(back->program);
  EXPECT_EQ(back->program->processes.at(0).stderr_tail, kTailRead);
  EXPECT_EQ(back->program->command.at(2), "--name=\xEF\xBF\xBDt\xEF\xBF\xBD");
  EXPECT_EQ(back->program->problems.at(0),
            "metrics record: not valid JSON: last read: '\xEF\xBF\xBD'");
  EXPECT_EQ(ResultsToJson(*back), text);  // the second write is the first
}

// Proves a verdict whose check detail holds a program's bytes is written,
// signed and read back, and its signature still holds: what was signed is
// what the file says.
TEST(UntrustedText, VerdictWithBytesThatAreNotUtf8IsSignedAndReadBack) {
  Verdict v;
  v.job = {42, "alice", "gpt-1b", std::string(64, 'a')};
  v.decision = Decision::kNoGo;
  v.checks = {{"completed", CheckStatus::kFail, "exit 1", "exit 0", kTail, VerifiedBy::kSupervisor}};
  v.issued = "2026-11-30T04:05:06Z";
  v.expires = "2026-12-14T04:05:06Z";
  const std::string seed(kEd25519KeyBytes, '\x07');
  Result<std::string> public_key = Ed25519PublicKeyOf(seed);
  ASSERT_TRUE(public_key.ok());
  ASSERT_TRUE(SignVerdict(&v, "hmac-key", seed).ok());
  const std::string text = VerdictToJson(v);
  EXPECT_TRUE(IsValidUtf8(text));
  Result<Verdict> back = ParseVerdict(text);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->checks.at(0).detail, kTailRead);
  EXPECT_TRUE(VerifyVerdictHmac(*back, "hmac-key").ok());
  EXPECT_TRUE(VerifyVerdictEd25519(*back, *public_key).ok());
  EXPECT_EQ(VerdictToJson(*back), text);
}

// Inserts `member` (text like "\"decision\": \"GO\", ") right after the
// first '{' following `after` in `text`.
std::string WithMember(std::string text, const std::string& after, const std::string& member) {
  const size_t at = text.find('{', after.empty() ? 0 : text.find(after));
  EXPECT_NE(at, std::string::npos);
  text.insert(at + 1, member);
  return text;
}

// Proves a signed verdict with a second "decision" is refused, at the top
// and inside an object: a reader keeping the first value would see GO where
// the signature covers NO-GO.
TEST(UntrustedText, VerdictWithADuplicateKeyIsRefused) {
  Verdict v;
  v.job = {42, "alice", "gpt-1b", std::string(64, 'a')};
  v.issued = "2026-11-30T04:05:06Z";
  v.expires = "2026-12-14T04:05:06Z";
  ASSERT_TRUE(SignVerdict(&v, "hmac-key").ok());
  const std::string text = VerdictToJson(v);
  ASSERT_TRUE(ParseVerdict(text).ok());
  EXPECT_EQ(ParseVerdict(WithMember(text, "", "\"decision\": \"GO\", ")).status().ToString(),
            "pilot: verdict.json: duplicate key \"decision\"");
  EXPECT_EQ(ParseVerdict(WithMember(text, "\"job\"", "\"user\": \"root\", ")).status().ToString(),
            "pilot: verdict.json: duplicate key \"user\" in \"job\"");
}

// Proves results.json and a rank report with a key named twice are
// refused, at the top and nested, with the key named.
TEST(UntrustedText, ResultsAndRankReportWithADuplicateKeyAreRefused) {
  const std::string results = ResultsToJson(ProgramResultsUntrustedText());
  Result<Results> r = ParseResults(WithMember(results, "", "\"instance\": \"i0\", "), "results.json");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().ToString(), "pilot: results.json: duplicate key \"instance\"");
  EXPECT_EQ(r.status().code(), Code::kInvalid);
  r = ParseResults(WithMember(results, "\"processes\"", "\"stage\": \"node\", "), "results.json");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().ToString(),
            "pilot: results.json: duplicate key \"stage\" in \"program.processes[0]\"");

  RankReport rr;
  rr.phase = "train";
  rr.status = "ok";
  const std::string report = RankReportToJson(rr);
  ASSERT_TRUE(ParseRankReport(report, "rank-00000.json").ok());
  EXPECT_THAT(ParseRankReport(WithMember(report, "", "\"status\": \"error\", "), "rank-00000.json")
                  .status()
                  .ToString(),
              HasSubstr("rank-00000.json: duplicate key \"status\""));
}

// Proves lock.json, read by root's prolog, epilog and supervisor, refuses
// a key named twice too (ParseJsonText is its reader).
TEST(UntrustedText, LockWithADuplicateKeyIsRefused) {
  const std::string text = R"({"schema": "slurm-pilot/lock/1", "schema": "slurm-pilot/lock/1"})";
  EXPECT_EQ(ParseLock(text).status().ToString(), "pilot: lock.json: duplicate key \"schema\"");
}

}  // namespace
}  // namespace pilot
