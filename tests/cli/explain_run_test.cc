// `pilot explain` on a refusal record as job_submit.lua writes it, and
// `pilot run --dry-run`: the sbatch command and the bound run's script.
#include <gtest/gtest.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "job/binding.h"
#include "tests/cli/run_pilot.h"

// A namespace of its own: the unity build puts the cli tests in one file.
namespace pilot::explain_run_test {
namespace {

namespace fs = std::filesystem;

using testutil::Ran;
using testutil::RunPilot;

void Write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

std::string Me() {
  const struct passwd* pw = getpwuid(getuid());
  return pw != nullptr ? pw->pw_name : "";
}

std::string Grant(int64_t job, const std::string& user) {
  return "{\n  \"schema\": \"slurm-pilot/grant/1\",\n  \"job_id\": " + std::to_string(job) +
         ",\n  \"user\": \"" + user + "\",\n  \"nodes\": 2,\n  \"duration_minutes\": 14400,\n  \"identity\": null\n}\n";
}

class ExplainRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/pilot-explain-test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    fs::create_directories(dir_ + "/state/refusals");
    fs::create_directories(dir_ + "/state/grants");
    Write(dir_ + "/pilot.conf", "state_dir = \"" + dir_ + "/state\"\n");
    policy_ = "--policy " + dir_ + "/pilot.conf";
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string dir_, policy_;
};

TEST_F(ExplainRunTest, ShowsTheRecordAndTheGrant) {
  Write(dir_ + "/state/grants/5.json", Grant(5, "alice"));
  Write(dir_ + "/state/refusals/12.json",
        "{\n  \"schema\": \"slurm-pilot/refusal/1\",\n  \"job_id\": 12,\n  \"pilot_job\": 5,\n"
        "  \"user\": \"alice\",\n  \"uid\": 1001,\n  \"refused_at\": \"2026-12-07T21:40:03Z\",\n"
        "  \"change\": \"MinNodes=3\",\n  \"reason\": \"a run bound to pilot 5 may use at most 2 node(s), "
        "the grant's (asked for 3)\"\n}\n");
  Ran r = RunPilot("explain " + policy_ + " 12");
  EXPECT_EQ(r.rc, 0) << r.output;
  EXPECT_NE(r.output.find("job 12: a change was refused at 2026-12-07T21:40:03Z (asked by uid 1001)"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("  asked   MinNodes=3\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("  why     a run bound to pilot 5 may use at most 2 node(s)"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("  grant   pilot_5 for alice: at most 2 node(s) and 14400 minutes"),
            std::string::npos)
      << r.output;
}

TEST_F(ExplainRunTest, NothingRecordedOrABadRecord) {
  Ran r = RunPilot("explain " + policy_ + " 13");
  EXPECT_EQ(r.rc, 1) << r.output;
  EXPECT_NE(r.output.find("pilot: explain: job 13: no refused change recorded"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("HINT:"), std::string::npos) << r.output;
  Write(dir_ + "/state/refusals/14.json", "{\"schema\": \"slurm-pilot/refusal/1\"}");
  r = RunPilot("explain " + policy_ + " 14");
  EXPECT_EQ(r.rc, 1) << r.output;
  EXPECT_NE(r.output.find("pilot: explain: "), std::string::npos) << r.output;
  r = RunPilot("explain " + policy_ + " x");
  EXPECT_EQ(r.rc, 2) << r.output;
}

TEST_F(ExplainRunTest, RunSubmitsTheBoundScriptInTheCallersGrant) {
  Write(dir_ + "/state/grants/5.json", Grant(5, Me()));
  Ran r = RunPilot("run --dry-run " + policy_ + " 5 -- --time=10-0 -N2");
  EXPECT_EQ(r.rc, 0) << r.output;
  EXPECT_EQ(r.output, "sbatch --pilot-run=5 --reservation=pilot_5 --time=10-0 -N2 <<'EOF'\n" +
                          job::BoundRunScript(5) + "EOF\n");
  // Another user's grant: no reservation of theirs; one the caller names stands.
  Write(dir_ + "/state/grants/6.json", Grant(6, "somebody-else"));
  r = RunPilot("run --dry-run " + policy_ + " 6");
  EXPECT_EQ(r.output.substr(0, r.output.find('\n')), "sbatch --pilot-run=6 <<'EOF'") << r.output;
  r = RunPilot("run --dry-run " + policy_ + " 5 -- --reservation=mine");
  EXPECT_EQ(r.output.substr(0, r.output.find('\n')), "sbatch --pilot-run=5 --reservation=mine <<'EOF'")
      << r.output;
  r = RunPilot("run --dry-run " + policy_ + " 5x");
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_NE(r.output.find("PILOT must be a job id"), std::string::npos) << r.output;
}

TEST(BoundRunScript, NamesThePilotAndFailsOnItsOwn) {
  const std::string s = job::BoundRunScript(42);
  EXPECT_EQ(s.rfind("#!/bin/sh\n", 0), 0u);
  EXPECT_NE(s.find("`pilot run 42`"), std::string::npos);
  EXPECT_NE(s.find("\nexit 1\n"), std::string::npos);
}

}  // namespace
}  // namespace pilot::explain_run_test
