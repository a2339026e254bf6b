#include "core/records/verdict.h"

#include <gtest/gtest.h>

#include <string>

#include "core/base/crypto.h"

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

bool SameVerdict(const Verdict& a, const Verdict& b) { return VerdictToJson(a) == VerdictToJson(b); }

TEST(Verdict, RoundTrip) {
  Verdict v = SampleVerdict();
  SignVerdict(&v, "secret-key");
  std::string text = VerdictToJson(v);
  auto back = ParseVerdict(text);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(SameVerdict(*back, v));
  EXPECT_EQ(back->checks[1].detail, "équal ✓");
  EXPECT_EQ(back->checks, v.checks);
  EXPECT_EQ(back->hardware, v.hardware);
  EXPECT_EQ(back->budget, v.budget);
  EXPECT_EQ(VerdictToJson(*back), text);
  EXPECT_TRUE(VerifyVerdictHmac(*back, "secret-key").ok());
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
    ASSERT_TRUE(VerifyVerdictHmac(v, "key").ok());
    c.edit(v);
    Status s = VerifyVerdictHmac(v, "key");
    EXPECT_EQ(s.code(), Code::kPermission) << c.name;
    EXPECT_EQ(s.ToString(), "pilot: verdict for job " + std::to_string(v.job.id) +
                                ": signature mismatch: the verdict was changed after signing")
        << c.name;
  }
}

TEST(Verdict, UnsignedAndWrongKey) {
  Verdict v = SampleVerdict();
  EXPECT_EQ(VerifyVerdictHmac(v, "key").ToString(), "pilot: verdict for job 4242: not signed");
  SignVerdict(&v, "key");
  Status s = VerifyVerdictHmac(v, "other");
  EXPECT_EQ(s.code(), Code::kPermission);
  EXPECT_NE(s.ToString().find("signed with another key"), std::string::npos);
  v.key_id = KeyId("other");  // a forger cannot fix the HMAC by relabelling
  EXPECT_EQ(VerifyVerdictHmac(v, "other").code(), Code::kPermission);
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
       "\"self_reported\", \"prolog\", \"workload\", \"supervisor\", \"workload_compared\", got \"user\""},
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

struct Ed25519Pair {
  std::string seed;
  std::string public_key;
};
Ed25519Pair NewPair() {
  Ed25519Pair p;
  p.seed = RandomBytes(32).value();
  p.public_key = Ed25519PublicKeyOf(p.seed).value();
  return p;
}

TEST(Verdict, BothSignaturesRoundTrip) {
  const Ed25519Pair pair = NewPair();
  Verdict v = SampleVerdict();
  v.instance = "4242-1764475506-node01";
  ASSERT_TRUE(SignVerdict(&v, "hmac-key", pair.seed).ok());
  EXPECT_EQ(v.schema, "slurm-pilot/verdict/2");
  EXPECT_EQ(v.key_id, KeyId("hmac-key"));
  EXPECT_EQ(v.public_key_id, KeyId(pair.public_key));
  EXPECT_EQ(v.signature_ed25519.size(), 128u);
  // Both signatures cover the same bytes, without either signature but
  // with both key ids.
  const std::string c = CanonicalVerdict(v);
  EXPECT_EQ(c.find("\"signature"), std::string::npos) << c;
  EXPECT_NE(c.find("\"public_key_id\":\"" + v.public_key_id + "\""), std::string::npos);
  EXPECT_NE(c.find("\"instance\":\"4242-1764475506-node01\""), std::string::npos);
  EXPECT_EQ(v.signature, HmacSha256Hex("hmac-key", c));
  EXPECT_TRUE(Ed25519Verify(pair.public_key, c, v.signature_ed25519));

  auto back = ParseVerdict(VerdictToJson(v));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(SameVerdict(*back, v));
  EXPECT_EQ(back->instance, v.instance);
  EXPECT_TRUE(VerifyVerdictEd25519(*back, pair.public_key).ok());
  EXPECT_TRUE(VerifyVerdictHmac(*back, "hmac-key").ok());
}

TEST(Verdict, Ed25519OnlyOrHmacOnly) {
  const Ed25519Pair pair = NewPair();
  Verdict v = SampleVerdict();
  ASSERT_TRUE(SignVerdict(&v, "", pair.seed).ok());
  EXPECT_EQ(v.key_id, "");
  EXPECT_EQ(v.signature, "");
  EXPECT_TRUE(VerifyVerdictEd25519(v, pair.public_key).ok());
  EXPECT_EQ(VerifyVerdictHmac(v, "hmac-key").ToString(), "pilot: verdict for job 4242: not signed");
  // Signing again without the pair clears what it set before.
  ASSERT_TRUE(SignVerdict(&v, "hmac-key").ok());
  EXPECT_EQ(v.public_key_id, "");
  EXPECT_EQ(v.signature_ed25519, "");
  EXPECT_TRUE(VerifyVerdictHmac(v, "hmac-key").ok());
  EXPECT_EQ(VerifyVerdictEd25519(v, pair.public_key).ToString(),
            "pilot: verdict for job 4242: no ed25519 signature");
  EXPECT_EQ(SignVerdict(&v, "hmac-key", "short").code(), Code::kInvalid);
  EXPECT_EQ(v.signature, "");
}

