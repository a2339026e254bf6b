// GatherInputs: what the epilog reads about a finished pilot job (lock,
// the supervisor's results, verify and the manifest's hash as the user, the
// container tag again) in a fake world.
#include "epilog/epilog.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "core/base/atomic_file.h"
#include "core/records/lock.h"
#include "core/records/results.h"

namespace pilot {
namespace {

using job::CommandResult;
using job::CommandSpec;

class GatherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/pilot-parts-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    policy_.state_dir = dir_;
    policy_.runner_path = "/opt/pilot-runner";
    std::filesystem::create_directories(dir_ + "/jobs/7/work");
    Lock lock;
    lock.instance = kInstance;
    lock.job.id = 7;
    lock.job.user = "alice";
    lock.seeds.source = "job_id";
    lock.container.method = "none";
    lock.created = "2026-11-30T00:00:00Z";
    ASSERT_TRUE(ParseLock(LockToJson(lock)).ok()) << ParseLock(LockToJson(lock)).status().ToString();
    ASSERT_TRUE(WriteFileAtomic(dir_ + "/jobs/7/lock.json", LockToJson(lock)).ok());
    job_.job_id = 7;
    job_.uid = getuid();
    job_.gid = getgid();
    job_.is_pilot = true;
    job_.exit_code = "0:15";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // The supervisor's results.json in the job's folder.
  void WriteResults(const std::string& text) {
    ASSERT_TRUE(WriteFileAtomic(dir_ + "/jobs/7/results.json", text).ok());
  }
  static Results Supervised() {
    Results r;
    r.instance = kInstance;
    r.single.emplace();
    r.single->status = "ok";
    r.single->checkpoint.path = "/ck/step-000006";
    r.supervisor.emplace();
    r.supervisor->checkpoint_manifest_sha256 = std::string(64, 'a');
    return r;
  }

