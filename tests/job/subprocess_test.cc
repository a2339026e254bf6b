// RunCommand: output, exit status, environment, time limit and output cap.
#include "job/subprocess.h"

#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

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

// Gone, or a zombie nobody has reaped yet.
bool Ended(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;
  const size_t close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'Z';
}

// The caller killed with SIGKILL (an epilog at slurmd's time limit): the
// helper it was waiting for does not run on.
TEST(Subprocess, AHelperDiesWithItsCaller) {
  char tmpl[] = "/tmp/pilot-subprocess-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string pidfile = std::string(tmpl) + "/pid";
  const pid_t caller = fork();
  ASSERT_GE(caller, 0);
  if (caller == 0) {
    CommandSpec spec;
    spec.argv = {"/bin/sh", "-c", "echo $$ > " + pidfile + "; exec sleep 30"};
    spec.timeout_seconds = 60;
    (void)job::RunCommand(spec);
    _exit(0);
  }
  pid_t helper = 0;
  for (int i = 0; i < 100 && helper == 0; ++i) {
    std::ifstream in(pidfile);
    if (!(in >> helper)) helper = 0;
    if (helper == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_GT(helper, 0);
  ASSERT_FALSE(Ended(helper));
  kill(caller, SIGKILL);
  waitpid(caller, nullptr, 0);
  bool ended = false;
  for (int i = 0; i < 100 && !ended; ++i) {
    ended = Ended(helper);
    if (!ended) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(ended) << "helper " << helper << " outlived its killed caller";
  if (!ended) kill(helper, SIGKILL);
  std::filesystem::remove_all(tmpl);
}

// SIGTERM to the caller (slurmd at PrologEpilogTimeout sends it, then
// SIGKILL): the helper's whole group dies at once, the result says why, and
// nothing more starts. In a child process: the stop lasts for its life.
TEST(Subprocess, SigtermToTheCallerStopsItsHelpers) {
  char tmpl[] = "/tmp/pilot-subprocess-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string pids = std::string(tmpl) + "/pids";
  const pid_t caller = fork();
  ASSERT_GE(caller, 0);
  if (caller == 0) {
    job::StopCommandsOnTermination();
    CommandSpec spec;
    // Two processes in the helper's group, neither reacting to TERM.
    spec.argv = {"/bin/sh", "-c",
                 "trap '' TERM; sleep 30 & echo $$ $! > " + pids + "; wait; wait"};
    spec.timeout_seconds = 60;
    const auto t0 = std::chrono::steady_clock::now();
    auto r = job::RunCommand(spec);
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!r.ok() || !r->stopped || r->timed_out || took > 5) _exit(10);
    if (r->Describe(60) != "stopped: the caller received SIGTERM") _exit(11);
    auto again = job::RunCommand(spec);  // nothing starts after the stop
    if (!again.ok() || !again->stopped || again->exit_code != -1) _exit(12);
    _exit(0);
  }
  pid_t shell = 0, sleeper = 0;
  for (int i = 0; i < 100 && sleeper == 0; ++i) {
    std::ifstream in(pids);
    if (!(in >> shell >> sleeper)) sleeper = 0;
    if (sleeper == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_GT(sleeper, 0);
  kill(caller, SIGTERM);
  int status = 0;
  waitpid(caller, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "10: not stopped in time, 11: description, 12: started again";
  bool ended = false;
  for (int i = 0; i < 100 && !ended; ++i) {
    ended = Ended(shell) && Ended(sleeper);
    if (!ended) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(ended) << "the helper's group outlived the stop";
  kill(sleeper, SIGKILL);
  std::filesystem::remove_all(tmpl);
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
