// Workload processes: the report pipe, exit statuses, limits and stopping.
#include "supervisor/process.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <thread>

namespace pilot::supervisor {
namespace {

WorkloadSpec Shell(const std::string& script) {
  WorkloadSpec s;
  s.argv = {"/bin/sh", "-c", script};
  s.env = {"PATH=/usr/bin:/bin"};
  s.kill_grace_seconds = 1;
  return s;
}

TEST(RunWorkload, TheReportComesFromDescriptorThree) {
  Result<WorkloadOutcome> o = RunWorkload(Shell("printf '{\"a\": 1}' >&3; echo out; exit 3"), {});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->report, "{\"a\": 1}");
  EXPECT_EQ(o->exit_code, 3);
  EXPECT_EQ(o->signal, 0);
  EXPECT_GE(o->wall_seconds, 0.0);
}

TEST(RunWorkload, OnlyTheGivenEnvironment) {
  ::setenv("PILOT_SUPERVISOR_TEST_LEAK", "1", 1);
  Result<WorkloadOutcome> o =
      RunWorkload(Shell("printf '%s' \"${PILOT_SUPERVISOR_TEST_LEAK:-none}\" >&3"), {});
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->report, "none");
}

TEST(RunWorkload, ASignalAndAnOversizedReport) {
  WorkloadSpec s = Shell("head -c 5000 /dev/zero >&3; kill -9 $$");
  s.max_report_bytes = 1000;
  Result<WorkloadOutcome> o = RunWorkload(s, {});
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->signal, 9);
  EXPECT_EQ(o->exit_code, -1);
  EXPECT_TRUE(o->report_too_large);
  EXPECT_EQ(o->report.size(), 1000u);
}

// A descendant that keeps the pipe open does not hold the supervisor past
// the process's end.
TEST(RunWorkload, ADescendantHoldingThePipeDoesNotBlock) {
  const auto t0 = std::chrono::steady_clock::now();
  Result<WorkloadOutcome> o = RunWorkload(Shell("printf x >&3; (setsid sleep 30 >/dev/null 2>&1 &) ; exit 0"), {});
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->report, "x");
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 10.0);
}

TEST(RunWorkload, AStopRequestEndsTheProcessGroup) {
  std::thread stopper([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    RequestStop();
  });
  Result<WorkloadOutcome> o = RunWorkload(Shell("trap '' TERM; sleep 20 & wait; sleep 20"), {});
  stopper.join();
  ASSERT_TRUE(o.ok());
  EXPECT_TRUE(o->terminated);
  EXPECT_EQ(o->signal, SIGKILL);  // it ignored SIGTERM: SIGKILL after the grace period
  EXPECT_TRUE(StopRequested());
  ClearStopRequest();  // the other tests of this binary run after it
}

}  // namespace
}  // namespace pilot::supervisor
