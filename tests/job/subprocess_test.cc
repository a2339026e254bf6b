// RunCommand: output, exit status, environment, time limit and output cap.
#include "job/subprocess.h"

#include <gtest/gtest.h>

#include <chrono>

namespace pilot {
namespace {

using job::CommandSpec;

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

}  // namespace
}  // namespace pilot
