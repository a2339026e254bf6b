// DecideTask: a job that asked for a pilot runs the pilot only with its
// lock; without one (its prolog could not write it) or with a lock that
// refuses the pilot (state_space_low), the task refuses, so the job's own
// command never runs in place of the pilot. Only another node of a job of
// several, which holds its own record of the job, runs a step's command.
#include "spank_plugin/task_role.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "job/reserve.h"

namespace pilot::spank {
namespace {

namespace fs = std::filesystem;

class DecideTaskTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // The lock must be root's for the task to take it.
    if (geteuid() != 0) GTEST_SKIP() << "the lock is root's";
    char tmpl[] = "/tmp/pilot-task-role-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    fs::create_directories(layout().Job(42).dir);
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  job::StateLayout layout() const { return job::StateLayout(dir_); }

  static Lock LockOf(int64_t job, uint32_t uid) {
    Lock l;
    l.instance = "0123456789abcdef0123456789abcdef";
    l.job.id = job;
    l.job.uid = uid;
    l.config.path = "/home/alice/tiny.toml";
    l.seeds.source = "config";
    l.container.method = "none";
    l.created = "2026-11-30T04:05:06Z";
    return l;
  }
  void Write(const std::string& path, const Lock& l) {
    fs::create_directories(fs::path(path).parent_path());
    std::ofstream(path) << LockToJson(l);
  }

  std::string dir_;
};

// Proves: the lock of this job and uid starts the pilot, and is returned.
TEST_F(DecideTaskTest, ALockOfThisJobStartsThePilot) {
  Write(layout().Job(42).lock, LockOf(42, 1001));
  TaskDecision d = DecideTask(layout(), 42, 1001, true, "n1");
  EXPECT_EQ(d.role, TaskRole::kPilot);
  EXPECT_EQ(d.lock.instance, "0123456789abcdef0123456789abcdef");
}

// Proves: the case. A pilot job whose prolog could not write its
// lock (a full state file system) refuses, with a message that says so;
// before, the job's batch command ran in place of the pilot.
TEST_F(DecideTaskTest, APilotJobWithoutALockRefuses) {
  TaskDecision d = DecideTask(layout(), 42, 1001, true, "n1");
  EXPECT_EQ(d.role, TaskRole::kRefuse);
  EXPECT_EQ(d.message.rfind("job 42: no lock for this pilot job (", 0), 0u) << d.message;
  EXPECT_NE(d.message.find("neither the pilot nor the job's command runs"), std::string::npos)
      << d.message;
  // The same without a node name, and without the job's folder at all.
  fs::remove_all(layout().Job(42).dir);
  EXPECT_EQ(DecideTask(layout(), 42, 1001, true, "").role, TaskRole::kRefuse);
}

// Proves: a job that did not ask for a pilot runs its own command, a lock
// or none.
TEST_F(DecideTaskTest, AJobWithoutPilotRunsItsCommand) {
  EXPECT_EQ(DecideTask(layout(), 42, 1001, false, "n1").role, TaskRole::kOwnCommand);
  Write(layout().Job(42).lock, LockOf(42, 1001));
  EXPECT_EQ(DecideTask(layout(), 42, 1001, false, "n1").role, TaskRole::kOwnCommand);
}

// Proves: a lock that refuses the pilot for want of space (the prolog's
// state_space_low) refuses the task, with the prolog's sentence.
TEST_F(DecideTaskTest, ALockBelowTheFloorRefusesWithItsReason) {
  Lock l = LockOf(42, 1001);
  l.problems.push_back({job::kProblemStateSpaceLow,
                        "the state directory's file system has 3 MiB "
                        "free, below the site's floor of 64 MiB"});
  Write(layout().Job(42).lock, l);
  TaskDecision d = DecideTask(layout(), 42, 1001, true, "n1");
  EXPECT_EQ(d.role, TaskRole::kRefuse);
  EXPECT_NE(d.message.find("job 42: pilot refused: the state directory's file system has 3 MiB"),
            std::string::npos)
      << d.message;
  // Another problem (the user's) still runs the pilot, which ends NO-GO.
  l.problems = {{"config_changed", "edited"}};
  Write(layout().Job(42).lock, l);
  EXPECT_EQ(DecideTask(layout(), 42, 1001, true, "n1").role, TaskRole::kPilot);
}

// Proves: a lock naming another job or user, or one that is not root's,
// refuses (as before), naming what it found.
TEST_F(DecideTaskTest, ALockOfAnotherJobOrUserRefuses) {
  Write(layout().Job(42).lock, LockOf(42, 2002));
  TaskDecision d = DecideTask(layout(), 42, 1001, true, "n1");
  EXPECT_EQ(d.role, TaskRole::kRefuse);
  EXPECT_NE(d.message.find("is not this job's (job 42, uid 2002)"), std::string::npos) << d.message;
  Write(layout().Job(42).lock, LockOf(42, 1001));
  ASSERT_EQ(::chown(layout().Job(42).lock.c_str(), 1001, 1001), 0);
  EXPECT_EQ(DecideTask(layout(), 42, 1001, true, "n1").role, TaskRole::kRefuse);
}

// Proves: on another node of a job of several (no lock here, the node's own
// record of the job there), a step's first task runs its command; a record
// of another node, or of another job, does not count.
TEST_F(DecideTaskTest, AnotherNodeOfTheJobRunsItsCommand) {
  Lock mine = LockOf(42, 1001);
  mine.instance = "";
  mine.job.host = "pn2";
  Write(layout().NodeRecordFile(42, "pn2"), mine);
  EXPECT_EQ(DecideTask(layout(), 42, 1001, true, "pn2").role, TaskRole::kOwnCommand);
  EXPECT_EQ(DecideTask(layout(), 42, 1001, true, "pn1").role, TaskRole::kRefuse)
      << "the first node, whose lock is missing, sees pn2's record in a shared folder";
  EXPECT_EQ(DecideTask(layout(), 42, 1001, true, "").role, TaskRole::kRefuse);
  EXPECT_EQ(DecideTask(layout(), 42, 2002, true, "pn2").role, TaskRole::kRefuse);
}

}  // namespace
}  // namespace pilot::spank
