// srun's step as the launch layer builds it and reads it back: the command
// line of both workloads' steps, each task's torchrun variables, --label
// lines, and the task srun's lines name as the one that failed.
#include "launch/srun.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "launch/spawn.h"

namespace pilot::launch {
namespace {

using Argv = std::vector<std::string>;

TEST(SrunStepArgv, OneTaskPerRankWhereSrunPlacesThem) {
  SrunStep step;
  step.tasks = 4;
  step.command = {"/opt/pilot/bin/pilot-runner", "run", "--stage", "node"};
  EXPECT_EQ(SrunStepArgv(step), (Argv{"srun", "--ntasks=4", "--kill-on-bad-exit=1", "--wait=60",
                                      "/opt/pilot/bin/pilot-runner", "run", "--stage", "node"}));
}

TEST(SrunStepArgv, OverNodesInBlocksWithLabels) {
  SrunStep step;
  step.tasks = 4;
  step.nodes = 2;
  step.label = true;
  step.command = {"python3", "train.py"};
  EXPECT_EQ(SrunStepArgv(step),
            (Argv{"srun", "--nodes=2", "--ntasks=4", "--ntasks-per-node=2", "--distribution=block",
                  "--kill-on-bad-exit=1", "--wait=60", "--label", "python3", "train.py"}));
}

TEST(TorchrunTaskCommand, AShellThatRunsTheCommand) {
  const Argv a = TorchrunTaskCommand({"python3", "train.py", "--x"});
  ASSERT_EQ(a.size(), 7u);
  EXPECT_EQ(a[0], "/bin/sh");
  EXPECT_EQ(a[1], "-c");
  EXPECT_EQ(a[3], "pilot-rank");
  EXPECT_EQ((Argv{a[4], a[5], a[6]}), (Argv{"python3", "train.py", "--x"}));
}

// Runs `argv` with `env`, its stdout on its stderr, both into a pipe; what
// it wrote.
std::string Output(const Argv& argv, const Argv& env) {
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  Argv a = {"/bin/sh", "-c", "exec \"$@\" 1>&2", "wrap"};
  a.insert(a.end(), argv.begin(), argv.end());
  const pid_t pid = SpawnProcess("/bin/sh", a, env, fds[1]);
  close(fds[1]);
  std::string out;
  char buf[512];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_EQ(DescribeWaitStatus(status), "exit 0");
  return out;
}

TEST(TorchrunTaskCommand, TorchrunsVariablesFromSruns) {
  const Argv env = {"PATH=/usr/bin:/bin",
                    "SLURM_PROCID=3",
                    "SLURM_LOCALID=1",
                    "SLURM_NODEID=1",
                    "SLURM_LAUNCH_NODE_IPADDR=10.0.0.1",
                    "MASTER_ADDR=pn1"};
  EXPECT_EQ(
      Output(TorchrunTaskCommand(
                 {"/bin/sh", "-c", "echo $RANK $LOCAL_RANK $GROUP_RANK $NODE_RANK $MASTER_ADDR"}),
             env),
      "3 1 1 1 10.0.0.1\n");
  // Without srun's launch address, MASTER_ADDR stays as it was.
  EXPECT_EQ(Output(TorchrunTaskCommand({"/bin/sh", "-c", "echo $MASTER_ADDR"}),
                   {"SLURM_PROCID=0", "MASTER_ADDR=pn1"}),
            "pn1\n");
}

TEST(TorchrunTaskCommand, RecordsOnStdoutTheCommandsOutputOnStderr) {
  int out[2], err[2];
  ASSERT_EQ(pipe(out), 0);
  ASSERT_EQ(pipe(err), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    dup2(out[1], 1);
    dup2(err[1], 2);
    const Argv a =
        TorchrunTaskCommand({"/bin/sh", "-c", "echo record >>\"$PILOT_METRICS\"; echo chatter"});
    ExecSearchingPath(a, {"PILOT_METRICS=/some/fifo", "SLURM_PROCID=0"});
    _exit(127);
  }
  close(out[1]);
  close(err[1]);
  auto read_all = [](int fd) {
    std::string s;
    char buf[256];
    for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) s.append(buf, static_cast<size_t>(n));
    close(fd);
    return s;
  };
  EXPECT_EQ(read_all(out[0]), "record\n");
  EXPECT_EQ(read_all(err[0]), "chatter\n");
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_EQ(DescribeWaitStatus(status), "exit 0");
}

TEST(SplitSrunLabel, TheTaskIdAndItsText) {
  EXPECT_EQ(SplitSrunLabel(" 3: hello", 4), std::make_pair(3, std::string("hello")));
  EXPECT_EQ(SplitSrunLabel("12: {\"a\": 1}", 16), std::make_pair(12, std::string("{\"a\": 1}")));
  EXPECT_EQ(SplitSrunLabel("0:", 1), std::make_pair(0, std::string()));
  EXPECT_FALSE(SplitSrunLabel("4: out of range", 4).has_value());
  EXPECT_FALSE(SplitSrunLabel("srun: error: pn1: task 0: Killed", 4).has_value());
  EXPECT_FALSE(SplitSrunLabel("no label", 4).has_value());
  EXPECT_FALSE(SplitSrunLabel("", 4).has_value());
}

std::vector<SrunTaskLine> Lines(const std::vector<std::string>& text) {
  std::vector<SrunTaskLine> lines;
  for (const std::string& t : text) {
    if (auto l = ParseSrunTaskLine(t)) lines.push_back(*l);
  }
  return lines;
}

TEST(FailedTaskBySrunWords, ASignalBeforeAnExitBeforeTerminated) {
  const auto lines = Lines({"srun: error: pn1: tasks 0-1: Terminated",
                            "srun: error: pn1: task 2: Exited with exit code 1",
                            "srun: error: pn2: task 3: Killed"});
  std::optional<FailedTask> f = FailedTaskBySrunWords(lines);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->task, 3);
  EXPECT_EQ(f->line->node, "pn2");
  f = FailedTaskBySrunWords(Lines({"srun: error: pn1: tasks 0-1: Terminated",
                                   "srun: error: pn2: tasks 2-3: Exited with exit code 1"}));
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->task, 2);
  f = FailedTaskBySrunWords(Lines({"srun: error: pn1: tasks 1-2: Terminated"}));
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->task, 1);
  EXPECT_FALSE(FailedTaskBySrunWords({}).has_value());
}

TEST(FirstFailedTask, PassesInOrderThenLinesThenTasks) {
  const auto lines = Lines(
      {"srun: error: pn1: tasks 0-1: Exited with exit code 1", "srun: error: pn2: task 2: Killed"});
  // Pass 0 takes only task 2; pass 1 anything.
  auto f = FirstFailedTask(
      lines, 2, [](int pass, const SrunTaskLine&, int t) { return pass == 1 || t == 2; });
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->task, 2);
  f = FirstFailedTask(lines, 2,
                      [](int pass, const SrunTaskLine&, int t) { return pass == 1 && t >= 1; });
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->task, 1);
  EXPECT_EQ(f->line->node, "pn1");
  EXPECT_FALSE(FirstFailedTask(lines, 2, [](int, const SrunTaskLine&, int) { return false; }));
}

}  // namespace
}  // namespace pilot::launch
