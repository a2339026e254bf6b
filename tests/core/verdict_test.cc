#include "core/verdict.h"

#include <gtest/gtest.h>

#include <string>

#include "core/crypto.h"

namespace pilot {
namespace {

Verdict SampleVerdict() {
  Verdict v;
  v.job = {4242, "alice", "gpt-1b", std::string(64, 'a')};
  v.decision = Decision::kGo;
  v.binding = true;
  v.checks = {
      {"shape", CheckStatus::kPass, "seq_len 2048, micro_batch 8", "= run", "ok",
       VerifiedBy::kSelfReported},
      {"restore", CheckStatus::kPass, "step 10->20", "bitwise equal", "équal ✓",
       VerifiedBy::kEpilog},
      {"pinning", CheckStatus::kWarn, "", "", "tag moved", VerifiedBy::kProlog},
  };
  v.hardware = {
      {"H100-80", true, 61000000000, 85520809984, 0.2867, ""},
      {"MI300X-192", true, 61000000000, 205822885888, 0.7036, "needs ROCm qualification"}};
  v.budget.term = "30-day";
  v.budget.days = 19.4;
  v.budget.gpu_hours = 14899.2;
  v.budget.cost = 44697.6;
  v.budget.currency = "USD";
  v.budget.breakdown = {{"train", 16.1}, {"buffer", 2.5}, {"checkpoint", 0.8}};
  v.issued = "2026-11-30T04:05:06Z";
  v.expires = "2026-12-14T04:05:06Z";
  return v;
}

bool Same(const Verdict& a, const Verdict& b) { return VerdictToJson(a) == VerdictToJson(b); }

TEST(Verdict, RoundTrip) {
  Verdict v = SampleVerdict();
  SignVerdict(&v, "secret-key");
  std::string text = VerdictToJson(v);
  auto back = ParseVerdict(text);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(Same(*back, v));
  EXPECT_EQ(back->checks[1].detail, "équal ✓");
  EXPECT_EQ(back->checks, v.checks);
  EXPECT_EQ(back->hardware, v.hardware);
  EXPECT_EQ(back->budget, v.budget);
  EXPECT_EQ(VerdictToJson(*back), text);
  EXPECT_TRUE(VerifyVerdict(*back, "secret-key").ok());
}

TEST(Verdict, EnumNames) {
  EXPECT_STREQ(DecisionName(Decision::kGo), "GO");
  EXPECT_STREQ(DecisionName(Decision::kNoGo), "NO-GO");
  EXPECT_STREQ(CheckStatusName(CheckStatus::kWarn), "warn");
  EXPECT_STREQ(VerifiedByName(VerifiedBy::kSelfReported), "self_reported");
}

TEST(Verdict, CanonicalFormIsSortedCompactWithoutSignature) {
  Verdict v = SampleVerdict();
  SignVerdict(&v, "k");
  std::string c = CanonicalVerdict(v);
  EXPECT_EQ(c.find("signature"), std::string::npos);
  EXPECT_EQ(c.find('\n'), std::string::npos);
  EXPECT_EQ(c.find(": "), std::string::npos);
  EXPECT_EQ(c.rfind("{\"binding\":true,\"budget\":{\"breakdown\":{\"buffer\":2.5,", 0), 0u) << c;
  EXPECT_EQ(v.signature, HmacSha256Hex("k", c));
  EXPECT_EQ(v.key_id, KeyId("k"));
  // The canonical bytes do not depend on how the file was indented.
  auto reparsed = ParseVerdict(DumpJson(VerdictToJsonValue(v), -1));
  ASSERT_TRUE(reparsed.ok());
  EXPECT_EQ(CanonicalVerdict(*reparsed), c);
}

struct TamperCase {
  const char* name;
  std::function<void(Verdict&)> edit;
};

TEST(Verdict, AnyEditBreaksTheSignature) {
  const TamperCase cases[] = {
      {"decision", [](Verdict& v) { v.decision = Decision::kNoGo; }},
      {"check status", [](Verdict& v) { v.checks[2].status = CheckStatus::kPass; }},
      {"expires", [](Verdict& v) { v.expires = "2027-12-14T04:05:06Z"; }},
      {"budget days", [](Verdict& v) { v.budget.days = 19.400001; }},
      {"binding", [](Verdict& v) { v.binding = false; }},
      {"job id", [](Verdict& v) { v.job.id = 4243; }},
      {"drop a check", [](Verdict& v) { v.checks.pop_back(); }},
  };
  for (const auto& c : cases) {
    Verdict v = SampleVerdict();
    SignVerdict(&v, "key");
    ASSERT_TRUE(VerifyVerdict(v, "key").ok());
    c.edit(v);
    Status s = VerifyVerdict(v, "key");
    EXPECT_EQ(s.code(), Code::kPermission) << c.name;
    EXPECT_EQ(s.ToString(), "pilot: verdict for job " + std::to_string(v.job.id) +
                                ": signature mismatch: the verdict was changed after signing")
        << c.name;
  }
}

TEST(Verdict, UnsignedAndWrongKey) {
  Verdict v = SampleVerdict();
  EXPECT_EQ(VerifyVerdict(v, "key").ToString(), "pilot: verdict for job 4242: not signed");
  SignVerdict(&v, "key");
  Status s = VerifyVerdict(v, "other");
  EXPECT_EQ(s.code(), Code::kPermission);
  EXPECT_NE(s.ToString().find("signed with another key"), std::string::npos);
  v.key_id = KeyId("other");  // a forger cannot fix the HMAC by relabelling
  EXPECT_EQ(VerifyVerdict(v, "other").code(), Code::kPermission);
}

TEST(Verdict, StrictParsing) {
  struct Case {
    std::function<void(Json&)> edit;
    std::string message;
  };
  const Case cases[] = {
      {[](Json& j) { j["decision"] = "MAYBE"; },
       "pilot: verdict.json: decision: expected one of \"GO\", \"NO-GO\", got \"MAYBE\""},
      {[](Json& j) { j["checks"][1]["verified_by"] = "user"; },
       "pilot: verdict.json: checks[1].verified_by: expected one of \"epilog\", "
       "\"self_reported\", \"prolog\", \"workload\", \"supervisor\", got \"user\""},
      {[](Json& j) { j["hardware"][0]["headroom"] = "lots"; },
       "pilot: verdict.json: hardware[0].headroom: expected number, got string"},
      {[](Json& j) { j["budget"]["breakdown"]["train"] = "x"; },
       "pilot: verdict.json: budget.breakdown.train: expected number, got string"},
      {[](Json& j) { j.erase("signature"); }, "pilot: verdict.json: signature: missing"},
      {[](Json& j) { j["binding"] = 1; },
       "pilot: verdict.json: binding: expected boolean, got number"},
      {[](Json& j) { j["expires"] = "soon"; },
       "pilot: verdict.json: expires: expected RFC 3339 time"},
  };
  for (const auto& c : cases) {
    Json j = VerdictToJsonValue(SampleVerdict());
    c.edit(j);
    auto r = ParseVerdict(j.dump());
    ASSERT_FALSE(r.ok()) << c.message;
    EXPECT_EQ(r.status().ToString(), c.message);
  }
}

}  // namespace
}  // namespace pilot
