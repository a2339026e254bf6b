// The command line pilot-prolog and pilot-epilog share (Slurm runs them
// without arguments; wrappers and tests pass these).
#include "job/flags.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace pilot::job {
namespace {

Result<ScriptFlags> Parse(std::vector<std::string> args) {
  args.insert(args.begin(), "pilot-prolog");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  return ParseScriptFlags(static_cast<int>(argv.size()), argv.data());
}

TEST(ScriptFlags, NoneAndEach) {
  auto none = Parse({});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->policy_path, "");
  EXPECT_FALSE(none->version);
  auto f = Parse({"--policy", "/p.conf", "--state-dir=/s", "--runner", "/r/pilot-runner"});
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->policy_path, "/p.conf");
  EXPECT_EQ(f->state_dir, "/s");
  EXPECT_EQ(f->runner, "/r/pilot-runner");
  EXPECT_TRUE(Parse({"--version"})->version);
  EXPECT_TRUE(Parse({"-h"})->help);
}

TEST(ScriptFlags, Rejects) {
  struct Case {
    std::vector<std::string> args;
    std::string expect;
  };
  for (const Case& c : std::vector<Case>{{{"--colour=/x"}, "unknown flag"},
                                         {{"--state-dir"}, "needs a value"},
                                         {{"--runner", "bin/pilot-runner"}, "absolute path"},
                                         {{"--policy="}, "absolute path"}}) {
    auto f = Parse(c.args);
    ASSERT_FALSE(f.ok()) << c.args[0];
    EXPECT_NE(f.status().ToString().find(c.expect), std::string::npos) << f.status().ToString();
  }
}

TEST(ScriptFlags, FlagsOverrideThePolicy) {
  ScriptFlags f;
  f.policy_path = "/nonexistent/pilot.conf";
  EXPECT_FALSE(EffectivePolicy(f).ok()) << "a policy named on the command line must exist";
  f.policy_path.clear();
  f.state_dir = "/srv/state";
  f.runner = "/opt/pilot-runner";
  auto p = EffectivePolicy(f);
  if (!p.ok()) GTEST_SKIP() << "the installed default policy is unreadable here";
  EXPECT_EQ(p->state_dir, "/srv/state");
  EXPECT_EQ(p->runner_path, "/opt/pilot-runner");
}

}  // namespace
}  // namespace pilot::job
