// RunGroup with small shell programs: records read from the phase's socket
// as they come (a small Python writer connects, as the probe does), stdout
// lines as records through a pattern, hangs ended, floods and every other
// break of the protocol named, writers outside the phase refused, daemons
// that left their process group killed, failed ranks and their peers,
// standard error kept, the files a phase opened seen through fanotify.
#include "supervisor/program/group.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>

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
    std::ofstream(dir_ + "/send") << "#!/usr/bin/python3\n"
                                     "import os, socket, sys\n"
                                     "s = socket.socket(socket.AF_UNIX)\n"
                                     "s.connect(os.environ['PILOT_METRICS'])\n"
                                     "if os.environ.get('SEND_READY'):\n"
                                     "    open(os.environ['SEND_READY'], 'w').close()\n"
                                     "for line in sys.stdin.buffer:\n"
                                     "    s.sendall(line)\n"
                                     // Alive until the supervisor has read it all (its
                                     // end of the connection closes at our EOF): a writer
                                     // already gone when the supervisor looks cannot be
                                     // placed in the phase's process tree.
                                     "s.shutdown(socket.SHUT_WR)\n"
                                     "s.recv(1)\n";
    chmod((dir_ + "/send").c_str(), 0755);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  RankLaunch Rank(int rank, const std::string& script) {
    RankLaunch r;
    r.rank = rank;
    r.argv = {"/bin/sh", "-c", script};
    r.env = {"PATH=/usr/bin:/bin", "PILOT_METRICS=" + Socket(), "SEND=" + dir_ + "/send"};
    return r;
  }
  std::string Socket() const { return dir_ + "/m.sock"; }
  GroupSpec Spec() {
    GroupSpec s;
    s.metrics_socket = Socket();
    s.cwd = dir_;
    s.forward_stdout = -1;
    s.forward_stderr = -1;
    s.step_timeout_seconds = 5;
    s.exit_grace_seconds = 2;
    s.last_step_grace_seconds = 2;
    s.kill_grace_seconds = 1;
    return s;
  }
  std::string dir_;
};

TEST_F(GroupTest, RecordsArriveFromTheSocketInOrder) {
  GroupSpec s = Spec();
  s.ranks.push_back(Rank(0, "for i in 1 2 3; do echo '{\"step\": '$i', \"loss\": 2.5, \"x\": [1]}' | \"$SEND\"; "
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
  s.ranks.push_back(Rank(0, "echo '{\"step\": 1, \"loss\": 1}' | \"$SEND\"; exec sleep 600"));
  const auto t0 = std::chrono::steady_clock::now();
  GroupResult g = RunGroup(s);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 20);
  EXPECT_TRUE(g.hung);
  EXPECT_EQ(g.hung_after_step, 1);
  EXPECT_TRUE(g.ranks[0].terminated);
}

// The same step again and again is a protocol break, not a hang, and only
// the first record of the step stands.
TEST_F(GroupTest, AFloodOfOneStepIsAProtocolBreakNotAHang) {
  GroupSpec s = Spec();
  s.ranks.push_back(Rank(0, "i=0; while [ $i -lt 5000 ]; do echo '{\"step\": 1, \"loss\": '$i'}'; i=$((i+1)); done | \"$SEND\""));
  GroupResult g = RunGroup(s);
  ASSERT_EQ(g.records.size(), 1u);
  EXPECT_DOUBLE_EQ(g.records[0].loss, 0);
  EXPECT_EQ(g.protocol_breaks, 4999);
  EXPECT_FALSE(g.hung);
  auto p = CheckPhase(g, PhaseExpect{"reference", 1, 2, 1, 5, false});
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->kind, "protocol");
  EXPECT_NE(p->message.find("rank 0 reported step 1 twice"), std::string::npos) << p->message;
}

