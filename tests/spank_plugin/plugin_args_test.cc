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

}  // namespace
}  // namespace pilot