  // A fake world: the runner answers `verify`, sha256sum `manifest`.
  epilog::EpilogDeps Deps(std::string manifest = std::string(64, 'a')) {
    epilog::EpilogDeps d;
    d.now_unix = [] { return int64_t{1'800'000'000}; };
    d.run = [this, manifest](const CommandSpec& s) -> Result<CommandResult> {
      calls_.push_back(s);
      CommandResult r;
      r.exit_code = 0;
      r.out = s.argv[0].find("sha256sum") != std::string::npos ? manifest + "  x\n" : "{}";
      return r;
    };
    return d;
  }

  static constexpr char kInstance[] = "0123456789abcdef0123456789abcdef";

  std::string dir_;
  Policy policy_;
  job::JobEnv job_;
  std::vector<CommandSpec> calls_;
};

TEST_F(GatherTest, MissingResultsIsTheReason) {
  auto in = epilog::GatherInputs(policy_, job_, Deps());
  ASSERT_TRUE(in.lock) << in.lock_problem;
  EXPECT_FALSE(in.results);
  EXPECT_NE(in.results_problem.find("did not finish"), std::string::npos);
  EXPECT_NE(in.results_problem.find("0:15"), std::string::npos);
  EXPECT_FALSE(in.verify_ran);
  EXPECT_TRUE(calls_.empty());  // no verify without results
  EXPECT_EQ(in.results_path, dir_ + "/jobs/7/results.json");
}

// Proves: a pilot the prolog refused for want of space (state_space_low)
// has no results because it was never started, and the reason says so
// rather than "crashed, killed, out of time or cancelled".
TEST_F(GatherTest, ARefusedPilotSaysItWasNotStarted) {
  Lock lock = ReadLock(dir_ + "/jobs/7/lock.json").value();
  lock.problems.push_back({"state_space_low", "below the floor"});
  ASSERT_TRUE(WriteFileAtomic(dir_ + "/jobs/7/lock.json", LockToJson(lock)).ok());
  auto in = epilog::GatherInputs(policy_, job_, Deps());
  EXPECT_FALSE(in.results);
  EXPECT_NE(in.results_problem.find("the pilot was not started"), std::string::npos)
      << in.results_problem;
  EXPECT_NE(in.results_problem.find("state_space_low"), std::string::npos) << in.results_problem;
}

TEST_F(GatherTest, ResultsInWorkAreNeverRead) {
  // The user's folder holds a perfect results.json: it is not the evidence.
  ASSERT_TRUE(WriteFileAtomic(dir_ + "/jobs/7/work/results.json", ResultsToJson(Supervised())).ok());
  auto in = epilog::GatherInputs(policy_, job_, Deps());
  EXPECT_FALSE(in.results);
  EXPECT_NE(in.results_problem.find("no results.json from the supervisor"), std::string::npos);
}

TEST_F(GatherTest, InvalidResultsAreNotTrusted) {
  WriteResults("{\"schema\": 1}");
  auto in = epilog::GatherInputs(policy_, job_, Deps());
  EXPECT_FALSE(in.results);
  EXPECT_NE(in.results_problem.find("results.json is invalid"), std::string::npos);
  WriteResults(std::string(kResultsMaxBytes + 1, ' '));
  in = epilog::GatherInputs(policy_, job_, Deps());
  EXPECT_FALSE(in.results);
  EXPECT_NE(in.results_problem.find("invalid"), std::string::npos) << in.results_problem;
}

TEST_F(GatherTest, ResultsMustBeTheSupervisorsOfThisInstance) {
  Results r = Supervised();
  r.supervisor.reset();
  WriteResults(ResultsToJson(r));
  auto in = epilog::GatherInputs(policy_, job_, Deps());
  EXPECT_FALSE(in.results);
  EXPECT_NE(in.results_problem.find("not written by pilot-supervisor"), std::string::npos);
  r = Supervised();
  r.instance = "ffffffffffffffffffffffffffffffff";  // an earlier start of the job id
  WriteResults(ResultsToJson(r));
  in = epilog::GatherInputs(policy_, job_, Deps());
  EXPECT_FALSE(in.results);
  EXPECT_NE(in.results_problem.find("not to this start of the job"), std::string::npos)
      << in.results_problem;
}

TEST_F(GatherTest, VerifyRunsAsTheUserWithATimeout) {
  WriteResults(ResultsToJson(Supervised()));
  policy_.verify_timeout_seconds = 77;
  auto in = epilog::GatherInputs(policy_, job_, Deps());
  ASSERT_TRUE(in.results) << in.results_problem;
  ASSERT_EQ(calls_.size(), 2u);
  const CommandSpec& v = calls_[0];
  EXPECT_EQ(v.argv[0], "/opt/pilot-runner");
  EXPECT_EQ(v.argv[1], "verify");
  EXPECT_EQ(v.argv[3], "/ck/step-000006");
  EXPECT_EQ(v.timeout_seconds, 77);
  ASSERT_TRUE(v.run_as);
  EXPECT_EQ(v.run_as->uid, getuid());
  EXPECT_TRUE(in.verify_ran);
  EXPECT_EQ(in.verify_output, "{}");
  // The manifest is hashed as the user, and matches the supervisor's hash.
  ASSERT_TRUE(calls_[1].run_as);
  EXPECT_EQ(calls_[1].argv.back(), "/ck/step-000006/manifest.json");
  EXPECT_EQ(in.manifest_problem, "");
}

// verify gets what is left of the epilog's whole time after what follows
// it (manifest 10 s, store 5 s, one post with its retries), never more
// than verify_timeout_seconds; a verify the budget stopped says so.
TEST_F(GatherTest, VerifyGetsWhatIsLeftOfTheEpilogsBudget) {
  WriteResults(ResultsToJson(Supervised()));
  policy_.verify_timeout_seconds = 600;
  policy_.epilog_timeout_seconds = 120;
  policy_.notify_url = "http://127.0.0.1:9/v";
  policy_.notify_timeout_seconds = 10;
  policy_.notify_retries = 2;  // 3 x 10 s + 0.5 + 1 s between
  epilog::EpilogDeps deps = Deps();
  deps.elapsed_seconds = [] { return 30.0; };
  auto in = epilog::GatherInputs(policy_, job_, deps);
  ASSERT_GE(calls_.size(), 1u);
  EXPECT_DOUBLE_EQ(calls_[0].timeout_seconds, 120 - 30 - 10 - 5 - 31.5);
  EXPECT_DOUBLE_EQ(calls_.back().timeout_seconds, kEpilogManifestSeconds);  // the manifest's hash

  // A verify that ran out of that time is a problem naming the budget.
  calls_.clear();
  deps.run = [this](const CommandSpec& s) -> Result<CommandResult> {
    calls_.push_back(s);
    CommandResult r;
    r.timed_out = true;
    return r;
  };
  in = epilog::GatherInputs(policy_, job_, deps);
  EXPECT_FALSE(in.verify_ran);
  EXPECT_NE(in.verify_problem.find("timed out after 43.5 s (what was left of the epilog's "
                                   "epilog_timeout_seconds = 120)"),
            std::string::npos)
      << in.verify_problem;

  // Within the budget, verify_timeout_seconds is the limit, and a time-out
  // does not blame the budget.
  calls_.clear();
  policy_.epilog_timeout_seconds = 840;
  in = epilog::GatherInputs(policy_, job_, deps);
  EXPECT_DOUBLE_EQ(calls_[0].timeout_seconds, 600);
  EXPECT_EQ(in.verify_problem.find("epilog_timeout_seconds"), std::string::npos) << in.verify_problem;

  // Past the budget it still gets a second (and fails), never a negative limit.
  calls_.clear();
  deps.elapsed_seconds = [] { return 1000.0; };
  in = epilog::GatherInputs(policy_, job_, deps);
  EXPECT_DOUBLE_EQ(calls_[0].timeout_seconds, 1);
}

TEST_F(GatherTest, AManifestChangedAfterTheReportIsAProblem) {
  WriteResults(ResultsToJson(Supervised()));
  auto in = epilog::GatherInputs(policy_, job_, Deps(std::string(64, 'b')));
  ASSERT_TRUE(in.results) << in.results_problem;
  EXPECT_NE(in.manifest_problem.find("changed after the workload reported it complete"),
            std::string::npos)
      << in.manifest_problem;
}

TEST_F(GatherTest, ResolvesTheContainerTagAgain) {
  Lock lock = *ReadLock(dir_ + "/jobs/7/lock.json");
  lock.container.method = "registry";
  lock.container.reference = "127.0.0.1:5000/pilot/tiny:v1";
  lock.container.digest = "sha256:" + std::string(64, '1');
  lock.container.pinned = "127.0.0.1:5000/pilot/tiny@" + lock.container.digest;
  ASSERT_TRUE(WriteFileAtomic(dir_ + "/jobs/7/lock.json", LockToJson(lock)).ok());
  epilog::EpilogDeps deps = Deps();
  std::vector<std::string> asked;
  deps.resolve_digest = [&](const std::string& ref) -> Result<std::string> {
    asked.push_back(ref);
    return "sha256:" + std::string(64, '2');
  };
  auto in = epilog::GatherInputs(policy_, job_, deps);
  EXPECT_EQ(asked, std::vector<std::string>{"127.0.0.1:5000/pilot/tiny:v1"});
  EXPECT_EQ(in.container_digest_now, "sha256:" + std::string(64, '2'));
  deps.resolve_digest = [](const std::string&) -> Result<std::string> {
    return Status::Unavailable("127.0.0.1:5000", "connection refused");
  };
  in = epilog::GatherInputs(policy_, job_, deps);
  EXPECT_EQ(in.container_digest_now, "");
  EXPECT_NE(in.container_problem.find("connection refused"), std::string::npos);
}

TEST_F(GatherTest, MissingLockIsRecorded) {
  std::filesystem::remove(dir_ + "/jobs/7/lock.json");
  auto in = epilog::GatherInputs(policy_, job_, Deps());
  EXPECT_FALSE(in.lock);
  EXPECT_NE(in.lock_problem.find("prolog did not pin"), std::string::npos);
}

}  // namespace
}  // namespace pilot
