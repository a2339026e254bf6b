// Unit tests of the Slurm-side parts that need no cluster: plugstack
// arguments, the runner command, the job environment, running helpers,
// seeds and the epilog's gathering of its inputs (label `unit`).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>

#include "core/atomic_file.h"
#include "core/lock.h"
#include "core/results.h"
#include "epilog/epilog.h"
#include "job/job_env.h"
#include "job/subprocess.h"
#include "prolog/prolog.h"
#include "spank_plugin/plugin_args.h"

namespace pilot {
namespace {

using job::CommandResult;
using job::CommandSpec;

TEST(PluginArgs, DefaultsAndValues) {
  auto a = spank::ParsePluginArgs({});
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->state_dir, "/var/lib/slurm-pilot");
  EXPECT_FALSE(a->state_dir_given);
  a = spank::ParsePluginArgs({"state_dir=/s/", "runner=/r/pilot-runner", "policy=/p.conf"});
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->state_dir, "/s");
  EXPECT_EQ(a->runner, "/r/pilot-runner");
  EXPECT_EQ(a->policy, "/p.conf");
  EXPECT_TRUE(a->state_dir_given);
  EXPECT_TRUE(a->runner_given);
}

TEST(PluginArgs, Rejects) {
  struct Case {
    std::vector<std::string> argv;
    std::string expect;
  };
  for (const Case& c : std::vector<Case>{
           {{"state-dir=/x"}, "did you mean state_dir?"},
           {{"colour=/x"}, "unknown key"},
           {{"state_dir"}, "expected key=value"},
           {{"runner=bin/pilot-runner"}, "must be an absolute path"},
           {{"policy="}, "must be an absolute path"}}) {
    auto a = spank::ParsePluginArgs(c.argv);
    ASSERT_FALSE(a.ok()) << c.argv[0];
    EXPECT_NE(a.status().ToString().find(c.expect), std::string::npos)
        << a.status().ToString();
  }
}

TEST(PluginArgs, RunnerArgv) {
  spank::PluginArgs args;
  args.state_dir = "/st";
  args.runner = "/bin/pilot-runner";
  spank::PilotRequest req;
  req.stage = "single";
  std::vector<std::string> want = {"/bin/pilot-runner", "run", "--config",
                                   "/st/jobs/42/config.toml", "--lock", "/st/jobs/42/lock.json",
                                   "--out", "/st/jobs/42/work", "--stage", "single"};
  EXPECT_EQ(spank::RunnerArgv(args, req, 42), want);
  req.out = "/home/a/out";
  EXPECT_EQ(spank::RunnerArgv(args, req, 42)[7], "/home/a/out");
  EXPECT_TRUE(spank::IsValidStage("node"));
  EXPECT_FALSE(spank::IsValidStage("both"));
}

job::Lookup MapLookup(std::map<std::string, std::string> m) {
  return [m](const std::string& k) -> std::optional<std::string> {
    auto it = m.find(k);
    if (it == m.end()) return std::nullopt;
    return it->second;
  };
}

TEST(JobEnv, PilotAndPlainJobs) {
  std::map<std::string, std::string> env = {
      {"SLURM_JOB_ID", "17"},       {"SLURM_JOB_UID", "1001"},
      {"SLURM_JOB_GID", "1002"},    {"SLURM_JOB_USER", "alice"},
      {"SLURMD_NODENAME", "n1"},    {"SLURM_JOB_NUM_NODES", "2"},
      {"SLURM_JOB_EXIT_CODE2", "0:9"}};
  auto plain = job::ReadJobEnv(MapLookup(env));
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_FALSE(plain->is_pilot);
  EXPECT_EQ(plain->job_id, 17);
  EXPECT_EQ(plain->uid, 1001u);
  EXPECT_EQ(plain->gid, 1002u);
  EXPECT_EQ(plain->nodes, 2);
  env["SPANK_SLURM_PILOT_CONFIG"] = "/c/x.toml";
  env["SPANK_SLURM_PILOT_CONFIG_SHA256"] = std::string(64, 'a');
  env["SPANK_SLURM_PILOT_STAGE"] = "node";
  auto pilot = job::ReadJobEnv(MapLookup(env));
  ASSERT_TRUE(pilot.ok());
  EXPECT_TRUE(pilot->is_pilot);
  EXPECT_EQ(pilot->config_path, "/c/x.toml");
  EXPECT_EQ(pilot->stage, "node");
  EXPECT_EQ(pilot->exit_code, "0:9");
  // The option alone (config not recorded) still marks a pilot job.
  env.erase("SPANK_SLURM_PILOT_CONFIG");
  env["SPANK__SLURM_SPANK_OPTION_pilot_pilot"] = "x.toml";
  EXPECT_TRUE(job::ReadJobEnv(MapLookup(env))->is_pilot);
}

TEST(JobEnv, MissingOrBadIds) {
  EXPECT_FALSE(job::ReadJobEnv(MapLookup({{"SLURM_JOB_UID", "1"}, {"SLURM_JOB_GID", "1"}}))
                   .ok());
  auto bad = job::ReadJobEnv(
      MapLookup({{"SLURM_JOB_ID", "12x"}, {"SLURM_JOB_UID", "1"}, {"SLURM_JOB_GID", "1"}}));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().ToString().find("SLURM_JOB_ID: not a number"), std::string::npos);
}

TEST(Subprocess, OutputExitAndEnvironment) {
  CommandSpec spec;
  spec.argv = {"/bin/sh", "-c", "echo out; echo err >&2; echo $FOO; exit 3"};
  spec.env = {"FOO=bar"};
  auto r = job::RunCommand(spec);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_EQ(r->out, "out\nbar\n");
  EXPECT_EQ(r->err, "err\n");
  EXPECT_FALSE(r->timed_out);
  EXPECT_EQ(r->Describe(1), "exit 3");
}

