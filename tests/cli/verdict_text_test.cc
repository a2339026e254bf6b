// `pilot verdict`, `pilot list` and `pilot verify-verdict` against a
// program's bytes and a tampered file: what a program wrote is shown but
// never acts on the terminal, and a verdict naming a key twice is refused.
// Each test names what it proves.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "core/base/crypto.h"
#include "core/base/json_util.h"
#include "core/base/utf8.h"
#include "core/records/verdict.h"

namespace pilot {
namespace {

namespace fs = std::filesystem;

struct RanVerdictText {
  int rc = -1;
  std::string out;
  std::string err;
};

std::string SlurpVerdictText(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

void WriteVerdictText(const std::string& path, const std::string& text, mode_t mode = 0644) {
  std::ofstream(path) << text;
  chmod(path.c_str(), mode);
}

// No byte of `text` is one a terminal acts on: no C0 control but '\n', no
// DEL, no C1 control in either form, nothing that is not UTF-8.
::testing::AssertionResult Inert(const std::string& text) {
  if (!IsValidUtf8(text)) return ::testing::AssertionFailure() << "not UTF-8:\n" << text;
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    const bool c1 = c == 0xC2 && i + 1 < text.size() &&
                    static_cast<unsigned char>(text[i + 1]) <= 0x9F;
    if ((c < 0x20 && c != '\n') || c == 0x7F || c1) {
      return ::testing::AssertionFailure() << "byte " << int{c} << " at " << i << " in:\n"
                                           << VisibleText(text, Newlines::kKeep);
    }
  }
  return ::testing::AssertionSuccess();
}

class VerdictTextTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/pilot-verdict-text-test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    fs::create_directories(dir_ + "/state/verdicts");
    fs::create_directories(dir_ + "/keys");
    WriteVerdictText(dir_ + "/keys/hmac.key", NewKeyFileContents().value(), 0600);
    Result<Ed25519KeyFiles> pair = NewEd25519KeyFiles();
    ASSERT_TRUE(pair.ok()) << pair.status().ToString();
    WriteVerdictText(dir_ + "/keys/ed.key", pair->private_pem, 0600);
    WriteVerdictText(dir_ + "/keys/ed.pub", pair->public_pem, 0644);
    seed_ = ReadEd25519PrivateKeyFile(dir_ + "/keys/ed.key").value();
    WriteVerdictText(dir_ + "/pilot.conf", "state_dir = \"" + dir_ + "/state\"\nkey_file = \"" + dir_ +
                                    "/keys/hmac.key\"\nsigning_key_file = \"" + dir_ +
                                    "/keys/ed.key\"\npublic_key_file = \"" + dir_ +
                                    "/keys/ed.pub\"\n");
  }
  void TearDown() override { fs::remove_all(dir_); }

  RanVerdictText Pilot(const std::string& command, const std::string& args) {
    RanVerdictText r;
    const std::string out = dir_ + "/out", err = dir_ + "/err";
    const std::string cmd = std::string(PILOT_BINARY) + " " + command + " --policy " + dir_ +
                            "/pilot.conf " + args + " >" + out + " 2>" + err;
    const int st = std::system(cmd.c_str());
    r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    r.out = SlurpVerdictText(out);
    r.err = SlurpVerdictText(err);
    return r;
  }

  // A NO-GO whose failed check carries a program's standard error tail
  // built to repaint the line as a pass, signed with the Ed25519 pair.
  std::string HostileVerdict(int64_t id) {
    Verdict v;
    v.job = {id, "alice\x1b]0;owned\x07", "gpt-1b\r", std::string(64, 'a')};
    v.decision = Decision::kNoGo;
    v.checks = {{"restore", CheckStatus::kFail, "loss differs\x1b[2K\rrestore pass", "equal",
                 "Traceback (most recent call last):\n  caf\xE9\n\x1b[2K\rrestore pass\xC2\x9B" "0m",
                 VerifiedBy::kSupervisor}};
    v.hardware = {{"H100-80\x7f", true, 1, 2, 0.5, "\xE2\x80\xAE" "note"}};
    v.issued = "2026-11-30T04:05:06Z";
    v.expires = "2099-12-14T04:05:06Z";
    EXPECT_TRUE(SignVerdict(&v, "", seed_).ok());
    return VerdictToJson(v);
  }

  std::string dir_;
  std::string seed_;
};

