// The ranks' variables in both spellings, and the processes the launch
// layer starts.
#include "launch/rank_env.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "launch/spawn.h"

namespace pilot::launch {
namespace {

using Env = std::vector<std::string>;

TEST(SetRankEnv, PilotRunnersVariables) {
  Env env = {"PATH=/bin"};
  RankPlace p;
  p.rank = 2;
  p.local_rank = 2;
  p.world_size = 4;
  p.master_port = 29517;
  SetRankEnv(&env, p, RankVars::kPilot);
  EXPECT_EQ(env, (Env{"PATH=/bin", "PILOT_RANK=2", "PILOT_WORLD_SIZE=4", "PILOT_LOCAL_RANK=2",
                      "PILOT_MASTER_ADDR=127.0.0.1", "PILOT_MASTER_PORT=29517"}));
}

TEST(SetRankEnv, TorchrunsVariablesReplaceTheirFirstEntry) {
  Env env = {"RANK=9", "PATH=/bin", "RANK=8"};
  RankPlace p;
  p.rank = 1;
  p.local_rank = 1;
  p.world_size = 4;
  p.local_world_size = 2;
  p.master_addr = "pn1";
  p.master_port = 29501;
  SetRankEnv(&env, p, RankVars::kTorchrun);
  EXPECT_EQ(env, (Env{"RANK=1", "PATH=/bin", "RANK=8", "LOCAL_RANK=1", "WORLD_SIZE=4",
                      "LOCAL_WORLD_SIZE=2", "GROUP_RANK=0", "NODE_RANK=0", "MASTER_ADDR=pn1",
                      "MASTER_PORT=29501"}));
}

TEST(SetRankEnv, NamesInItsOrder) {
  EXPECT_EQ(RankEnvNames(RankVars::kPilot).size(), 5u);
  EXPECT_EQ(RankEnvNames(RankVars::kTorchrun).front(), "RANK");
  EXPECT_EQ(RankEnvNames(RankVars::kTorchrun).back(), "MASTER_PORT");
}

int Wait(pid_t pid) {
  int status = 0;
  EXPECT_EQ(waitpid(pid, &status, 0), pid);
  return status;
}

TEST(SpawnProcess, RunsByPathOrByNameAndSaysHowItEnded) {
  EXPECT_EQ(DescribeWaitStatus(Wait(SpawnProcess("/bin/sh", {"sh", "-c", "exit 3"}, {}))),
            "exit 3");
  EXPECT_EQ(DescribeWaitStatus(Wait(SpawnProcess("sh", {"sh", "-c", "kill -9 $$"}, {}))),
            "killed by signal 9 (Killed)");
  EXPECT_EQ(SpawnProcess("/nonexistent/pilot-launch-test", {"x"}, {}), -1);
}

TEST(ExecSearchingPath, SaysWhyNothingRan) {
  EXPECT_EQ(ExecSearchingPath({"/nonexistent/prog"}, {}),
            "cannot run /nonexistent/prog: No such file or directory");
  EXPECT_EQ(ExecSearchingPath({"pilot-no-such-program"}, {"PATH=/nonexistent:/also-not"}),
            "pilot-no-such-program: not found in PATH /nonexistent:/also-not");
  EXPECT_EQ(ExecSearchingPath({}, {}), "no command");
}

TEST(ExecSearchingPath, FindsTheProgramInTheEnvironmentsPath) {
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ExecSearchingPath({"sh", "-c", "exit 5"}, {"PATH=/nonexistent:/bin:/usr/bin"});
    _exit(127);
  }
  EXPECT_EQ(DescribeWaitStatus(Wait(pid)), "exit 5");
}

TEST(FreePort, APortOfThisMachine) {
  const int port = FreePort();
  EXPECT_GT(port, 0);
  EXPECT_LT(port, 65536);
}

}  // namespace
}  // namespace pilot::launch