TEST_F(GroupTest, RecordsPastTheCapAreCountedNotKept) {
  GroupSpec s = Spec();
  s.max_records = 1000;
  s.ranks.push_back(Rank(0, "i=1; while [ $i -le 5000 ]; do echo '{\"step\": '$i', \"loss\": 1}'; i=$((i+1)); done | \"$SEND\""));
  GroupResult g = RunGroup(s);
  EXPECT_EQ(g.records.size(), 1000u);
  EXPECT_EQ(g.dropped_records, 4000);
  auto p = CheckPhase(g, PhaseExpect{"reference", 1, 2, 1, 5, false});
  ASSERT_TRUE(p.has_value());
  EXPECT_NE(p->message.find("more than 1000 metrics records"), std::string::npos) << p->message;
}

// Steps backwards, out of range, a rank out of range, another rank's step
// from a process of one rank, a line past 4095 bytes: each refused, named.
TEST_F(GroupTest, EveryBreakOfTheProtocolIsNamed) {
  GroupSpec s = Spec();
  s.last_step = 3;
  s.expected_ranks = 2;
  s.process_per_rank = true;
  const std::string big(5000, 'x');
  s.ranks.push_back(Rank(0, "printf '%s\\n' '{\"step\": 2, \"loss\": 1}' '{\"step\": 1, \"loss\": 1}' "
                            "'{\"step\": 9, \"loss\": 1}' '{\"step\": 3, \"loss\": 1, \"rank\": 1048576}' "
                            "'{\"step\": 3, \"loss\": 1, \"rank\": 1}' '{\"step\": 3, \"loss\": 1, \"pad\": \"" + big + "\"}' | \"$SEND\""));
  s.ranks.push_back(Rank(1, "true"));
  GroupResult g = RunGroup(s);
  ASSERT_EQ(g.records.size(), 1u);
  EXPECT_EQ(g.bad_records, 1);  // the rank past 2^20: refused, not credited to rank 0
  EXPECT_NE(g.first_bad_record.find("\"rank\" must be an integer"), std::string::npos) << g.first_bad_record;
  EXPECT_EQ(g.protocol_breaks, 4);
  ASSERT_EQ(g.protocol_break_examples.size(), 4u);
  EXPECT_EQ(g.protocol_break_examples[0], "rank 0 reported step 1 after step 2: steps only go forward");
  EXPECT_EQ(g.protocol_break_examples[1], "rank 0 reported step 9, past the last step 3");
  EXPECT_EQ(g.protocol_break_examples[2], "the process of rank 0 reported step 3 as rank 1");
  EXPECT_NE(g.protocol_break_examples[3].find("the protocol's limit is 4096"), std::string::npos);
}

// A process of the user that does not descend from the phase (here: one
// orphaned to init before the phase started) cannot write its records.
TEST_F(GroupTest, AWriterOutsideThePhaseIsRefusedAndNamed) {
  prctl(PR_SET_CHILD_SUBREAPER, 0);  // the outsider's parent is then init, not this test
  const std::string outsider =
      "(sleep 1; echo '{\"step\": 2, \"loss\": 0.5}' | PILOT_METRICS=" + Socket() + " " + dir_ +
      "/send) >/dev/null 2>&1 &";
  ASSERT_EQ(std::system(("/bin/sh -c \"" + outsider + "\"").c_str()), 0);
  GroupSpec s = Spec();
  s.last_step = 2;
  s.ranks.push_back(Rank(0, "echo '{\"step\": 1, \"loss\": 1}' | \"$SEND\"; sleep 3; "
                            "echo '{\"step\": 2, \"loss\": 1}' | \"$SEND\""));
  GroupResult g = RunGroup(s);
  ASSERT_EQ(g.records.size(), 2u);
  EXPECT_DOUBLE_EQ(g.records[1].loss, 1);
  EXPECT_EQ(g.outside_writers, 1);
  auto p = CheckPhase(g, PhaseExpect{"reference", 1, 2, 1, 5, false});
  ASSERT_TRUE(p.has_value());
  EXPECT_NE(p->message.find("a process outside the pilot tried to write"), std::string::npos) << p->message;
  EXPECT_NE(p->message.find("(send)"), std::string::npos) << p->message;
}

