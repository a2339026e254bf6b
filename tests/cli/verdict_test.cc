// `pilot verdict`, `pilot verify-verdict`, `pilot keygen` and `pilot list`
// against a temporary store: Ed25519 signatures anyone can check, the
// verdict history, the key files.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "core/base/crypto.h"
#include "core/base/json_util.h"
#include "core/records/verdict.h"

namespace pilot {
namespace {

namespace fs = std::filesystem;

struct RanVerdict {
  int rc = -1;
  std::string out;
  std::string err;
};

std::string SlurpVerdict(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

void WriteVerdict(const std::string& path, const std::string& text, mode_t mode = 0644) {
  std::ofstream(path) << text;
  chmod(path.c_str(), mode);
}

mode_t Mode(const std::string& path) {
  struct stat sb {};
  return stat(path.c_str(), &sb) == 0 ? (sb.st_mode & 07777) : 0;
}

class VerdictCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/pilot-verdict-test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    fs::create_directories(dir_ + "/state/verdicts");
    fs::create_directories(dir_ + "/keys");
    WriteVerdict(dir_ + "/keys/hmac.key", NewKeyFileContents().value(), 0600);
    hmac_ = ReadKeyFile(dir_ + "/keys/hmac.key").value();
    Result<Ed25519KeyFiles> pair = NewEd25519KeyFiles();
    ASSERT_TRUE(pair.ok()) << pair.status().ToString();
    WriteVerdict(dir_ + "/keys/ed.key", pair->private_pem, 0600);
    WriteVerdict(dir_ + "/keys/ed.pub", pair->public_pem, 0644);
    seed_ = ReadEd25519PrivateKeyFile(dir_ + "/keys/ed.key").value();
    key_id_ = KeyId(pair->public_key);
    WriteVerdict(dir_ + "/pilot.conf", "state_dir = \"" + dir_ + "/state\"\nkey_file = \"" + dir_ +
                                    "/keys/hmac.key\"\nsigning_key_file = \"" + dir_ +
                                    "/keys/ed.key\"\npublic_key_file = \"" + dir_ +
                                    "/keys/ed.pub\"\n");
  }
  void TearDown() override { fs::remove_all(dir_); }

  RanVerdict Pilot(const std::string& args) {
    RanVerdict r;
    const std::string out = dir_ + "/out", err = dir_ + "/err";
    std::string cmd = std::string(PILOT_BINARY) + " " + args + " >" + out + " 2>" + err;
    const int st = std::system(cmd.c_str());
    r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    r.out = SlurpVerdict(out);
    r.err = SlurpVerdict(err);
    return r;
  }
  RanVerdict WithPolicy(const std::string& command, const std::string& args) {
    return Pilot(command + " --policy " + dir_ + "/pilot.conf " + args);
  }

  static Verdict Sample(int64_t id, const std::string& issued, const std::string& instance) {
    Verdict v;
    v.job = {id, "alice", "gpt-1b", std::string(64, 'a')};
    v.instance = instance;
    v.decision = Decision::kGo;
    v.binding = true;
    v.checks = {{"restore", CheckStatus::kPass, "equal", "equal", "", VerifiedBy::kSupervisor},
                {"ckpt", CheckStatus::kPass, "ok", "ok", "", VerifiedBy::kEpilog},
                {"steps", CheckStatus::kPass, "12", ">= 10", "", VerifiedBy::kWorkload},
                {"losses", CheckStatus::kPass, "same", "same", "", VerifiedBy::kWorkloadCompared}};
    v.budget.term = "30-day";
    v.issued = issued;
    v.expires = "2099-12-14T04:05:06Z";
    return v;
  }
  // Signs with the Ed25519 pair only (the key every user can check).
  std::string Signed(Verdict v) {
    EXPECT_TRUE(SignVerdict(&v, "", seed_).ok());
    return VerdictToJson(v);
  }
  std::string File(const std::string& name, const std::string& text) {
    WriteVerdict(dir_ + "/" + name, text);
    return dir_ + "/" + name;
  }