TEST(Subprocess, TimeoutKillsTheGroup) {
  CommandSpec spec;
  spec.argv = {"/bin/sh", "-c", "sleep 30 & sleep 30; echo never"};
  spec.timeout_seconds = 0.3;
  spec.kill_grace_seconds = 0.2;
  auto t0 = std::chrono::steady_clock::now();
  auto r = job::RunCommand(spec);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->timed_out);
  EXPECT_FALSE(r->Succeeded());
  EXPECT_EQ(r->out, "");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
}

TEST(Subprocess, OutputCapAndExecFailure) {
  CommandSpec spec;
  spec.argv = {"/bin/sh", "-c", "head -c 100000 /dev/zero"};
  spec.max_output_bytes = 1000;
  auto r = job::RunCommand(spec);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->out.size(), 1000u);
  EXPECT_EQ(r->exit_code, 0);
  spec.argv = {"/nonexistent/program"};
  r = job::RunCommand(spec);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 127);
  spec.argv = {"relative"};
  EXPECT_FALSE(job::RunCommand(spec).ok());
}

TEST(Prolog, SeedFromJobId) {
  EXPECT_EQ(prolog::SeedFromJobId(42), prolog::SeedFromJobId(42));
  EXPECT_NE(prolog::SeedFromJobId(42), prolog::SeedFromJobId(43));
  for (int64_t id : {int64_t{0}, int64_t{1}, int64_t{4242}, int64_t{4294967295}}) {
    int64_t s = prolog::SeedFromJobId(id);
    EXPECT_GE(s, 0);
    EXPECT_LT(s, int64_t{1} << 31);
  }
}

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

  // A fake world: `cat` answers `results`, the runner answers `verify`.
  epilog::EpilogDeps Deps(const std::string& results, bool results_ok) {
    epilog::EpilogDeps d;
    d.now_unix = [] { return int64_t{1'800'000'000}; };
    d.run = [this, results, results_ok](const CommandSpec& s) -> Result<CommandResult> {
      calls_.push_back(s);
      CommandResult r;
      if (s.argv[0] == "/bin/cat") {
        r.exit_code = results_ok ? 0 : 1;
        r.out = results;
      } else {
        r.exit_code = 0;
        r.out = "{}";
      }
      return r;
    };
    return d;
  }

  std::string dir_;
  Policy policy_;
  job::JobEnv job_;
  std::vector<CommandSpec> calls_;
};

TEST_F(GatherTest, MissingResultsIsTheReason) {
  auto in = epilog::GatherInputs(policy_, job_, Deps("", false));
  ASSERT_TRUE(in.lock) << in.lock_problem;
  EXPECT_FALSE(in.results);
  EXPECT_NE(in.results_problem.find("did not finish"), std::string::npos);
  EXPECT_NE(in.results_problem.find("0:15"), std::string::npos);
  EXPECT_FALSE(in.verify_ran);
  ASSERT_EQ(calls_.size(), 1u);  // no verify without results
  ASSERT_TRUE(calls_[0].run_as);
  EXPECT_EQ(calls_[0].run_as->uid, getuid());
  EXPECT_EQ(calls_[0].argv.back(), dir_ + "/jobs/7/work/results.json");
}

TEST_F(GatherTest, InvalidResultsAreNotTrusted) {
  auto in = epilog::GatherInputs(policy_, job_, Deps("{\"schema\": 1}", true));
  EXPECT_FALSE(in.results);
  EXPECT_NE(in.results_problem.find("results.json is invalid"), std::string::npos);
  in = epilog::GatherInputs(policy_, job_,
                               Deps(std::string(kResultsMaxBytes + 1, ' '), true));
  EXPECT_NE(in.results_problem.find("larger than"), std::string::npos);
}

TEST_F(GatherTest, VerifyRunsAsTheUserWithATimeout) {
  Results r;
  r.single.emplace();
  r.single->status = "ok";
  r.single->checkpoint.path = "/ck/step-000006";
  policy_.verify_timeout_seconds = 77;
  auto in = epilog::GatherInputs(policy_, job_, Deps(ResultsToJson(r), true));
  ASSERT_TRUE(in.results) << in.results_problem;
  ASSERT_EQ(calls_.size(), 2u);
  const CommandSpec& v = calls_[1];
  EXPECT_EQ(v.argv[0], "/opt/pilot-runner");
  EXPECT_EQ(v.argv[1], "verify");
  EXPECT_EQ(v.argv[3], "/ck/step-000006");
  EXPECT_EQ(v.timeout_seconds, 77);
  ASSERT_TRUE(v.run_as);
  EXPECT_EQ(v.run_as->uid, getuid());
  EXPECT_TRUE(in.verify_ran);
  EXPECT_EQ(in.verify_output, "{}");
}

TEST_F(GatherTest, ResolvesTheContainerTagAgain) {
  Lock lock = *ReadLock(dir_ + "/jobs/7/lock.json");
  lock.container.method = "registry";
  lock.container.reference = "127.0.0.1:5000/pilot/tiny:v1";
  lock.container.digest = "sha256:" + std::string(64, '1');
  lock.container.pinned = "127.0.0.1:5000/pilot/tiny@" + lock.container.digest;
  ASSERT_TRUE(WriteFileAtomic(dir_ + "/jobs/7/lock.json", LockToJson(lock)).ok());
  epilog::EpilogDeps deps = Deps("", false);
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
  auto in = epilog::GatherInputs(policy_, job_, Deps("", false));
  EXPECT_FALSE(in.lock);
  EXPECT_NE(in.lock_problem.find("prolog did not pin"), std::string::npos);
}

}  // namespace
}  // namespace pilot
