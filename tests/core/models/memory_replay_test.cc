// The replay of a pilot's allocator requests at another shape, on a toy
// training process whose requests are known at every shape: what the replay
// builds from two recorded micro-batches must be what the toy makes at the
// third.
#include "core/models/memory_replay.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/models/plan.h"
#include "tests/core/toy_requests.h"

namespace pilot {
namespace {

using toy::kMiB;
using toy::Toy;

constexpr int64_t kSeq = 1024;

AllocRecording RecordingMemoryReplay(const std::string& process, int micro_batch, const std::vector<AllocOp>& ops) {
  AllocRecording r;
  r.process = process;
  r.micro_batch = micro_batch;
  r.seq_len = kSeq;
  r.activation_checkpointing = false;
  r.requests = EncodeAllocOps(ops);
  return r;
}

// A GPU pilot at micro-batch 4 with its calibration at 2: the reference
// from its start through step 2, the calibration's last two steps.
SingleStage Pilot(int calibration_extra_alloc_at = -1) {
  SingleStage s;
  s.device = "cuda";
  s.shape.seq_len = kSeq;
  s.shape.micro_batch = 4;
  s.allocator_requests.push_back(RecordingMemoryReplay("reference", 4, Toy(4 * kSeq, 2)));
  s.allocator_requests.push_back(RecordingMemoryReplay(
      "memory_calibration", 2, TrimRecording(Toy(2 * kSeq, 3, calibration_extra_alloc_at), false, false, 2)));
  return s;
}

// The toy's own process at `micro_batch`, as the replay replays it.
AllocatorNeed ToyNeed(int micro_batch) {
  const std::vector<AllocOp> ops = Toy(int64_t{micro_batch} * kSeq, 8);
  size_t late = 0;
  int steps = 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].kind == AllocOp::kStep && ++steps == 5) late = i;
  }
  return NeedOf(ops, late);
}

TEST(MemoryReplay, TheRecordedShapeIsReplayedAsItRan) {
  std::string why;
  const std::optional<ReplayPrediction> p = PredictByReplay(Pilot(), kReplayedAllocConf, {kSeq, 4, false}, &why);
  ASSERT_TRUE(p.has_value()) << why;
  const AllocatorNeed toy = ToyNeed(4);
  EXPECT_EQ(p->histories, 10);
  EXPECT_EQ(p->most.allocated, toy.allocated);
  // The first-process history without moving anything is the toy's own.
  EXPECT_LE(p->least.at_full_speed, toy.at_full_speed);
  EXPECT_GE(p->most.at_full_speed, toy.at_full_speed);
  EXPECT_GE(p->most.unlimited, toy.unlimited);
  EXPECT_LE(p->least.to_run, p->most.to_run);
  EXPECT_NE(p->basis.find("the reference and memory_calibration steps (micro-batches 4 and 2, activation "
                          "checkpointing off) moved to 4 x 1024 tokens"),
            std::string::npos)
      << p->basis;
}

TEST(MemoryReplay, AnotherMicroBatchIsTheLineThroughTheTwo) {
  for (int mb : {8, 3, 1}) {
    std::string why;
    const std::optional<ReplayPrediction> p =
        PredictByReplay(Pilot(), kReplayedAllocConf, {kSeq, mb, false}, &why);
    ASSERT_TRUE(p.has_value()) << why;
    const AllocatorNeed toy = ToyNeed(mb);
    EXPECT_EQ(p->most.allocated, toy.allocated) << mb;
    EXPECT_EQ(p->least.allocated, toy.allocated) << mb;
    EXPECT_LE(p->least.at_full_speed, toy.at_full_speed) << mb;
    EXPECT_GE(p->most.at_full_speed, toy.at_full_speed) << mb;
  }
}

TEST(MemoryReplay, ItSaysWhyItCannotReplay) {
  auto why = [](const SingleStage& s, const std::string& conf, ReplayQuery q = {kSeq, 8, false}) {
    std::string w;
    EXPECT_FALSE(PredictByReplay(s, conf, q, &w).has_value());
    return w;
  };
  SingleStage cpu = Pilot();
  cpu.device = "cpu";
  EXPECT_EQ(why(cpu, kReplayedAllocConf), "the pilot ran on a CPU, which has no caching allocator");
  SingleStage none = Pilot();
  none.allocator_requests.clear();
  EXPECT_NE(why(none, kReplayedAllocConf).find("recorded no allocator requests"), std::string::npos);
  EXPECT_NE(why(Pilot(), "").find("allocator settings (\"\") are not the replayed"), std::string::npos);
  EXPECT_NE(why(Pilot(), "expandable_segments:True,max_split_size_mb:512").find("are not the replayed"),
            std::string::npos);
  EXPECT_EQ(why(Pilot(), kReplayedAllocConf, {kSeq, 8, true}),
            "no two micro-batches recorded with activation checkpointing on");
  SingleStage no_reference = Pilot();
  no_reference.allocator_requests[0].process = "recompute_check";
  EXPECT_EQ(why(no_reference, kReplayedAllocConf), "no recording of the reference process");
  SingleStage broken = Pilot();
  broken.allocator_requests[1].requests += " f999999";
  EXPECT_NE(why(broken, kReplayedAllocConf).find("allocator_requests[memory_calibration]"), std::string::npos);
  EXPECT_NE(why(Pilot(/*calibration_extra_alloc_at=*/2), kReplayedAllocConf).find("make different requests"),
            std::string::npos);
  SingleStage short_one = Pilot();
  short_one.allocator_requests[1].requests = EncodeAllocOps(TrimRecording(Toy(2 * kSeq, 3), false, false, 1));
  EXPECT_EQ(why(short_one, kReplayedAllocConf), "a recording holds fewer than two steps");
}

