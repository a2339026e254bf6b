// The `pilot` binary as users run it: exit codes, the one-line messages,
// help and version, "did you mean", `pilot check`.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "core/config/config.h"
#include "core/config/config_schema.h"
#include "core/config/load.h"
#include "pilot/version.h"

namespace {

struct Outcome {
  int rc = -1;
  std::string out;
  std::string err;
};

std::string ShellQuote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A folder of this test process's own: ctest runs each test case as its own
// process, in parallel, and they must not share output or config files.
const std::string& ProcessDir() {
  static const std::string dir = [] {
    std::string d = testing::TempDir() + "/pilot_cli_" + std::to_string(getpid());
    mkdir(d.c_str(), 0700);
    return d;
  }();
  return dir;
}

// Runs the built `pilot` with `args`; the environment is the test's, minus
// the Slurm job variables.
Outcome Pilot(const std::vector<std::string>& args) {
  const std::string& dir = ProcessDir();
  const std::string out = dir + "/pilot_cli_out", err = dir + "/pilot_cli_err";
  std::string cmd = "env -u SLURM_JOB_ID -u SLURM_SUBMIT_DIR " + ShellQuote(PILOT_BINARY);
  for (const std::string& a : args) cmd += " " + ShellQuote(a);
  cmd += " >" + ShellQuote(out) + " 2>" + ShellQuote(err) + " </dev/null";
  const int status = std::system(cmd.c_str());
  Outcome r;
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = Slurp(out);
  r.err = Slurp(err);
  return r;
}

std::string WriteFile(const std::string& name, const std::string& text) {
  const std::string path = ProcessDir() + "/" + name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

const std::string kConfigs = std::string(PILOT_SOURCE_DIR) + "/configs";

TEST(PilotCli, VersionPrintsTheBuildVersion) {
  Outcome r = Pilot({"--version"});
  EXPECT_EQ(r.rc, 0);
  EXPECT_EQ(r.out, std::string("pilot ") + PILOT_VERSION_STRING + "\n");
  EXPECT_EQ(r.err, "");
}

TEST(PilotCli, HelpListsCommands) {
  Outcome r = Pilot({"--help"});
  EXPECT_EQ(r.rc, 0);
  EXPECT_THAT(r.out, testing::HasSubstr("usage: pilot"));
  EXPECT_THAT(r.out, testing::ContainsRegex("\n  check +validate a pilot.toml"));
  EXPECT_THAT(r.out, testing::ContainsRegex("\n  help +show the help"));
  EXPECT_EQ(Pilot({"help"}).out, r.out);
}

TEST(PilotCli, NoArgumentsIsAUsageError) {
  Outcome r = Pilot({});
  EXPECT_EQ(r.rc, 2);
  EXPECT_THAT(r.err, testing::HasSubstr("usage: pilot"));
  EXPECT_EQ(r.out, "");
}

TEST(PilotCli, UnknownCommandSuggestsTheClosest) {
  Outcome r = Pilot({"chekc", "x.toml"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_EQ(r.err, "pilot: unknown command 'chekc'\nHINT: did you mean 'check'?\n");
  Outcome far = Pilot({"frobnicate"});
  EXPECT_EQ(far.rc, 2);
  EXPECT_EQ(far.err,
            "pilot: unknown command 'frobnicate'\nHINT: run 'pilot --help' for the list of "
            "commands\n");
}

TEST(PilotCli, UnknownGlobalOptionIsAUsageError) {
  Outcome r = Pilot({"--frob"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_THAT(r.err, testing::StartsWith("pilot: unrecognised option '--frob'"));
  EXPECT_THAT(r.err, testing::HasSubstr("HINT: see 'pilot --help'"));
}

TEST(PilotCli, CommandHelpTwoWays) {
  Outcome a = Pilot({"check", "--help"});
  Outcome b = Pilot({"help", "check"});
  EXPECT_EQ(a.rc, 0);
  EXPECT_EQ(b.rc, 0);
  EXPECT_EQ(a.out, b.out);
  EXPECT_THAT(a.out, testing::HasSubstr("usage: pilot check"));
  for (const char* flag : {"--set", "--json", "--no-expand", "--list-keys", "--help"}) {
    EXPECT_THAT(a.out, testing::HasSubstr(flag));
  }
  EXPECT_EQ(Pilot({"help", "chekc"}).rc, 2);
}

TEST(PilotCheck, AcceptsEveryShippedConfig) {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(kConfigs)) {
    if (e.path().extension() != ".toml") continue;
    Outcome r = Pilot({"check", e.path().string()});
    EXPECT_EQ(r.rc, 0) << e.path() << "\n" << r.err;
    EXPECT_EQ(r.err, "");
    EXPECT_THAT(r.out, testing::HasSubstr("\n[run]\n"));
    ++n;
  }
  EXPECT_GE(n, 2);
}

TEST(PilotCheck, TableMarksDefaultsAndSets) {
  Outcome r = Pilot({"check", kConfigs + "/tiny-cpu.toml", "--set", "training.steps=16"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_THAT(r.out, testing::ContainsRegex("\nsteps += 16 +\\(--set\\)\n"));
  EXPECT_THAT(r.out, testing::ContainsRegex("\nbucket_mb += 25 +\\(default\\)\n"));
  EXPECT_THAT(r.out, testing::ContainsRegex("\nlayers += 2\n"));
}

TEST(PilotCheck, JsonIsTheResolvedConfig) {
  Outcome r = Pilot({"check", "--json", kConfigs + "/gpt-1b.toml"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["model"]["layers"], 24);
  EXPECT_EQ(j["training"]["seq_len"], 2048);
  EXPECT_EQ(j["run"]["target_tokens"], 26000000000LL);
  // Outside a job $SLURM_JOB_ID stays as written.
  EXPECT_THAT(j["checkpoint"]["dir"].get<std::string>(),
              testing::EndsWith("/$SLURM_JOB_ID/checkpoints"));
}

TEST(PilotCheck, NoExpandKeepsPaths) {
  Outcome r = Pilot({"check", "--json", "--no-expand", kConfigs + "/gpt-1b.toml"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["checkpoint"]["dir"], "$HOME/pilot/$SLURM_JOB_ID/checkpoints");
}

// Proves: with the site's policy, `pilot check` refuses a container runtime
// or a mount's source the site does not allow, at the key's line, as the
// submission does; a policy named with --policy that cannot be read is an
// error.
TEST(PilotCheck, TheSitesContainerRulesFromItsPolicy) {
  const std::string policy = WriteFile(
      "site.conf", "[container]\nallowed_runtimes = [\"none\", \"podman\"]\nallowed_mounts = [\"/data\"]\n");
  const std::string base =
      "[run]\nname = \"t\"\nseq_len = 8\nmicro_batch = 1\ntarget_steps = 9\n[program]\n"
      "command = [\"python3\", \"t.py\"]\n[container]\nimage = \"reg.example/t:v1\"\n";
  const std::string ok = WriteFile("ok.toml", base + "runtime = \"podman\"\nmounts = [\"/data/set:/set\"]\n");
  Outcome r = Pilot({"check", "--policy", policy, ok});
  EXPECT_EQ(r.rc, 0) << r.err;
  const std::string rt = WriteFile("rt.toml", base + "runtime = \"apptainer\"\n");
  r = Pilot({"check", "--policy", policy, rt});
  EXPECT_EQ(r.rc, 2);
  EXPECT_THAT(r.err, testing::StartsWith("pilot: " + rt +
                                         ":10: container.runtime: \"apptainer\" is not allowed on this cluster"))
      << r.err;
  const std::string mnt = WriteFile("mnt.toml", base + "runtime = \"podman\"\nmounts = [\"/etc:/x\"]\n");
  r = Pilot({"check", "--policy", policy, mnt});
  EXPECT_EQ(r.rc, 2);
  EXPECT_THAT(r.err, testing::StartsWith("pilot: " + mnt + ":11: container.mounts: \"/etc\" is outside")) << r.err;
  EXPECT_THAT(r.err, testing::HasSubstr("allowed_mounts: /data")) << r.err;
  r = Pilot({"check", "--policy", ProcessDir() + "/no-such.conf", ok});
  EXPECT_EQ(r.rc, 2) << r.err;
}

TEST(PilotCheck, BadConfigsExitTwoWithOneMessage) {
  struct Case {
    const char* file;
    std::string text;
    std::string first_line;
  };
  const std::string run = "[run]\nname = \"t\"\nseq_len = 8\nmicro_batch = 1\ntarget_steps = 9\n";
  const std::vector<Case> cases = {
      {"syntax.toml", run + "[model\n", ":6: syntax error: "},
      {"section.toml", run + "[modle]\n", ":6: [modle]: unknown section"},
      {"type.toml", run + "[model]\nlayers = \"2\"\n", ":7: model.layers: must be an integer"},
      {"range.toml", run + "[training]\nsteps = 1\n", ":7: training.steps: must be between 2"},
      {"dup.toml", run + "name = \"u\"\n", ":6: syntax error: "},
      {"empty.toml", "", ":1: file is empty"},
      {"binary.toml", std::string("\x00\xff\xfe\x01[run]\x80\n", 11), ":1: syntax error: "},
  };
  for (const Case& c : cases) {
    const std::string path = WriteFile(c.file, c.text);
    Outcome r = Pilot({"check", path});
    EXPECT_EQ(r.rc, 2) << c.file;
    EXPECT_EQ(r.out, "") << c.file;
    EXPECT_THAT(r.err, testing::StartsWith("pilot: " + path + c.first_line)) << r.err;
    // One message: the first line, plus at most a HINT line.
    const auto lines = std::count(r.err.begin(), r.err.end(), '\n');
    EXPECT_GE(lines, 1);
    EXPECT_LE(lines, 2) << r.err;
    if (lines == 2) {
      EXPECT_THAT(r.err, testing::HasSubstr("\nHINT: ")) << r.err;
    }
  }
}

TEST(PilotCheck, BadOverrideExitsTwo) {
  Outcome r = Pilot({"check", kConfigs + "/tiny-cpu.toml", "--set", "model.layerz=3"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_EQ(r.err,
            "pilot: --set model.layerz=3: unknown key model.layerz\nHINT: did you mean "
            "model.layers?\n");
}

TEST(PilotCheck, MissingFileAndMissingArgument) {
  Outcome r = Pilot({"check", "/nonexistent.toml"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_EQ(r.err, "pilot: /nonexistent.toml: no such file\n");
  Outcome none = Pilot({"check"});
  EXPECT_EQ(none.rc, 2);
  EXPECT_EQ(none.err,
            "pilot: check: missing CONFIG (a pilot.toml)\nHINT: see 'pilot check --help'\n");
  Outcome flag = Pilot({"check", "--frob", "x"});
  EXPECT_EQ(flag.rc, 2);
  EXPECT_THAT(flag.err, testing::StartsWith("pilot: check: unrecognised option '--frob'"));
  Outcome two = Pilot({"check", "a.toml", "b.toml"});
  EXPECT_EQ(two.rc, 2);
}

TEST(PilotCheck, ListKeysIsKnownConfigKeys) {
  Outcome r = Pilot({"check", "--list-keys"});
  ASSERT_EQ(r.rc, 0);
  std::string expected;
  for (const std::string& k : pilot::KnownConfigKeys()) expected += k + "\n";
  EXPECT_EQ(r.out, expected);
}

}  // namespace