// A connection handed over (SCM_RIGHTS) to a process outside the job:
// records are credited by the process that sent them, so the outsider's
// step is refused and named, and the connection it wrote on is closed;
// the rank's own records, before and after, stand.
TEST_F(GroupTest, ARecordSentOnAHandedOverConnectionIsRefused) {
  prctl(PR_SET_CHILD_SUBREAPER, 0);  // the outsider's parent is then init, not this test
  const std::string handoff = dir_ + "/h.sock";
  std::ofstream(dir_ + "/outsider") << "#!/usr/bin/python3\n"
                                       "import os, socket, sys\n"
                                       "l = socket.socket(socket.AF_UNIX)\n"
                                       "l.bind(sys.argv[1])\n"
                                       "l.listen(1)\n"
                                       "c, _ = l.accept()\n"
                                       "_, fds, _, _ = socket.recv_fds(c, 16, 1)\n"
                                       "os.write(fds[0], b'{\"step\": 2, \"loss\": 0.5}\\n')\n"
                                       "c.send(b'w')\n";
  std::ofstream(dir_ + "/handover") << "#!/usr/bin/python3\n"
                                       "import os, socket, sys\n"
                                       "m = socket.socket(socket.AF_UNIX)\n"
                                       "m.connect(os.environ['PILOT_METRICS'])\n"
                                       "m.sendall(b'{\"step\": 1, \"loss\": 1}\\n')\n"
                                       "h = socket.socket(socket.AF_UNIX)\n"
                                       "h.connect(sys.argv[1])\n"
                                       "socket.send_fds(h, [b'x'], [m.fileno()])\n"
                                       "h.recv(1)\n"
                                       "n = socket.socket(socket.AF_UNIX)\n"
                                       "n.connect(os.environ['PILOT_METRICS'])\n"
                                       "n.sendall(b'{\"step\": 2, \"loss\": 1}\\n')\n"
                                       "n.shutdown(socket.SHUT_WR)\n"
                                       "n.recv(1)\n";
  chmod((dir_ + "/outsider").c_str(), 0755);
  chmod((dir_ + "/handover").c_str(), 0755);
  ASSERT_EQ(std::system(("/bin/sh -c \"(" + dir_ + "/outsider " + handoff + ") >/dev/null 2>&1 &\"").c_str()), 0);
  for (int i = 0; i < 100 && access(handoff.c_str(), F_OK) != 0; ++i) usleep(50 * 1000);
  GroupSpec s = Spec();
  s.last_step = 2;
  s.ranks.push_back(Rank(0, dir_ + "/handover " + handoff));
  GroupResult g = RunGroup(s);
  EXPECT_EQ(g.ranks[0].exit_code, 0) << g.ranks[0].stderr_tail;
  ASSERT_EQ(g.records.size(), 2u);
  EXPECT_DOUBLE_EQ(g.records[1].loss, 1);  // the rank's own step 2, not the outsider's
  EXPECT_EQ(g.protocol_breaks, 0);
  EXPECT_EQ(g.outside_writers, 1);
  ASSERT_EQ(g.outside_writer_examples.size(), 1u);
  EXPECT_NE(g.outside_writer_examples[0].find("(outsider)"), std::string::npos) << g.outside_writer_examples[0];
}

// A daemon that left the rank's process group (setsid, the parent gone) is
// still the phase's: its records are read (a duplicate step a break), and
// it does not outlive the phase.
TEST_F(GroupTest, AnEscapedDaemonIsReadKilledAndNamed) {
  GroupSpec s = Spec();
  s.last_step = 2;
  s.ranks.push_back(Rank(0, "setsid sh -c 'echo $$ >" + dir_ + "/daemon; sleep 1; "
                            "echo \"{\\\"step\\\": 1, \\\"loss\\\": 0.1, \\\"rank\\\": 0}\" | \"$SEND\"; exec sleep 600' "
                            "</dev/null >/dev/null 2>&1 & "
                            "echo '{\"step\": 1, \"loss\": 1}' | \"$SEND\"; sleep 2; "
                            "echo '{\"step\": 2, \"loss\": 1}' | \"$SEND\""));
  GroupResult g = RunGroup(s);
  EXPECT_EQ(g.ranks[0].exit_code, 0);
  EXPECT_EQ(g.records.size(), 2u);
  EXPECT_EQ(g.protocol_breaks, 1);
  ASSERT_EQ(g.outlived.size(), 1u);
  EXPECT_NE(g.outlived[0].find("(sleep)"), std::string::npos) << g.outlived[0];
  std::ifstream in(dir_ + "/daemon");
  pid_t daemon = 0;
  in >> daemon;
  ASSERT_GT(daemon, 1);
  EXPECT_NE(kill(daemon, 0), 0);
}