// Proves `pilot verdict` shows a program's "\x1b[2K\rrestore pass" spelled
// out, with no ESC, CR or other control byte in its output, and keeps a
// multi-line tail as lines, each under the first.
TEST_F(VerdictTextTest, VerdictShowsAProgramsEscapesInert) {
  WriteVerdictText(dir_ + "/state/verdicts/42.json", HostileVerdict(42));
  RanVerdictText r = Pilot("verdict", "42");
  EXPECT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_TRUE(Inert(r.out));
  EXPECT_TRUE(Inert(r.err));
  EXPECT_NE(r.out.find("loss differs\\x1b[2K\\rrestore pass"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("job 42  alice\\x1b]0;owned\\x07  gpt-1b\\r  NO-GO"), std::string::npos)
      << r.out;
  const std::string indent(20, ' ');
  EXPECT_NE(r.out.find(indent + "Traceback (most recent call last):\n" + indent + "  caf\xEF\xBF\xBD\n" +
                       indent + "\\x1b[2K\\rrestore pass\\u009b0m\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("H100-80\\x7f fits"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\\u202enote"), std::string::npos) << r.out;
}

// Proves `pilot verdict --json` stays JSON of the same verdict and carries
// no control byte either (DEL and C1 controls as \u escapes).
TEST_F(VerdictTextTest, VerdictJsonIsInertAndTheSameValue) {
  const std::string text = HostileVerdict(43);
  WriteVerdictText(dir_ + "/state/verdicts/43.json", text);
  RanVerdictText r = Pilot("verdict", "--json 43");
  EXPECT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_TRUE(Inert(r.out));
  Result<Json> shown = ParseJsonText(r.out, "out");
  ASSERT_TRUE(shown.ok()) << shown.status().ToString();
  shown->erase("signature_check");
  EXPECT_EQ(shown->at("runs"), Json::array()) << "no long job named this pilot";
  shown->erase("runs");
  EXPECT_EQ(*shown, ParseJsonText(text, "file").value());
}

// Proves `pilot list` shows a user and run name inert too.
TEST_F(VerdictTextTest, ListShowsNamesInert) {
  WriteVerdictText(dir_ + "/state/verdicts/44.json", HostileVerdict(44));
  RanVerdictText r = Pilot("list", "--all");
  EXPECT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_TRUE(Inert(r.out));
  EXPECT_NE(r.out.find("alice\\x1b]0; "), std::string::npos) << r.out;
}

// Proves `pilot verify-verdict` refuses a signed NO-GO to which a first
// "decision": "GO" was added (a first-key reader would see GO while the
// signature covers NO-GO), naming the key; and `pilot verdict` refuses the
// stored file the same way. Nested, the same.
TEST_F(VerdictTextTest, VerdictWithADuplicateKeyIsRefused) {
  const std::string text = HostileVerdict(45);
  const std::string good = dir_ + "/good.json";
  WriteVerdictText(good, text);
  RanVerdictText ok = Pilot("verify-verdict", good);
  EXPECT_EQ(ok.rc, 0) << ok.out << ok.err;
  EXPECT_TRUE(Inert(ok.out));
  EXPECT_NE(ok.out.find("decision   NO-GO"), std::string::npos) << ok.out;

  std::string twice = text;
  twice.insert(twice.find('{') + 1, "\n  \"decision\": \"GO\",");
  WriteVerdictText(dir_ + "/twice.json", twice);
  RanVerdictText r = Pilot("verify-verdict", dir_ + "/twice.json");
  EXPECT_EQ(r.rc, 2) << r.out << r.err;
  EXPECT_EQ(r.out.find("decision"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("twice.json: duplicate key \"decision\""), std::string::npos) << r.err;

  std::string nested = text;
  nested.insert(nested.find('{', nested.find("\"job\"")) + 1, "\"id\": 7, ");
  WriteVerdictText(dir_ + "/nested.json", nested);
  r = Pilot("verify-verdict", dir_ + "/nested.json");
  EXPECT_EQ(r.rc, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("duplicate key \"id\" in \"job\""), std::string::npos) << r.err;

  WriteVerdictText(dir_ + "/state/verdicts/45.json", twice);
  r = Pilot("verdict", "45");
  EXPECT_EQ(r.rc, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("duplicate key \"decision\""), std::string::npos) << r.err;
}

}  // namespace
}  // namespace pilot
