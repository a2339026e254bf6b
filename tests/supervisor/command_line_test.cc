// pilot-supervisor's command line.
#include "supervisor/command_line.h"

#include <gtest/gtest.h>

#include <vector>

namespace pilot::supervisor {
namespace {

Result<CommandLine> Parse(std::vector<std::string> args) {
  args.insert(args.begin(), "pilot-supervisor");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  return ParseCommandLine(static_cast<int>(argv.size()), argv.data());
}

TEST(SupervisorCommandLine, AllFlags) {
  Result<CommandLine> c = Parse({"--job", "42", "--uid", "1000", "--gid", "100", "--policy", "/p",
                                 "--state-dir", "/s", "--runner", "/r", "--stage", "node", "--out",
                                 "/o", "--cwd", "/w", "--channel", "3", "--job-env", "4"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->job_id, 42);
  EXPECT_EQ(c->uid, 1000);
  EXPECT_EQ(c->stage, "node");
  EXPECT_EQ(c->channel, 3);
  EXPECT_EQ(c->job_env, 4);
  EXPECT_EQ(c->out, "/o");
}

TEST(SupervisorCommandLine, ContainerTaskTakesTheCommandAfterTheSeparator) {
  Result<CommandLine> c =
      Parse({"--container-task", "--job", "42", "--uid", "1000", "--gid", "100", "--node", "pn2",
             "--step", "3", "--task", "5", "--channel", "3", "--", "/bin/sh", "-c", "--job 1"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->container_task);
  EXPECT_EQ(c->node, "pn2");
  EXPECT_EQ(c->step_id, 3);
  EXPECT_EQ(c->task_id, 5);
  EXPECT_EQ(c->command, (std::vector<std::string>{"/bin/sh", "-c", "--job 1"}));
}

TEST(SupervisorCommandLine, BoundRunNamesItsPilot) {
  Result<CommandLine> c = Parse({"--job", "43", "--uid", "1000", "--gid", "100", "--bound-run", "42",
                                 "--channel", "3", "--job-env", "4"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->bound_run, 42);
  c = Parse({"--job", "43", "--uid", "1000", "--gid", "100"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->bound_run, 0) << "a pilot, not a bound run";
}

TEST(SupervisorCommandLine, Refusals) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const Case cases[] = {
      {{"--uid", "1", "--gid", "1"}, "--job, --uid and --gid are required"},
      {{"--job", "x", "--uid", "1", "--gid", "1"}, "pilot: --job: expected a number"},
      {{"--job", "1", "--uid", "1", "--gid", "1", "--stage", "both"}, "must be single, node or all"},
      {{"--job", "1", "--uid", "1", "--gid", "1", "--out", "rel"}, "must be an absolute path"},
      {{"--job", "1", "--uid", "1", "--gid", "1", "--bogus", "1"}, "--bogus: unknown flag"},
      {{"--job"}, "--job: needs a value"},
      {{"--container-task", "--job", "1", "--uid", "1", "--gid", "1"}, "needs the task's command"},
      {{"--job", "1", "--uid", "1", "--gid", "1", "--", "x"}, "only --container-task takes a command"},
      {{"--job", "1", "--uid", "1", "--gid", "1", "--bound-run", "0"}, "--bound-run: expected a number"},
      {{"--container-task", "--job", "1", "--uid", "1", "--gid", "1", "--bound-run", "7", "--", "x"},
       "--bound-run: not with --container-task"},
      {{"--container-task", "--job", "1", "--uid", "1", "--gid", "1", "--node", "../x", "--", "x"},
       "not a node name"},
  };
  for (const Case& c : cases) {
    Result<CommandLine> r = Parse(c.args);
    ASSERT_FALSE(r.ok()) << c.message;
    EXPECT_NE(r.status().ToString().find(c.message), std::string::npos) << r.status().ToString();
  }
}

}  // namespace
}  // namespace pilot::supervisor
