// RunGroup with small shell programs (no Python): records read from the
// FIFO as they come, stdout lines as records through a pattern, hangs and
// floods ended or capped, failed ranks and their peers, standard error kept.
#include "supervisor/program/group.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>

#include "supervisor/program/judge.h"

namespace pilot::supervisor {
namespace {

class GroupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/pilot-group-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  RankLaunch Rank(int rank, const std::string& script) {
    RankLaunch r;
    r.rank = rank;
    r.argv = {"/bin/sh", "-c", script};
    r.metrics_fifo = dir_ + "/r" + std::to_string(rank) + ".fifo";
    EXPECT_EQ(mkfifo(r.metrics_fifo.c_str(), 0600), 0);
    r.env = {"PATH=/usr/bin:/bin", "PILOT_METRICS=" + r.metrics_fifo};
    return r;
  }
  GroupSpec Spec() {
    GroupSpec s;
    s.cwd = dir_;
    s.forward_stdout = -1;
    s.forward_stderr = -1;
    s.step_timeout_seconds = 5;
    s.exit_grace_seconds = 2;
    s.kill_grace_seconds = 1;
    return s;
  }
  std::string dir_;
};

TEST_F(GroupTest, RecordsArriveFromTheFifoInOrder) {
  GroupSpec s = Spec();
  s.ranks.push_back(Rank(0, "for i in 1 2 3; do echo '{\"step\": '$i', \"loss\": 2.5, \"x\": [1]}' >>\"$PILOT_METRICS\"; "
                            "sleep 0.1; done"));
  s.last_step = 3;
  GroupResult g = RunGroup(s);
  ASSERT_EQ(g.records.size(), 3u);
  EXPECT_EQ(g.records[2].step, 3);
  EXPECT_LE(g.records[0].arrived, g.records[2].arrived);
  EXPECT_EQ(g.ranks[0].exit_code, 0);
  EXPECT_FALSE(CheckPhase(g, PhaseExpect{"reference", 1, 3, 1, 5, false}).has_value());
}

TEST_F(GroupTest, AHungProgramIsEndedAfterTheTimeout) {
  GroupSpec s = Spec();
  s.step_timeout_seconds = 1;
  s.ranks.push_back(Rank(0, "echo '{\"step\": 1, \"loss\": 1}' >>\"$PILOT_METRICS\"; exec sleep 600"));
  const auto t0 = std::chrono::steady_clock::now();
  GroupResult g = RunGroup(s);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 20);
  EXPECT_TRUE(g.hung);
  EXPECT_EQ(g.hung_after_step, 1);
  EXPECT_TRUE(g.ranks[0].terminated);
}

TEST_F(GroupTest, AFloodIsCappedAndNamed) {
  GroupSpec s = Spec();
  s.max_records = 1000;
  s.ranks.push_back(Rank(0, "i=0; while [ $i -lt 5000 ]; do echo '{\"step\": 1, \"loss\": 1}'; i=$((i+1)); done >>\"$PILOT_METRICS\""));
  GroupResult g = RunGroup(s);
  EXPECT_EQ(g.records.size(), 1000u);
  EXPECT_EQ(g.dropped_records, 4000);
  auto p = CheckPhase(g, PhaseExpect{"reference", 1, 2, 1, 5, false});
  ASSERT_TRUE(p.has_value());
  EXPECT_NE(p->message.find("more than 1000 metrics records"), std::string::npos) << p->message;
}

TEST_F(GroupTest, StdoutLinesAreRecordsThroughAPattern) {
  GroupSpec s = Spec();
  s.loss_pattern.emplace("loss=([0-9.]+)");
  s.first_step = 5;
  s.ranks.push_back(Rank(0, "echo 'it 1 loss=3.5'; echo noise; echo 'it 2 loss=3.25'"));
  GroupResult g = RunGroup(s);
  ASSERT_EQ(g.records.size(), 2u);
  EXPECT_EQ(g.records[0].step, 5);
  EXPECT_EQ(g.records[1].step, 6);
  EXPECT_DOUBLE_EQ(g.records[1].loss, 3.25);
  EXPECT_NE(g.ranks[0].stdout_tail.find("noise"), std::string::npos);
}

TEST_F(GroupTest, AFailedRankEndsItsWaitingPeers) {
  GroupSpec s = Spec();
  s.ranks.push_back(Rank(0, "echo 'Traceback (most recent call last):' >&2; echo 'ValueError: bad shard' >&2; exit 3"));
  s.ranks.push_back(Rank(1, "exec sleep 600"));
  s.expected_ranks = 2;
  s.step_timeout_seconds = 60;
  const auto t0 = std::chrono::steady_clock::now();
  GroupResult g = RunGroup(s);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 20);
  ASSERT_EQ(g.ranks.size(), 2u);
  EXPECT_EQ(g.ranks[0].exit_code, 3);
  EXPECT_TRUE(g.ranks[1].terminated);
  auto p = CheckPhase(g, PhaseExpect{"reference", 1, 2, 2, 60, false});
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->rank, 0);
  EXPECT_NE(p->message.find("ValueError: bad shard"), std::string::npos) << p->message;
}