// The processes' CPU time while they report steps: a program that only
// sleeps between its records keeps no core busy; one that computes does.
TEST_F(GroupTest, CpuTimeWhileReportingIsMeasured) {
  // Each run's steps start once the sender is connected (on a loaded
  // machine its start could otherwise send several records in one burst).
  int runs = 0;
  auto run = [&](const std::string& between) {
    GroupSpec s = Spec();
    const std::string ready = dir_ + "/ready" + std::to_string(++runs);
    s.ranks.push_back(Rank(0, "{ while [ ! -e " + ready + " ]; do sleep 0.05; done; "
                              "for i in 1 2 3 4 5 6 7 8; do echo '{\"step\": '$i', \"loss\": 1}'; " +
                                  between + "; done; } | \"$SEND\""));
    s.ranks[0].env.push_back("SEND_READY=" + ready);
    return RunGroup(s);
  };
  GroupResult idle = run("sleep 0.6");
  ASSERT_GT(idle.busy_window_seconds, 2.0);
  EXPECT_LT(idle.busy_cpu_seconds / idle.busy_window_seconds, 0.05);
  // Work in the shell itself (no child per turn, whose time the parent
  // only collects when reaping it): about 0.45 CPU-s a step, 3 CPU-s
  // between the first record and the last however loaded the machine is
  // (its share of a core, busy_cpu / window, is the machine's to give).
  GroupResult busy = run("i=0; while [ $i -lt 500000 ]; do i=$((i + 1)); done");
  ASSERT_GT(busy.busy_window_seconds, 2.0);
  EXPECT_GT(busy.busy_cpu_seconds, 1.5) << "window " << busy.busy_window_seconds;
}

// Which watched files a process of the phase opened (root: fanotify).
TEST_F(GroupTest, TheFilesAPhaseOpenedAreSeen) {
  for (const char* f : {"/a", "/b"}) std::ofstream(dir_ + f) << "x";
  GroupSpec s = Spec();
  s.watch_files = {dir_ + "/a", dir_ + "/b"};
  // The opener is a child that lives a moment (cat, then the shell reaps
  // it): the supervisor holds its open until it has placed it in the phase,
  // so however briefly a reader lives, its open counts.
  s.ranks.push_back(Rank(0, "cat " + dir_ + "/a >/dev/null && cat " + dir_ + "/a >/dev/null"));
  GroupResult g = RunGroup(s);
  if (g.watch.problem.rfind("fanotify:", 0) == 0) GTEST_SKIP() << g.watch.problem;
  ASSERT_EQ(g.watch.opened.size(), 2u);
  EXPECT_TRUE(g.watch.opened[0]);
  EXPECT_FALSE(g.watch.opened[1]);
  EXPECT_EQ(g.watch.outside_opens, 0);
}