  std::string dir_;
  std::string hmac_;
  std::string seed_;
  std::string key_id_;
};

TEST_F(VerdictCliTest, VerifyVerdictExitCodes) {
  const Verdict v = Sample(42, "2026-11-30T04:05:06Z", "i1");
  const std::string good = File("good.json", Signed(v));
  RanVerdict r = WithPolicy("verify-verdict", good);
  EXPECT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("signature  valid (ed25519, key " + key_id_ + ")"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("decision   GO\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("job        42  alice  gpt-1b\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("expires    2099-12-14T04:05:06Z\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("key        " + key_id_), std::string::npos) << r.out;
  // --public-key needs no policy at all.
  EXPECT_EQ(Pilot("verify-verdict --policy /nonexistent --public-key " + dir_ + "/keys/ed.pub " +
                  good)
                .rc,
            0);

  std::string text = Signed(v);
  const size_t at = text.find("\"GO\"");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 4, "\"NO-GO\"");
  RanVerdict tampered = WithPolicy("verify-verdict", File("tampered.json", text));
  EXPECT_EQ(tampered.rc, 1) << tampered.out;
  EXPECT_NE(tampered.out.find("signature  INVALID (ed25519): ed25519 signature mismatch"),
            std::string::npos)
      << tampered.out;

  RanVerdict unsigned_ = WithPolicy("verify-verdict", File("unsigned.json", VerdictToJson(v)));
  EXPECT_EQ(unsigned_.rc, 1) << unsigned_.out;
  EXPECT_NE(unsigned_.out.find("signature  unsigned (ed25519): no ed25519 signature"),
            std::string::npos)
      << unsigned_.out;
  EXPECT_NE(unsigned_.out.find("key        (none)"), std::string::npos) << unsigned_.out;

  // Signed by another pair: the installed key does not know it.
  Result<Ed25519KeyFiles> other = NewEd25519KeyFiles();
  ASSERT_TRUE(other.ok());
  WriteVerdict(dir_ + "/other.pub", other->public_pem);
  RanVerdict foreign = Pilot("verify-verdict --public-key " + dir_ + "/other.pub " + good);
  EXPECT_EQ(foreign.rc, 1);
  EXPECT_NE(foreign.out.find("by another key"), std::string::npos) << foreign.out;

  // Usage and unreadable input.
  EXPECT_EQ(WithPolicy("verify-verdict", "").rc, 2);
  EXPECT_EQ(WithPolicy("verify-verdict", dir_ + "/missing.json").rc, 2);
  EXPECT_EQ(WithPolicy("verify-verdict", dir_).rc, 2);  // a directory
  EXPECT_EQ(WithPolicy("verify-verdict", File("junk.json", "{")).rc, 2);
  WriteVerdict(dir_ + "/big.json", std::string(kMaxVerdictBytes + 1, ' '));
  RanVerdict big = WithPolicy("verify-verdict", dir_ + "/big.json");
  EXPECT_EQ(big.rc, 2);
  EXPECT_NE(big.err.find("larger than"), std::string::npos) << big.err;
  ASSERT_EQ(mkfifo((dir_ + "/fifo").c_str(), 0600), 0);
  EXPECT_EQ(WithPolicy("verify-verdict", dir_ + "/fifo").rc, 2);  // does not hang
  EXPECT_EQ(Pilot("verify-verdict --public-key " + dir_ + "/nope.pub " + good).rc, 2);
}

TEST_F(VerdictCliTest, VerifyVerdictReadsSchemaV1) {
  Verdict v = Sample(7, "2026-11-30T04:05:06Z", "");
  v.schema = kVerdictSchemaV1;
  ASSERT_TRUE(SignVerdict(&v, hmac_).ok());
  RanVerdict r = WithPolicy("verify-verdict", File("v1.json", VerdictToJson(v)));
  EXPECT_EQ(r.rc, 1) << r.out << r.err;  // read, but it has no Ed25519 signature
  EXPECT_NE(r.out.find("schema     slurm-pilot/verdict/1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("signature  unsigned"), std::string::npos) << r.out;
  // pilot verdict still checks its HMAC.
  WriteVerdict(dir_ + "/state/verdicts/7.json", VerdictToJson(v));
  RanVerdict shown = WithPolicy("verdict", "7");
  EXPECT_EQ(shown.rc, 0) << shown.out << shown.err;
  EXPECT_NE(shown.out.find("(signature valid, expires"), std::string::npos) << shown.out;
  EXPECT_NE(shown.out.find("  hmac       valid (hmac-sha256, key " + v.key_id + ")"),
            std::string::npos)
      << shown.out;
}

TEST_F(VerdictCliTest, VerdictShowsTheEd25519Check) {
  WriteVerdict(dir_ + "/state/verdicts/42.json", Signed(Sample(42, "2026-11-30T04:05:06Z", "i1")));
  RanVerdict r = WithPolicy("verdict", "42");
  EXPECT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("GO  (signature valid, expires"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  signature  valid (ed25519, key " + key_id_ + ")\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("  hmac       unsigned\n"), std::string::npos) << r.out;
  // Each check says who established it.
  EXPECT_NE(r.out.find("(need equal)  (seen by supervisor)\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(need ok)  (verified by epilog)\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(need >= 10)  (workload's figure)\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(need same)  (workload's figures, compared by supervisor)\n"), std::string::npos)
      << r.out;
  RanVerdict j = WithPolicy("verdict", "--json 42");
  ASSERT_EQ(j.rc, 0) << j.err;
  Json parsed = Json::parse(j.out);
  EXPECT_EQ(parsed["signature_check"]["ed25519"], "valid");
  EXPECT_EQ(parsed["signature_check"]["hmac"], "unsigned");
  EXPECT_EQ(parsed["signature_check"]["file"], dir_ + "/state/verdicts/42.json");
  EXPECT_EQ(parsed["public_key_id"], key_id_);
  EXPECT_EQ(parsed["instance"], "i1");

  // Edited after signing: INVALID, exit 1, in the table and in --json.
  std::string text = SlurpVerdict(dir_ + "/state/verdicts/42.json");
  text.replace(text.find("\"alice\""), 7, "\"bobby\"");
  WriteVerdict(dir_ + "/state/verdicts/42.json", text);
  RanVerdict bad = WithPolicy("verdict", "42");
  EXPECT_EQ(bad.rc, 1);
  EXPECT_NE(bad.out.find("  signature  INVALID (ed25519, key " + key_id_ +
                         "): ed25519 signature mismatch"),
            std::string::npos)
      << bad.out;
  EXPECT_NE(bad.err.find("signature INVALID"), std::string::npos) << bad.err;
  RanVerdict badj = WithPolicy("verdict", "--json 42");
  EXPECT_EQ(badj.rc, 1);
  EXPECT_EQ(Json::parse(badj.out)["signature_check"]["ed25519"], "invalid");

  // Without the public key the signature cannot be checked; that is said.
  fs::remove(dir_ + "/keys/ed.pub");
  RanVerdict nokey = WithPolicy("verdict", "--json 42");
  EXPECT_EQ(Json::parse(nokey.out)["signature_check"]["ed25519"], "unchecked") << nokey.out;
}

TEST_F(VerdictCliTest, AllShowsTheHistoryOldestFirstThenTheLatest) {
  fs::create_directories(dir_ + "/state/verdicts/history");
  // File names sort otherwise than the issue times.
  WriteVerdict(dir_ + "/state/verdicts/history/42-b.json",
        Signed(Sample(42, "2026-11-29T00:00:00Z", "b")));
  WriteVerdict(dir_ + "/state/verdicts/history/42-a.json",
        Signed(Sample(42, "2026-11-30T00:00:00Z", "a")));
  WriteVerdict(dir_ + "/state/verdicts/history/420-x.json",
        Signed(Sample(420, "2026-11-28T00:00:00Z", "x")));  // another job
  WriteVerdict(dir_ + "/state/verdicts/42.json", Signed(Sample(42, "2026-12-01T00:00:00Z", "c")));

  RanVerdict latest = WithPolicy("verdict", "42");
  ASSERT_EQ(latest.rc, 0) << latest.err;
  EXPECT_EQ(latest.out.find("instance b"), std::string::npos);
  EXPECT_NE(latest.out.find("instance c"), std::string::npos) << latest.out;

  RanVerdict all = WithPolicy("verdict", "--all 42");
  ASSERT_EQ(all.rc, 0) << all.out << all.err;
  const size_t b = all.out.find("issued 2026-11-29T00:00:00Z  instance b");
  const size_t a = all.out.find("issued 2026-11-30T00:00:00Z  instance a");
  const size_t c = all.out.find("issued 2026-12-01T00:00:00Z  instance c  " + dir_ +
                                "/state/verdicts/42.json");
  ASSERT_NE(b, std::string::npos) << all.out;
  ASSERT_NE(a, std::string::npos) << all.out;
  ASSERT_NE(c, std::string::npos) << all.out;
  EXPECT_LT(b, a);
  EXPECT_LT(a, c);
  EXPECT_EQ(all.out.find("instance x"), std::string::npos) << all.out;

  RanVerdict js = WithPolicy("verdict", "--all --json 42");
  ASSERT_EQ(js.rc, 0) << js.err;
  Json arr = Json::parse(js.out);
  ASSERT_TRUE(arr.is_array());
  ASSERT_EQ(arr.size(), 3u);
  EXPECT_EQ(arr[0]["instance"], "b");
  EXPECT_EQ(arr[1]["instance"], "a");
  EXPECT_EQ(arr[2]["instance"], "c");
  EXPECT_EQ(arr[1]["signature_check"]["file"], dir_ + "/state/verdicts/history/42-a.json");
  for (const Json& e : arr) EXPECT_EQ(e["signature_check"]["ed25519"], "valid");

  // A tampered history entry makes --all exit 1, the latest alone still 0.
  std::string text = SlurpVerdict(dir_ + "/state/verdicts/history/42-a.json");
  text.replace(text.find("\"GO\""), 4, "\"NO-GO\"");
  WriteVerdict(dir_ + "/state/verdicts/history/42-a.json", text);
  EXPECT_EQ(WithPolicy("verdict", "--all 42").rc, 1);
  EXPECT_EQ(WithPolicy("verdict", "42").rc, 0);

  // pilot list lists jobs, not history files.
  RanVerdict list = WithPolicy("list", "--all");
  ASSERT_EQ(list.rc, 0) << list.err;
  size_t lines = 0;
  for (char ch : list.out) lines += ch == '\n';
  EXPECT_EQ(lines, 2u) << list.out;  // the header and job 42
  EXPECT_EQ(list.out.find("420"), std::string::npos) << list.out;
  EXPECT_EQ(list.err, "") << list.err;
}

TEST_F(VerdictCliTest, KeygenCreatesThePair) {
  fs::remove_all(dir_ + "/keys");
  RanVerdict r = WithPolicy("keygen", "");
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_EQ(Mode(dir_ + "/keys/hmac.key"), 0600u);
  EXPECT_EQ(Mode(dir_ + "/keys/ed.key"), 0600u);
  EXPECT_EQ(Mode(dir_ + "/keys/ed.pub"), 0644u);
  Result<std::string> seed = ReadEd25519PrivateKeyFile(dir_ + "/keys/ed.key");
  Result<std::string> pub = ReadEd25519PublicKeyFile(dir_ + "/keys/ed.pub");
  ASSERT_TRUE(seed.ok() && pub.ok());
  EXPECT_EQ(Ed25519PublicKeyOf(*seed).value(), *pub);
  EXPECT_NE(r.out.find("wrote " + dir_ + "/keys/ed.pub (ed25519 public key, key id " +
                       KeyId(*pub) + ")"),
            std::string::npos)
      << r.out;
  const std::string private_pem = SlurpVerdict(dir_ + "/keys/ed.key");

  // Everything exists: refused without --force, nothing changes.
  RanVerdict again = WithPolicy("keygen", "");
  EXPECT_EQ(again.rc, 1);
  EXPECT_NE(again.err.find("the keys exist already"), std::string::npos) << again.err;
  EXPECT_EQ(SlurpVerdict(dir_ + "/keys/ed.key"), private_pem);
  // --if-missing (a package's upgrade): success, nothing changes.
  const std::string hmac = SlurpVerdict(dir_ + "/keys/hmac.key");
  RanVerdict kept = WithPolicy("keygen", "--if-missing");
  EXPECT_EQ(kept.rc, 0) << kept.err;
  EXPECT_NE(kept.out.find("kept " + dir_ + "/keys/hmac.key"), std::string::npos) << kept.out;
  EXPECT_EQ(SlurpVerdict(dir_ + "/keys/ed.key"), private_pem);
  EXPECT_EQ(SlurpVerdict(dir_ + "/keys/hmac.key"), hmac);
  EXPECT_EQ(WithPolicy("keygen", "--if-missing --force").rc, 2);

  // A lost public key is written again from the private one, which is kept.
  fs::remove(dir_ + "/keys/ed.pub");
  RanVerdict repair = WithPolicy("keygen", "");
  ASSERT_EQ(repair.rc, 0) << repair.err;
  EXPECT_EQ(ReadEd25519PublicKeyFile(dir_ + "/keys/ed.pub").value(), *pub);
  EXPECT_EQ(SlurpVerdict(dir_ + "/keys/ed.key"), private_pem);

  // --if-missing makes a missing key and keeps the others.
  fs::remove(dir_ + "/keys/hmac.key");
  RanVerdict made = WithPolicy("keygen", "--if-missing");
  ASSERT_EQ(made.rc, 0) << made.err;
  EXPECT_EQ(Mode(dir_ + "/keys/hmac.key"), 0600u);
  EXPECT_NE(SlurpVerdict(dir_ + "/keys/hmac.key"), hmac);
  EXPECT_EQ(SlurpVerdict(dir_ + "/keys/ed.key"), private_pem);

  // --force replaces both pairs' keys.
  RanVerdict forced = WithPolicy("keygen", "--force");
  ASSERT_EQ(forced.rc, 0) << forced.err;
  EXPECT_NE(ReadEd25519PublicKeyFile(dir_ + "/keys/ed.pub").value(), *pub);
  EXPECT_EQ(Mode(dir_ + "/keys/ed.key"), 0600u);
}

}  // namespace
}  // namespace pilot