TEST_F(GroupTest, FinishedButLingeringProcessesAreEndedAfterTheLastStep) {
  GroupSpec s = Spec();
  s.last_step = 2;
  s.ranks.push_back(Rank(0, "echo '{\"step\": 1, \"loss\": 1}' >>\"$PILOT_METRICS\"; "
                            "echo '{\"step\": 2, \"loss\": 1}' >>\"$PILOT_METRICS\"; exec sleep 600"));
  GroupResult g = RunGroup(s);
  EXPECT_TRUE(g.after_last_step);
  EXPECT_TRUE(g.ranks[0].terminated);
  EXPECT_FALSE(CheckPhase(g, PhaseExpect{"reference", 1, 2, 1, 5, false}).has_value());
}

// An `srun --label` step as one process: its stdout lines are the records of
// the rank each label names, whatever rank the record itself claims.
TEST_F(GroupTest, AnSrunStepsLabelledLinesAreTheRecordsOfItsTasks) {
  GroupSpec s = Spec();
  s.last_step = 2;
  s.expected_ranks = 3;
  RankLaunch r = Rank(0, "for i in 1 2; do for t in 0 1 2; do "
                         "printf ' %s: {\"step\": %s, \"loss\": 2.%s, \"rank\": 9}\\n' $t $i $t; done; done; "
                         "echo 'srun: Job step created'; echo ' 1: a line of its own' >&2");
  r.srun_tasks = 3;
  s.ranks.push_back(r);
  GroupResult g = RunGroup(s);
  ASSERT_EQ(g.records.size(), 6u) << g.first_bad_record;
  EXPECT_EQ(g.bad_records, 0);
  for (int t = 0; t < 3; ++t) {
    auto steps = StepsOf(g, t);
    ASSERT_EQ(steps.size(), 2u) << "rank " << t;
    EXPECT_DOUBLE_EQ(steps.at(2).loss, 2.0 + 0.1 * t);
  }
  EXPECT_FALSE(CheckPhase(g, PhaseExpect{"reference", 1, 2, 3, 5, false}).has_value());
}

TEST_F(GroupTest, AnSrunStepsLossPatternIsCountedPerTask) {
  GroupSpec s = Spec();
  s.loss_pattern.emplace("loss=([0-9.]+)");
  s.expected_ranks = 2;
  RankLaunch r = Rank(0, "echo '0: loss=3.5'; echo '1: loss=4.5'; echo '1: loss=4.25'; echo 'loss=9'");
  r.srun_tasks = 2;
  s.ranks.push_back(r);
  GroupResult g = RunGroup(s);
  ASSERT_EQ(g.records.size(), 3u);
  EXPECT_EQ(StepsOf(g, 0).size(), 1u);
  auto one = StepsOf(g, 1);
  ASSERT_EQ(one.size(), 2u);
  EXPECT_DOUBLE_EQ(one.at(2).loss, 4.25);
}

// srun names the node and task that failed first; a task a signal ended
// is named before the peers that then exited, and before those srun ended.
TEST_F(GroupTest, AFailedSrunTaskIsNamedWithItsNode) {
  GroupSpec s = Spec();
  s.expected_ranks = 4;
  RankLaunch r = Rank(0, "echo '0: {\"step\": 1, \"loss\": 1}'; echo '2: RuntimeError: Connection reset by peer' >&2; "
                         "echo 'srun: error: pn1: task 0: Exited with exit code 1' >&2; "
                         "echo '3: died' >&2; echo 'srun: error: pn2: task 3: Killed' >&2; "
                         "echo 'srun: error: pn1: task 1: Terminated' >&2; exit 137");
  r.srun_tasks = 4;
  s.ranks.push_back(r);
  GroupResult g = RunGroup(s);
  ASSERT_EQ(g.ranks[0].srun_lines.size(), 3u);
  auto p = CheckPhase(g, PhaseExpect{"reference", 1, 5, 4, 60, false});
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->rank, 3);
  EXPECT_EQ(p->message, "rank 3 on pn2 of the program failed (srun: Killed) after step 1: died");
}

TEST_F(GroupTest, AnSrunThatStartedNoTaskSaysSo) {
  GroupSpec s = Spec();
  s.expected_ranks = 2;
  RankLaunch r = Rank(0, "echo 'srun: error: Unable to create step for job 7: Requested node configuration is not available' >&2; exit 1");
  r.srun_tasks = 2;
  s.ranks.push_back(r);
  GroupResult g = RunGroup(s);
  auto p = CheckPhase(g, PhaseExpect{"reference", 1, 5, 2, 60, false});
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->message, "srun, which started the ranks of the program, exited with status 1 before its first step: "
                        "srun: error: Unable to create step for job 7: Requested node configuration is not available");
}

}  // namespace
}  // namespace pilot::supervisor