// An open of a watched file by another process of the user, outside the
// phase (its reads would fill the page cache as the phase's): counted and
// named. The opener is no descendant of the supervisor: a double fork
// while the supervisor is nobody's subreaper.
TEST_F(GroupTest, AnOpenByAnotherProcessOfTheUserIsNamed) {
  std::ofstream(dir_ + "/ckpt") << "x";
  prctl(PR_SET_CHILD_SUBREAPER, 0);
  const std::string script = "sleep 0.5; cat " + dir_ + "/ckpt >/dev/null";
  const pid_t middle = fork();
  ASSERT_GE(middle, 0);
  if (middle == 0) {
    if (fork() == 0) {
      execl("/bin/sh", "sh", "-c", script.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    _exit(0);
  }
  waitpid(middle, nullptr, 0);
  GroupSpec s = Spec();
  s.watch_files = {dir_ + "/ckpt"};
  s.ranks.push_back(Rank(0, "sleep 1.5"));
  GroupResult g = RunGroup(s);
  if (g.watch.problem.rfind("fanotify:", 0) == 0) GTEST_SKIP() << g.watch.problem;
  EXPECT_FALSE(g.watch.opened[0]);
  EXPECT_EQ(g.watch.outside_opens, 1);
  EXPECT_NE(g.watch.outside_example.find("(cat)"), std::string::npos) << g.watch.outside_example;
}

// More checkpoint files than the supervisor may hold open: each is still
// watched for opens by its path; only the reads go unmeasured, and say why.
TEST_F(GroupTest, FilesBeyondTheDescriptorLimitAreStillWatched) {
  std::vector<std::string> files;
  for (int i = 0; i < 40; ++i) {
    files.push_back(dir_ + "/shard" + std::to_string(i));
    std::ofstream(files.back()) << "x";
  }
  rlimit saved{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &saved), 0);
  const auto open_now = std::distance(std::filesystem::directory_iterator("/proc/self/fd"),
                                      std::filesystem::directory_iterator{});
  rlimit low = saved;
  low.rlim_cur = static_cast<rlim_t>(open_now + 8);  // the watch's own descriptor and a few files
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  WatchResult r;
  {
    CheckpointWatch watch(files, getuid());
    r = watch.result();
  }
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &saved), 0);
  if (r.problem.rfind("fanotify:", 0) == 0) GTEST_SKIP() << r.problem;
  EXPECT_EQ(r.problem, "");
  EXPECT_FALSE(r.read_measured);
  EXPECT_NE(r.read_problem.find("cannot open"), std::string::npos) << r.read_problem;
}

// What a phase read of the watched files before its first record: the
// pages the page cache holds again after the watch dropped them. Each file
// is cached in full first (as the supervisor's listing leaves it); the
// phase reads one whole, a page of another, and the third only after its
// first record.
TEST_F(GroupTest, WhatAPhaseReadBeforeItsFirstRecordIsSeen) {
  const std::string block(1 << 20, 'x');
  for (const char* f : {"/whole", "/page", "/later"}) {
    std::ofstream out(dir_ + f);
    for (int i = 0; i < 4; ++i) out << block;
  }
  for (const char* f : {"/whole", "/page", "/later"}) {
    std::ifstream in(dir_ + f);
    std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }
  GroupSpec s = Spec();
  s.watch_files = {dir_ + "/whole", dir_ + "/page", dir_ + "/later"};
  s.ranks.push_back(Rank(0, "cat " + dir_ + "/whole >/dev/null; head -c 4096 " + dir_ +
                                "/page >/dev/null; sleep 1.2; echo '{\"step\": 1, \"loss\": 1}' | \"$SEND\"; "
                                "sleep 1; cat " + dir_ + "/later >/dev/null"));
  GroupResult g = RunGroup(s);
  if (!g.watch.read_measured) GTEST_SKIP() << "the page cache does not tell here: " << g.watch.read_problem;
  ASSERT_EQ(g.watch.read.size(), 3u);
  EXPECT_EQ(g.watch.read[0], 4 << 20);
  EXPECT_GT(g.watch.read[1], 0);
  EXPECT_LT(g.watch.read[1], 1 << 20);  // a page and its read-ahead
  EXPECT_EQ(g.watch.read[2], 0);        // read after the first record
  EXPECT_GT(g.watch.first_record_seconds, 1.0);
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

TEST_F(GroupTest, ALingeringProcessIsEndedAfterTheLastStepAndNotCompleted) {
  GroupSpec s = Spec();
  s.last_step = 2;
  s.ranks.push_back(Rank(0, "echo '{\"step\": 1, \"loss\": 1}' | \"$SEND\"; "
                            "echo '{\"step\": 2, \"loss\": 1}' | \"$SEND\"; exec sleep 600"));
  GroupResult g = RunGroup(s);
  EXPECT_TRUE(g.after_last_step);
  EXPECT_TRUE(g.ranks[0].terminated);
  // Ended by the supervisor, it did not exit by itself: not completed.
  auto p = CheckPhase(g, PhaseExpect{"reference", 1, 2, 1, 5, false});
  ASSERT_TRUE(p.has_value());
  EXPECT_NE(p->message.find("did not exit by itself"), std::string::npos) << p->message;
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
