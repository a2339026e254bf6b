// The grant record: what `pilot grant` writes, its signature, and what a
// long job's check reads back (core/decide/grant.h).
#include <gtest/gtest.h>

#include <string>

#include "core/base/crypto.h"
#include "core/decide/grant.h"
#include "core/records/verdict.h"

namespace pilot {
namespace {

std::string Record(const std::optional<LockIdentity>& identity) {
  Verdict v;
  v.job.id = 42;
  v.job.user = "alice";
  v.budget.term = "30-day";
  v.identity = identity;
  GrantRequest r;
  r.job_id = 42;
  r.nodes = 2;
  r.duration_minutes = 14400;
  return GrantRecordJson(v, r, "root", 1'800'000'000);
}

TEST(GrantRecord, ReadsBackTheBoundsAndTheIdentity) {
  LockIdentity id;
  id.sha256 = std::string(64, 'e');
  id.lines = {"config sha256:" + std::string(64, '1'), "nodes 1"};
  Result<GrantRecord> g = ParseGrantRecord(Record(id), "g.json");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->job_id, 42);
  EXPECT_EQ(g->user, "alice");
  EXPECT_EQ(g->nodes, 2);
  EXPECT_EQ(g->duration_minutes, 14400);
  ASSERT_TRUE(g->identity.has_value());
  EXPECT_EQ(g->identity->lines, id.lines);
  Result<GrantRecord> none = ParseGrantRecord(Record(std::nullopt), "g.json");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->identity.has_value());
  EXPECT_FALSE(
      ParseGrantRecord("{\"schema\": \"slurm-pilot/grant/1\", \"job_id\": \"42\"}", "g.json").ok());
  EXPECT_FALSE(ParseGrantRecord("[]", "g.json").ok());
}

TEST(GrantRecord, TheSignatureCoversEveryMember) {
  Result<std::string> priv = RandomBytes(kEd25519KeyBytes);
  Result<std::string> other_priv = RandomBytes(kEd25519KeyBytes);
  ASSERT_TRUE(priv.ok() && other_priv.ok());
  Result<Ed25519KeyFiles> site = Ed25519KeyFilesOf(*priv);
  Result<Ed25519KeyFiles> other = Ed25519KeyFilesOf(*other_priv);
  ASSERT_TRUE(site.ok() && other.ok());
  const std::string text = Record(std::nullopt);
  EXPECT_EQ(VerifyGrantRecord(text, site->public_key).code(), Code::kPermission) << "unsigned";
  Result<std::string> signed_text = SignGrantRecord(text, *priv);
  ASSERT_TRUE(signed_text.ok()) << signed_text.status().ToString();
  EXPECT_TRUE(VerifyGrantRecord(*signed_text, site->public_key).ok());
  EXPECT_TRUE(ParseGrantRecord(*signed_text, "g.json").ok()) << "a signed record still reads";
  std::string edited = *signed_text;
  edited.replace(edited.find("\"nodes\": 2"), 10, "\"nodes\": 3");
  Status bad = VerifyGrantRecord(edited, site->public_key);
  EXPECT_NE(bad.Message().find("signature mismatch"), std::string::npos) << bad.ToString();
  EXPECT_NE(VerifyGrantRecord(*signed_text, other->public_key).Message().find("signed by key"),
            std::string::npos);
}

}  // namespace
}  // namespace pilot
