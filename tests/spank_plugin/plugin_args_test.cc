// The plugin's Slurm-free parts: plugstack arguments, stages and the runner
// command that replaces the pilot job's first task.
#include "spank_plugin/plugin_args.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace pilot {
namespace {

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

TEST(PluginArgs, SupervisorArgv) {
  spank::PluginArgs args;
  args.state_dir = "/st";
  args.runner = "/bin/pilot-runner";
  args.supervisor = "/sbin/pilot-supervisor";
  args.policy = "/etc/p.conf";
  spank::PilotRequest req;
  req.stage = "single";
  spank::TaskIdentity task;
  task.job_id = 42;
  task.uid = 1000;
  task.gid = 100;
  task.cwd = "/home/a";
  std::vector<std::string> want = {"/sbin/pilot-supervisor", "--job", "42", "--uid", "1000",
                                   "--gid", "100", "--policy", "/etc/p.conf", "--state-dir", "/st",
                                   "--runner", "/bin/pilot-runner", "--stage", "single",
                                   "--cwd", "/home/a", "--channel", "3", "--job-env", "4"};
  EXPECT_EQ(spank::SupervisorArgv(args, req, task, 3, 4), want);
  req.out = "/home/a/out";
  std::vector<std::string> with_out = spank::SupervisorArgv(args, req, task, 3, 4);
  ASSERT_EQ(with_out.size(), want.size() + 2);
  EXPECT_EQ(with_out[15], "--out");
  EXPECT_EQ(with_out[16], "/home/a/out");
  task.cwd = "relative";
  EXPECT_EQ(spank::SupervisorArgv(args, req, task, 3, 4)[18], "/");
  EXPECT_TRUE(spank::IsValidStage("node"));
  EXPECT_FALSE(spank::IsValidStage("both"));
}

// A relative --pilot-out reached the supervisor as given (Slurm hands the
// task the option as typed), which refuses a relative --out: the pilot
// ended with no results, "crashed". It is resolved against the submit
// directory, as the submit side resolves it.
TEST(PluginArgs, ARelativePilotOutIsTheSubmitDirectorys) {
  EXPECT_EQ(spank::ResolvePilotOut("run1", "/home/a/exp"), "/home/a/exp/run1");
  EXPECT_EQ(spank::ResolvePilotOut("./run1/", "/home/a/exp"), "/home/a/exp/run1");
  EXPECT_EQ(spank::ResolvePilotOut("../runs/1", "/home/a/exp"), "/home/a/runs/1");
  EXPECT_EQ(spank::ResolvePilotOut("/scratch/a//run1/.", "/home/a"), "/scratch/a/run1");
  EXPECT_EQ(spank::ResolvePilotOut("run1", ""), "/run1");
  EXPECT_EQ(spank::ResolvePilotOut("../..", "/"), "/");
  spank::PluginArgs args;
  spank::PilotRequest req;
  req.out = "runs/1";
  spank::TaskIdentity task;
  task.cwd = "/home/a/exp";
  const std::vector<std::string> argv = spank::SupervisorArgv(args, req, task, 3, 4);
  ASSERT_EQ(argv.size(), 23u);
  EXPECT_EQ(argv[15], "--out");
  EXPECT_EQ(argv[16], "/home/a/exp/runs/1");
  task.cwd = "not-absolute";
  EXPECT_EQ(spank::SupervisorArgv(args, req, task, 3, 4)[16], "/runs/1");
}

TEST(PluginArgs, SupervisorKey) {
  auto a = spank::ParsePluginArgs({"supervisor=/opt/pilot-supervisor"});
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->supervisor, "/opt/pilot-supervisor");
  EXPECT_TRUE(a->supervisor_given);
  EXPECT_FALSE(a->runner_given);
}

}  // namespace
}  // namespace pilot
