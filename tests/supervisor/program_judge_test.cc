// Judging a program's phase from what the supervisor saw (judge.h): each
// problem's kind and sentence, the resumed process against the reference,
// and the throughput of the timed steps.
#include "supervisor/program/judge.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "core/base/strings.h"
#include "core/records/srun_lines.h"

namespace pilot::supervisor {
namespace {

MetricRecord Rec(int64_t step, double loss, int rank = 0, double arrived = 0) {
  MetricRecord r;
  r.step = step;
  r.loss = loss;
  r.rank = rank;
  r.arrived = arrived;
  return r;
}

RankResult Exited(int rank, int code = 0) {
  RankResult r;
  r.rank = rank;
  r.started = true;
  r.exit_code = code;
  return r;
}

// One rank that reported steps first..last (loss 10 - step / 10) and exited 0.
GroupResult Ran(int64_t first, int64_t last, int ranks = 1) {
  GroupResult g;
  for (int rank = 0; rank < ranks; ++rank) g.ranks.push_back(Exited(rank));
  for (int64_t s = first; s <= last; ++s) {
    for (int rank = 0; rank < ranks; ++rank) g.records.push_back(Rec(s, 10 - s / 10.0, rank));
  }
  return g;
}

PhaseExpect Reference(int ranks = 1) {
  PhaseExpect e;
  e.process = "reference";
  e.first_step = 1;
  e.last_step = 20;
  e.ranks = ranks;
  e.step_timeout = 600;
  return e;
}

PhaseExpect Resumed() {
  PhaseExpect e = Reference();
  e.process = "resumed";
  e.first_step = 11;
  return e;
}

TEST(CheckPhase, ACleanPhaseHasNoProblem) {
  EXPECT_FALSE(CheckPhase(Ran(1, 20), Reference()));
  EXPECT_FALSE(CheckPhase(Ran(11, 20), Resumed()));
  EXPECT_FALSE(CheckPhase(Ran(1, 20, 2), Reference(2)));
}

// Every rank reported step N, then the supervisor had to end them: records
// in a process's name do not make it completed (a stopped process, whose
// records another wrote, ends the same way).
TEST(CheckPhase, ProcessesEndedAfterTheLastStepDidNotComplete) {
  GroupResult g = Ran(1, 20, 2);
  g.after_last_step = true;
  for (RankResult& r : g.ranks) {
    r.terminated = true;
    r.exit_code = -1;
    r.signal = 15;
  }
  auto p = CheckPhase(g, Reference(2));
  ASSERT_TRUE(p);
  EXPECT_EQ(p->kind, "error");
  EXPECT_EQ(p->rank, 0);
  EXPECT_NE(p->message.find("reported step 20 but did not exit by itself"), std::string::npos) << p->message;
}

TEST(CheckPhase, NotStarted) {
  GroupResult g;
  RankResult r;
  r.rank = 0;
  r.start_problem = "python3: not found in PATH";
  g.ranks.push_back(r);
  auto p = CheckPhase(g, Reference());
  ASSERT_TRUE(p);
  EXPECT_EQ(p->kind, "error");
  EXPECT_EQ(p->step, 1);
  EXPECT_EQ(p->message, "rank 0 could not be started: python3: not found in PATH");
}

TEST(CheckPhase, Hung) {
  GroupResult g = Ran(1, 7);
  g.hung = true;
  g.hung_seconds = 600;
  g.hung_after_step = 7;
  g.ranks[0].terminated = true;
  g.ranks[0].signal = 15;
  auto p = CheckPhase(g, Reference());
  ASSERT_TRUE(p);
  EXPECT_EQ(p->kind, "hang");
  EXPECT_EQ(p->step, 8);
  EXPECT_EQ(p->message,
            "the program hung: no metrics record for 600 s after step 7 (program.step_timeout = "
            "600 s); its processes were ended");
  g = Ran(1, 0);
  g.hung = true;
  g.hung_seconds = 601;
  auto from_start = CheckPhase(g, Resumed());
  ASSERT_TRUE(from_start);
  EXPECT_NE(from_start->message.find("the resumed process hung"), std::string::npos);
  EXPECT_NE(from_start->message.find("from its start"), std::string::npos);
}

TEST(CheckPhase, AFailedRankEndsWithItsException) {
  GroupResult g = Ran(1, 3);
  g.ranks[0].exit_code = 1;
  g.ranks[0].stderr_tail =
      "Traceback (most recent call last):\n  File \"train.py\", line 40, in <module>\n"
      "    batch = next(it)\nValueError: batch of 0 rows\n\n";
  auto p = CheckPhase(g, Reference());
  ASSERT_TRUE(p);
  EXPECT_EQ(p->kind, "error");
  EXPECT_EQ(p->step, 4);
  EXPECT_EQ(p->rank, 0);
  EXPECT_EQ(p->message,
            "the program (rank 0) exited with status 1 after step 3: ValueError: batch of 0 rows (at "
            "train.py:40 in <module>)");

  GroupResult killed = Ran(1, 0);
  killed.ranks[0].exit_code = -1;
  killed.ranks[0].signal = 9;
  auto k = CheckPhase(killed, Reference());
  ASSERT_TRUE(k);
  EXPECT_EQ(k->message, "the program (rank 0) was killed by signal 9 before its first step");
}

// The rank that failed is named, not the peers the supervisor ended.
TEST(CheckPhase, TheRankThatFailedNotThePeersEnded) {
  GroupResult g = Ran(1, 5, 2);
  g.ranks[0].terminated = true;
  g.ranks[0].exit_code = -1;
  g.ranks[0].signal = 15;
  g.ranks[1].exit_code = 3;
  g.ranks[1].stderr_tail = "RuntimeError: NCCL error\n";
  auto p = CheckPhase(g, Reference(2));
  ASSERT_TRUE(p);
  EXPECT_EQ(p->rank, 1);
  EXPECT_EQ(p->message, "the program (rank 1) exited with status 3 after step 5: RuntimeError: NCCL error");
}

TEST(CheckPhase, OutOfMemoryInItsVariants) {
  for (const char* last :
       {"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
        "RuntimeError: [enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: can't "
        "allocate memory: you tried to allocate 8589934592 bytes",
        "RuntimeError: HIP out of memory.", "MemoryError", "OSError: [Errno 12] Cannot allocate memory"}) {
    GroupResult g = Ran(1, 2);
    g.ranks[0].exit_code = 1;
    g.ranks[0].stderr_tail = std::string("Traceback (most recent call last):\n") + last + "\n";
    auto p = CheckPhase(g, Reference());
    ASSERT_TRUE(p) << last;
    EXPECT_EQ(p->kind, "oom") << last;
    EXPECT_EQ(p->step, 3);
    EXPECT_EQ(p->message, std::string("the program ran out of memory at step 3 (rank 0): ") + last);
  }
  GroupResult other = Ran(1, 2);
  other.ranks[0].exit_code = 1;
  other.ranks[0].stderr_tail = "KeyError: 'memory'\n";
  EXPECT_EQ(CheckPhase(other, Reference())->kind, "error");
}

// The exception that ended the process, not what it printed after (torch's
// exit warning, a launcher's banner); without a traceback, its last line.
TEST(CheckPhase, TheExceptionNotTheLastLine) {
  GroupResult g = Ran(11, 20);
  g.ranks[0].exit_code = 1;
  g.ranks[0].stderr_tail = R"py(Traceback (most recent call last):
  File "/home/u/train.py", line 120, in <module>
    main()
  File "/home/u/train.py", line 101, in main
    step = load_state(args.resume)
           ^^^^^^^^^^^^^^^^^^^^^^^
  File "/home/u/train.py", line 88, in load_state
    raise TypeError("RNG state must be a torch.ByteTensor")
TypeError: RNG state must be a torch.ByteTensor
[rank0]:[W1204 10:31:07.412893513 ProcessGroupNCCL.cpp:1575] Warning: WARNING: destroy_process_group() was not called before program exit, which can leak resources. For more info, please see https://pytorch.org/docs/stable/distributed.html#shutdown (function operator())
--------------------------------------------------------------------------
Primary job  terminated normally, but 1 process returned
a non-zero exit code. Per user-direction, the job has been aborted.
--------------------------------------------------------------------------
)py";
  auto p = CheckPhase(g, Resumed());
  ASSERT_TRUE(p);
  EXPECT_EQ(p->kind, "error");
  EXPECT_EQ(p->message,
            "the resumed process (rank 0) exited with status 1 after step 20: TypeError: RNG state "
            "must be a torch.ByteTensor (at /home/u/train.py:88 in load_state)");