// A process too large to replay in bounded time (a user writes their own
// results.json) is refused before any replay.
TEST(MemoryReplay, AProcessTooLargeIsNotReplayed) {
  std::vector<AllocOp> ops = {{AllocOp::kAlloc, 4096}};
  int64_t made = 1;
  for (int step = 0; step < 2; ++step) {
    ops.push_back({AllocOp::kStep, 0});
    for (int i = 0; i < 70000; ++i) {
      ops.push_back({AllocOp::kAlloc, 512});
      ops.push_back({AllocOp::kFree, made++});
    }
  }
  SingleStage s = Pilot();
  s.allocator_requests[0].requests = EncodeAllocOps(ops);
  s.allocator_requests[1].requests = EncodeAllocOps(TrimRecording(ops, false, false, 2));
  std::string why;
  EXPECT_FALSE(PredictByReplay(s, kReplayedAllocConf, {kSeq, 8, false}, &why).has_value());
  EXPECT_NE(why.find("would make 1120009 allocator events; the replay replays at most 1048576"),
            std::string::npos)
      << why;
}

TEST(MemoryReplay, TrimmingKeepsTheNamedStepsAndTheirOwnFrees) {
  // setup: a0; step 1: a1, frees a0; step 2: a2, frees a1; step 3: a3, frees a2.
  const std::vector<AllocOp> ops = {
      {AllocOp::kAlloc, 10}, {AllocOp::kStep, 0}, {AllocOp::kAlloc, 11}, {AllocOp::kFree, 0},
      {AllocOp::kStep, 0},   {AllocOp::kAlloc, 12}, {AllocOp::kFree, 1},  {AllocOp::kStep, 0},
      {AllocOp::kAlloc, 13}, {AllocOp::kFree, 2}};
  EXPECT_EQ(EncodeAllocOps(TrimRecording(ops, false, false, 2)), "s a12 s a13 f2");
  EXPECT_EQ(EncodeAllocOps(TrimRecording(ops, true, true, 1)), "a10 s a11 f2 s a13");
  EXPECT_EQ(TrimRecording(ops, true, true, 3), ops);
}

TEST(MemoryReplay, ThePlanPredictsWhatTheReplayNeeds) {
  HardwareCatalog cat;
  cat.gpus = {GpuType{"H200-141", int64_t{140} << 30, 4.8, 989, "NVLink 4", 900, "cuda", 4.0, "", "", true}};
  Config cfg;
  cfg.run.seq_len = kSeq;
  cfg.run.micro_batch = 4;
  cfg.run.nodes = 1;
  cfg.run.gpus_per_node = 1;
  cfg.run.target_steps = 100;
  cfg.hardware.candidates = {"H200-141"};
  cfg.training.alloc_conf = kReplayedAllocConf;
  SingleStage s = Pilot();
  s.status = "ok";
  s.shape.params = 100000000;
  s.shape.precision = "bf16";
  s.memory.device = "cuda";
  s.memory.peak_allocated_bytes = int64_t{2} << 30;
  s.memory.peak_reserved_bytes = int64_t{2} << 30;
  s.memory.device_used_bytes = (int64_t{2} << 30) + 700 * kMiB;
  PlanQuery q;
  q.micro_batch = 8;
  Result<Plan> plan = MakePlan(s, cfg, cat, Policy{}, q);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_TRUE(plan->replay.has_value()) << plan->replay_why;
  const MemoryPrediction& m = plan->options[0].memory;
  EXPECT_EQ(m.total_bytes, 700 * kMiB + plan->replay->most.at_full_speed);
  EXPECT_EQ(m.runtime_bytes, 700 * kMiB);
  EXPECT_EQ(m.basis, plan->replay->basis);
  bool noted = false;
  for (const std::string& n : plan->notes) noted |= n.find("memory: replayed 10 processes") == 0;
  EXPECT_TRUE(noted);

  // The verdict's plan does not replay (the epilog's time is bounded).
  PlanQuery verdict = q;
  verdict.replay_memory = false;
  Result<Plan> model = MakePlan(s, cfg, cat, Policy{}, verdict);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  EXPECT_FALSE(model->replay.has_value());
  EXPECT_EQ(model->replay_why, "not asked for (the verdict's plan uses the memory model)");

  // Over eight GPUs the layout is DDP's, which the replay does not model.
  cfg.run.gpus_per_node = 8;
  Result<Plan> ddp = MakePlan(s, cfg, cat, Policy{}, q);
  ASSERT_TRUE(ddp.ok()) << ddp.status().ToString();
  EXPECT_FALSE(ddp->replay.has_value());
  EXPECT_EQ(ddp->replay_why, "the replay models one process per GPU, not ddp over 8 GPUs");
  EXPECT_FALSE(ddp->options[0].memory.replay.has_value());
}

}  // namespace
}  // namespace pilot