TEST(Verdict, AnyEditBreaksTheEd25519Signature) {
  const Ed25519Pair pair = NewPair();
  const TamperCase cases[] = {
      {"decision", [](Verdict& v) { v.decision = Decision::kNoGo; }},
      {"expires", [](Verdict& v) { v.expires = "2027-12-14T04:05:06Z"; }},
      {"instance", [](Verdict& v) { v.instance = "other"; }},
      {"user", [](Verdict& v) { v.job.user = "mallory"; }},
      {"hmac key id", [](Verdict& v) { v.key_id = "0000000000000000"; }},
      {"drop a check", [](Verdict& v) { v.checks.pop_back(); }},
  };
  for (const auto& c : cases) {
    Verdict v = SampleVerdict();
    ASSERT_TRUE(SignVerdict(&v, "", pair.seed).ok());
    ASSERT_TRUE(VerifyVerdictEd25519(v, pair.public_key).ok());
    c.edit(v);
    Status s = VerifyVerdictEd25519(v, pair.public_key);
    EXPECT_EQ(s.code(), Code::kPermission) << c.name;
    EXPECT_EQ(s.ToString(), "pilot: verdict for job " + std::to_string(v.job.id) +
                                ": ed25519 signature mismatch: the verdict was changed after "
                                "signing")
        << c.name;
  }
  // Through the file: one character of the stored text changed.
  Verdict v = SampleVerdict();
  ASSERT_TRUE(SignVerdict(&v, "", pair.seed).ok());
  std::string text = VerdictToJson(v);
  const size_t at = text.find("\"gpt-1b\"");
  ASSERT_NE(at, std::string::npos);
  text[at + 1] = 'G';
  auto edited = ParseVerdict(text);
  ASSERT_TRUE(edited.ok()) << edited.status().ToString();
  EXPECT_EQ(VerifyVerdictEd25519(*edited, pair.public_key).code(), Code::kPermission);
}

TEST(Verdict, Ed25519WrongKey) {
  const Ed25519Pair pair = NewPair(), other = NewPair();
  Verdict v = SampleVerdict();
  ASSERT_TRUE(SignVerdict(&v, "", pair.seed).ok());
  Status s = VerifyVerdictEd25519(v, other.public_key);
  EXPECT_EQ(s.code(), Code::kPermission);
  EXPECT_EQ(s.ToString(), "pilot: verdict for job 4242: ed25519 signature by another key "
                          "(public_key_id " + KeyId(pair.public_key) + ", this key is " +
                              KeyId(other.public_key) + ")");
  // Relabelling the key id does not make another key's signature valid.
  v.public_key_id = KeyId(other.public_key);
  EXPECT_NE(VerifyVerdictEd25519(v, other.public_key).ToString().find("mismatch"),
            std::string::npos);
}

// A verdict of schema /1 as the previous version wrote and signed it: its
// members, its canonical bytes, its HMAC.
TEST(Verdict, SchemaV1IsStillReadAndVerifies) {
  Verdict v = SampleVerdict();
  Json j = VerdictToJsonValue(v);
  for (const char* key : {"instance", "public_key_id", "signature_ed25519"}) j.erase(key);
  j["schema"] = "slurm-pilot/verdict/1";
  j["key_id"] = KeyId("old-key");
  j.erase("signature");
  j["signature"] = HmacSha256Hex("old-key", DumpJson(j, -1));
  const std::string text = DumpJson(j, 2);

  auto back = ParseVerdict(text);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->schema, kVerdictSchemaV1);
  EXPECT_EQ(back->instance, "");
  EXPECT_TRUE(VerifyVerdictHmac(*back, "old-key").ok());
  EXPECT_EQ(VerifyVerdictEd25519(*back, NewPair().public_key).ToString(),
            "pilot: verdict for job 4242: no ed25519 signature");
  // Written back as /1: the same members, byte for byte.
  EXPECT_EQ(VerdictToJson(*back), text + "\n");
  // A /1 verdict has no place for an Ed25519 signature.
  Verdict copy = *back;
  EXPECT_EQ(SignVerdict(&copy, "k", NewPair().seed).ToString(),
            "pilot: verdict for job 4242: schema slurm-pilot/verdict/1 has no Ed25519 signature");

  Json with_v2 = j;
  with_v2["instance"] = "x";
  EXPECT_EQ(ParseVerdict(with_v2.dump()).status().ToString(),
            "pilot: verdict.json: instance: unknown field");
  Json v3 = j;
  v3["schema"] = "slurm-pilot/verdict/3";
  EXPECT_NE(ParseVerdict(v3.dump()).status().ToString().find("unsupported version"),
            std::string::npos);
}

}  // namespace
}  // namespace pilot