  g.ranks[0].stderr_tail = "loading shard 3\nSegmentation fault (core dumped)\n";
  EXPECT_EQ(CheckPhase(g, Resumed())->message,
            "the resumed process (rank 0) exited with status 1 after step 20: Segmentation fault "
            "(core dumped)");
}

// Of several ranks that failed on their own, the first to end is named and
// the others counted; those the supervisor ended are not.
TEST(CheckPhase, TheFirstRankToFail) {
  GroupResult g = Ran(1, 5, 5);
  const char* peer =
      "Traceback (most recent call last):\n  File \"/home/u/train.py\", line 70, in main\n"
      "    dist.all_reduce(loss)\nRuntimeError: Connection closed by peer [10.0.0.2]:5921\n";
  for (RankResult& r : g.ranks) {
    r.exit_code = 1;
    r.wall_seconds = 61.5 + r.rank;
    r.stderr_tail = peer;
  }
  g.ranks[3].wall_seconds = 60.25;
  g.ranks[3].stderr_tail =
      "Traceback (most recent call last):\n  File \"/home/u/data.py\", line 12, in __next__\n"
      "    raise StopIteration(f\"shard {self.shard} is empty\")\nStopIteration: shard 3 is empty\n";
  g.ranks[4].terminated = true;
  g.ranks[4].exit_code = -1;
  g.ranks[4].signal = 15;
  auto p = CheckPhase(g, Reference(5));
  ASSERT_TRUE(p);
  EXPECT_EQ(p->rank, 3);
  EXPECT_EQ(p->message,
            "the program (rank 3) exited with status 1 after step 5: StopIteration: shard 3 is empty (at "
            "/home/u/data.py:12 in __next__); rank 3 failed first; 3 other ranks failed after it");
  // Two that ended together: the lower rank.
  g.ranks[1].wall_seconds = 60.25;
  EXPECT_EQ(CheckPhase(g, Reference(5))->rank, 1);
  g.ranks[0].exit_code = g.ranks[2].exit_code = 0;
  EXPECT_NE(CheckPhase(g, Reference(5))->message.find("; rank 1 failed first; 1 other rank failed after it"),
            std::string::npos);
}

// A process that started its own workers (torchrun): the worker's rank
// from torchrun's table.
TEST(CheckPhase, TheWorkerRankOfTorchrun) {
  GroupResult g = Ran(1, 3);
  g.ranks[0].exit_code = 1;
  g.ranks[0].stderr_tail = R"py(Traceback (most recent call last):
  File "/home/u/venv/lib/python3.11/site-packages/torch/distributed/launcher/api.py", line 246, in launch_agent
    raise ChildFailedError(
torch.distributed.elastic.multiprocessing.errors.ChildFailedError: 
============================================================
train.py FAILED
------------------------------------------------------------
Root Cause (first observed failure):
[1]:
  time      : 2026-12-04_10:31:18
  host      : gpu01
  rank      : 1 (local_rank: 1)
  exitcode  : 1 (pid: 41822)
  error_file: /tmp/torchelastic_x1/none_0/attempt_0/1/error.json
  traceback : Traceback (most recent call last):
    File "/home/u/train.py", line 4, in load
      raise FileNotFoundError(2, "No such file or directory", path)
  FileNotFoundError: [Errno 2] No such file or directory: '/data/shard-00001.bin'
  
============================================================
)py";
  EXPECT_EQ(CheckPhase(g, Reference())->message,
            "the program (rank 0) exited with status 1 after step 3: rank 1: FileNotFoundError: [Errno "
            "2] No such file or directory: '/data/shard-00001.bin' (at /home/u/train.py:4 in load)");
}

// An srun step's failed task: its own lines of the step's stream.
TEST(CheckPhase, AnSrunTasksOwnException) {
  GroupResult g = Ran(1, 1, 2);
  g.ranks.resize(1);
  RankResult& r = g.ranks[0];
  r.exit_code = 1;
  r.srun_tasks = 2;
  r.stderr_tail = "0: Traceback (most recent call last):\n1: Traceback (most recent call last):\n"
                  "0:   File \"/home/u/train.py\", line 70, in main\n"
                  "1:   File \"/home/u/train.py\", line 31, in main\n"
                  "1: ValueError: seq_len 4096 exceeds the model's 2048\n"
                  "0: RuntimeError: Connection closed by peer\n"
                  "srun: error: pn2: task 1: Exited with exit code 1\n"
                  "srun: error: pn1: task 0: Exited with exit code 1\n";
  for (std::string_view line : SplitLines(r.stderr_tail)) {
    if (auto t = ParseSrunTaskLine(std::string(line))) r.srun_lines.push_back(*t);
  }
  auto p = CheckPhase(g, Reference(2));
  ASSERT_TRUE(p);
  EXPECT_EQ(p->rank, 1);
  EXPECT_EQ(p->message,
            "rank 1 on pn2 of the program failed (srun: Exited with exit code 1) after step 1: "
            "ValueError: seq_len 4096 exceeds the model's 2048 (at /home/u/train.py:31 in main)");
}

// The exception decides whether it ran out of memory; the words of the
// tail only without one.
TEST(CheckPhase, OutOfMemoryByTheException) {
  GroupResult g = Ran(1, 2);
  g.ranks[0].exit_code = 1;
  g.ranks[0].stderr_tail =
      "[W CUDACachingAllocator] retrying after out of memory\nTraceback (most recent call last):\n"
      "  File \"/home/u/train.py\", line 9, in main\nKeyError: 'lr'\n";
  EXPECT_EQ(CheckPhase(g, Reference())->kind, "error");
  g.ranks[0].stderr_tail =
      "Traceback (most recent call last):\n  File \"/home/u/train.py\", line 52, in step\n"
      "    loss.backward()\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
      "wandb: Find logs at: ./wandb/run-1/logs\n";
  auto p = CheckPhase(g, Reference());
  ASSERT_TRUE(p);
  EXPECT_EQ(p->kind, "oom");
  EXPECT_EQ(p->message,
            "the program ran out of memory at step 3 (rank 0): torch.OutOfMemoryError: CUDA out of "
            "memory. Tried to allocate 2.00 GiB (at /home/u/train.py:52 in step)");
}

// Frameworks' warnings about a restore follow the error as hints.
TEST(CheckPhase, HintsAfterTheError) {
  GroupResult g = Ran(11, 14);
  g.ranks[0].exit_code = 1;
  g.ranks[0].stderr_tail =
      "/home/u/venv/lib/python3.11/site-packages/lightning/pytorch/loops/training_epoch_loop.py:161: "
      "You're resuming from a checkpoint that ended before the epoch ended and your dataloader is "
      "not resumable. This can cause unreliable results if further training is done.\n"
      "Traceback (most recent call last):\n  File \"/home/u/train.py\", line 40, in <module>\n"
      "ValueError: batch of 0 rows\n";
  EXPECT_EQ(CheckPhase(g, Resumed())->message,
            "the resumed process (rank 0) exited with status 1 after step 14: ValueError: batch of 0 "
            "rows (at /home/u/train.py:40 in <module>); hint: the program printed that its data "
            "loader cannot resume mid-epoch: the data position is probably not restored");
}

TEST(CheckPhase, NoRecords) {
  GroupResult g = Ran(1, 0);
  auto p = CheckPhase(g, Reference());
  ASSERT_TRUE(p);
  EXPECT_EQ(p->kind, "protocol");
  EXPECT_EQ(p->message,
            "the program wrote no metrics records to PILOT_METRICS (call slurm_pilot.step() after "
            "each optimizer step, or set program.loss_pattern)");
  g.bad_records = 2;
  g.first_bad_record = "metrics record: \"loss\" is missing";
  EXPECT_EQ(CheckPhase(g, Reference())->message,
            "the program wrote no metrics records to PILOT_METRICS; 2 refused, the first: metrics "
            "record: \"loss\" is missing");
  PhaseExpect pattern = Reference();
  pattern.loss_pattern = true;
  EXPECT_EQ(CheckPhase(Ran(1, 0), pattern)->message,
            "the program printed no line that program.loss_pattern matches");
}

TEST(CheckPhase, NonFiniteLoss) {
  GroupResult g = Ran(1, 20);
  g.records[4].loss = std::nan("");
  auto p = CheckPhase(g, Reference());
  ASSERT_TRUE(p);
  EXPECT_EQ(p->kind, "nan");
  EXPECT_EQ(p->step, 5);
  EXPECT_EQ(p->message, "loss is nan at step 5 (rank 0)");
  g.records[4].loss = -INFINITY;
  EXPECT_EQ(CheckPhase(g, Reference())->message, "loss is -inf at step 5 (rank 0)");
}

TEST(CheckPhase, ProtocolBreaches) {
  auto restarted = CheckPhase(Ran(1, 20), Resumed());
  ASSERT_TRUE(restarted);
  EXPECT_EQ(restarted->kind, "protocol");
  EXPECT_EQ(restarted->step, 1);
  EXPECT_EQ(restarted->message,
            "the resumed process reported step 1 first, not 11: it did not restore from "
            "PILOT_RESUME_DIR");
  EXPECT_EQ(CheckPhase(Ran(2, 20), Reference())->message, "the first step reported is 2, not 1");

  GroupResult gap = Ran(1, 20);
  gap.records.erase(gap.records.begin() + 2);  // step 3
  auto g = CheckPhase(gap, Reference());
  ASSERT_TRUE(g);
  EXPECT_EQ(g->step, 3);
  EXPECT_EQ(g->message, "rank 0 reported no step 3 (its steps jump to 4)");

  auto early = CheckPhase(Ran(1, 15), Reference());
  ASSERT_TRUE(early);
  EXPECT_EQ(early->step, 16);
  EXPECT_EQ(early->message, "the program (rank 0) stopped after step 15 of 20 (PILOT_STEPS)");

  GroupResult one_rank = Ran(1, 20);
  one_rank.ranks.push_back(Exited(1));
  auto silent = CheckPhase(one_rank, Reference(2));
  ASSERT_TRUE(silent);
  EXPECT_EQ(silent->rank, 1);
  EXPECT_EQ(silent->message, "rank 1 of the program reported no step");
}

RestoreRule Rule(bool bitwise, double floor) {
  RestoreRule r;
  r.bitwise = bitwise;
  r.noise.floor = floor;
  r.noise.first = 1e-4;
  r.noise.margin = 10;
  return r;
}

TEST(CompareResumed, BitwiseEqual) {
  RestoreComparison c = CompareResumed(Ran(1, 20), Ran(11, 20), nullptr, 10, 20, 1, Rule(true, 1e-3));
  EXPECT_TRUE(c.info.ran);
  EXPECT_TRUE(c.info.equal) << c.info.detail;
  EXPECT_EQ(c.info.mode, "bitwise");
  EXPECT_EQ(c.info.tolerance, 0);
  EXPECT_EQ(c.info.from_step, 10);
  EXPECT_EQ(c.info.to_step, 20);
  EXPECT_EQ(c.info.resumed_losses.size(), 10u);
  EXPECT_EQ(c.info.max_abs_loss_diff, 0);
  EXPECT_EQ(c.info.detail, "");
  EXPECT_FALSE(c.lr_compared);
  EXPECT_FALSE(c.eval_compared);
}

TEST(CompareResumed, ToleranceAndTheFirstDivergentStep) {
  GroupResult res = Ran(11, 20);
  for (MetricRecord& r : res.records) r.loss *= 1 + 1e-5;
  RestoreComparison near = CompareResumed(Ran(1, 20), res, nullptr, 10, 20, 1, Rule(false, 1e-3));
  EXPECT_TRUE(near.info.equal) << near.info.detail;
  EXPECT_EQ(near.info.mode, "tolerance");
  EXPECT_NEAR(near.info.max_rel_loss_diff, 1e-5, 1e-9);
  RestoreComparison exact = CompareResumed(Ran(1, 20), res, nullptr, 10, 20, 1, Rule(true, 1e-3));
  EXPECT_FALSE(exact.info.equal);

  // Steps 15 and 17 past the tolerance: undecided until a second resumed
  // process measures the noise.
  GroupResult off = Ran(11, 20);
  off.records[4].loss = 8.5 * (1 + 2e-3);  // step 15: the reference's is 10 - 1.5
  off.records[6].loss = 8.3 * (1 + 5e-3);  // step 17
  RestoreComparison c = CompareResumed(Ran(1, 20), off, nullptr, 10, 20, 1, Rule(false, 1e-3));
  EXPECT_FALSE(c.info.equal);
  EXPECT_TRUE(c.needs_repeat);
  EXPECT_EQ(c.info.noise_steps, 2);
  EXPECT_EQ(c.info.detail,
            "2 steps differ by more than the tolerance 0.001 and no second resumed process measured "
            "the noise");

  // A second process that spreads as far from the first: noise.
  GroupResult spread = Ran(11, 20);
  spread.records[3].loss = 8.6 * (1 - 1e-3);  // step 14
  spread.records[6].loss = 8.3 * (1 - 1e-3);
  c = CompareResumed(Ran(1, 20), off, &spread, 10, 20, 1, Rule(false, 1e-3));
  EXPECT_TRUE(c.info.equal) << c.info.detail;
  EXPECT_FALSE(c.needs_repeat);
  EXPECT_EQ(c.info.mode, "noise");
  EXPECT_EQ(c.info.noise_margin, 10);
  EXPECT_EQ(c.info.repeat_losses.size(), 10u);
  EXPECT_NEAR(c.info.noise_max_ratio, 8.3 * 5e-3 / (8.3 * 5e-3 + 8.3 * 1e-3), 1e-6);

  // A second process that repeats the first: the difference is the restore's.
  c = CompareResumed(Ran(1, 20), off, &off, 10, 20, 1, Rule(false, 1e-3));
  EXPECT_FALSE(c.info.equal);
  EXPECT_EQ(c.info.detail,
            "losses diverge after resume from step 15 (rank 0): reference 8.5, resumed 8.517 (rel "
            "diff 0.002, tolerance 0.001; a second resumed process repeated the first exactly: the "
            "difference is not the kernels' noise)");
  // One that stays much closer to the first than the reference does.
  GroupResult close = off;
  for (MetricRecord& r : close.records) r.loss *= 1 + 1e-5;
  c = CompareResumed(Ran(1, 20), off, &close, 10, 20, 1, Rule(false, 1e-3));
  EXPECT_FALSE(c.info.equal);
  EXPECT_NE(c.info.detail.find("from step 15 (rank 0)"), std::string::npos) << c.info.detail;
  EXPECT_NE(c.info.detail.find("times the spread of a second resumed process"), std::string::npos);

  // The first step after the resume is a forward of the restored state:
  // past restore_first_tolerance it fails without a second process.
  GroupResult first = Ran(11, 20);
  first.records[0].loss *= 1 + 5e-4;
  c = CompareResumed(Ran(1, 20), first, nullptr, 10, 20, 1, Rule(false, 1e-3));
  EXPECT_FALSE(c.info.equal);
  EXPECT_FALSE(c.needs_repeat);
  EXPECT_NEAR(c.info.first_rel_loss_diff, 5e-4, 1e-9);
  EXPECT_EQ(c.info.detail.find("the first step after the resume (11, rank 0) differs"), 0u) << c.info.detail;
}

TEST(CompareResumed, LearningRateAndEvalLoss) {
  GroupResult ref = Ran(1, 20), res = Ran(11, 20);
  for (MetricRecord& r : ref.records) r.lr = 1e-3 * static_cast<double>(r.step);
  for (MetricRecord& r : res.records) r.lr = 1e-3 * static_cast<double>(r.step - 10);  // restarted
  ref.records[19].eval_loss = 7.5;
  res.records[9].eval_loss = 7.5;
  RestoreComparison c = CompareResumed(ref, res, nullptr, 10, 20, 1, Rule(true, 0));
  EXPECT_TRUE(c.lr_compared);
  EXPECT_TRUE(c.eval_compared);
  EXPECT_FALSE(c.info.equal);
  EXPECT_EQ(c.info.detail,
            "the learning rate differs after resume at step 11: reference 0.011, resumed 0.001 (was "
            "the scheduler's state restored?)");

  for (MetricRecord& r : res.records) r.lr = 1e-3 * static_cast<double>(r.step);
  res.records[9].eval_loss = 7.625;
  c = CompareResumed(ref, res, nullptr, 10, 20, 1, Rule(true, 0));
  EXPECT_FALSE(c.info.equal);
  EXPECT_EQ(c.info.detail, "eval_loss differs after resume at step 20: reference 7.5, resumed 7.625");

  // Both the schedule and the losses: the schedule first, then the loss.
  res.records[9].eval_loss = 7.5;
  res.records[0].lr = 0.5;
  res.records[0].loss = 1;
  c = CompareResumed(ref, res, nullptr, 10, 20, 1, Rule(true, 0));
  EXPECT_EQ(c.info.detail.find("the learning rate differs after resume at step 11"), 0u);
  EXPECT_NE(c.info.detail.find("; losses diverge after resume from step 11"), std::string::npos);
}

TEST(CompareResumed, AMissingStep) {
  GroupResult res = Ran(11, 20);
  res.records.erase(res.records.begin() + 2);  // step 13
  RestoreComparison c = CompareResumed(Ran(1, 20), res, nullptr, 10, 20, 1, Rule(true, 0));
  EXPECT_FALSE(c.info.equal);
  EXPECT_EQ(c.info.detail, "step 13 is missing from the resumed run (rank 0)");
  c = CompareResumed(Ran(1, 18), Ran(11, 20), nullptr, 10, 20, 1, Rule(true, 0));
  EXPECT_EQ(c.info.detail, "step 19 is missing from the reference run (rank 0)");
  // Rank by rank.
  GroupResult two = Ran(11, 20, 2);
  two.records.pop_back();  // rank 1, step 20
  c = CompareResumed(Ran(1, 20, 2), two, nullptr, 10, 20, 2, Rule(true, 0));
  EXPECT_EQ(c.info.detail, "step 20 is missing from the resumed run (rank 1)");
}

// Steps after the warm-up, without the one after the checkpoint's (the
// save), timed by the records' arrival.
TEST(ThroughputOf, LeavesOutWarmUpAndTheCheckpointStep) {
  std::map<int64_t, MetricRecord> steps;
  const double arrived[] = {0, 0.5, 1.0, 1.1, 1.2, 1.3, 2.4, 2.5, 2.6, 2.7, 2.8};
  for (int64_t s = 1; s <= 10; ++s) {
    MetricRecord r = Rec(s, 1, 0, arrived[s]);
    r.tokens = 1000;
    steps[s] = r;
  }
  steps[2].data_wait_ms = 100;  // warm-up: left out
  steps[4].data_wait_ms = 3;
  steps[8].data_wait_ms = 5;
  const Throughput t = ThroughputOf(steps, 2, 5);
  EXPECT_EQ(t.timed_steps, 7);  // 3, 4, 5, 7, 8, 9, 10
  EXPECT_NEAR(t.step_ms, 100, 1e-6);
  EXPECT_NEAR(t.step_ms_median, 100, 1e-6);
  EXPECT_NEAR(t.tokens_per_second, 10000, 1e-3);
  EXPECT_NEAR(t.data_wait_ms, 4, 1e-9);
  EXPECT_NEAR(t.data_wait_max_ms, 5, 1e-9);

  // Without tokens: seq_len x micro_batch.
  for (auto& [s, r] : steps) {
    r.tokens.reset();
    r.seq_len = 100;
    r.micro_batch = 5;
  }
  EXPECT_NEAR(ThroughputOf(steps, 2, 5).tokens_per_second, 5000, 1e-3);
  // A gap is not timed across.
  steps.erase(8);
  EXPECT_EQ(ThroughputOf(steps, 2, 5).timed_steps, 5);  // 3, 4, 5, 7, 10: not 9, after no 8
  EXPECT_EQ(ThroughputOf({}, 2, 5).timed_steps, 0);
}

}  // namespace
}  // namespace pilot::supervisor
