#include "core/models/step_time.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "core/models/plan.h"

namespace pilot {
namespace {

// A 1.3B GPT (24 layers, d_model 2048) measured at seq 2048, micro-batch 8.
Workload Gpt1b() {
  Workload w;
  w.params = 1300000000;
  w.layers = 24;
  w.d_model = 2048;
  w.heads = 16;
  w.vocab = 50304;
  return w;
}

// step 300 ms = wait 10 + forward/backward 250 + optimizer 30 + rest 10.
StepTimeBasis Basis() {
  StepTimeBasis b;
  b.seq_len = 2048;
  b.micro_batch = 8;
  b.grad_accum = 1;
  b.step_ms = 300;
  b.data_wait_ms = 10;
  b.forward_backward_ms = 250;
  b.optimizer_ms = 30;
  return b;
}

bool Says(const StepTimeEstimate& e, const std::string& text) {
  for (const std::string& a : e.assumptions) {
    if (a.find(text) != std::string::npos) return true;
  }
  return false;
}

TEST(StepTime, ThePilotsOwnShapeIsItsMeasuredStep) {
  const StepTimeEstimate e = EstimateStepTime(Basis(), Gpt1b(), {2048, 8, 1, false});
  EXPECT_DOUBLE_EQ(e.step_ms, 300);
  EXPECT_DOUBLE_EQ(e.data_wait_ms, 10);
  EXPECT_DOUBLE_EQ(e.forward_backward_ms, 250);
  EXPECT_DOUBLE_EQ(e.recompute_factor, 1);
  EXPECT_DOUBLE_EQ(e.tokens_per_step, 16384);
}

TEST(StepTime, OnePointIsProportionalToTheWork) {
  const StepTimeEstimate e = EstimateStepTime(Basis(), Gpt1b(), {2048, 16, 2, false});
  // Four times the tokens; the optimizer and the rest once per step.
  EXPECT_DOUBLE_EQ(e.forward_backward_ms, 1000);
  EXPECT_DOUBLE_EQ(e.data_wait_ms, 40);
  EXPECT_DOUBLE_EQ(e.step_ms, 40 + 1000 + 30 + 10);
  EXPECT_DOUBLE_EQ(e.alpha_ms, 0);
  EXPECT_TRUE(Says(e, "proportional to the work"));
  EXPECT_TRUE(Says(e, "pilot's step: 300 ms at seq_len 2048 x micro_batch 8 x accumulation 1 "
                      "(forward/backward 250 ms, optimizer 30.0 ms, data wait 10.0 ms, rest 10.0 ms)"));
}

TEST(StepTime, TwoMicroBatchesGiveTheFixedCost) {
  // T(n) = 10 ms + n x 240/16384 ms: micro-batch 4 took 10 + 120 ms.
  StepTimeBasis b = Basis();
  b.second_micro_batch = 4;
  b.second_forward_backward_ms = 130;
  const StepTimeEstimate e = EstimateStepTime(b, Gpt1b(), {2048, 2, 1, false});
  EXPECT_NEAR(e.alpha_ms, 10, 1e-9);
  EXPECT_NEAR(e.forward_backward_ms, 10 + 60, 1e-9);
  EXPECT_TRUE(Says(e, "from micro-batches 8 (250 ms) and 4 (130 ms): 10.0 ms fixed per micro-batch"));
  // Still exact at the pilot's own shape.
  EXPECT_NEAR(EstimateStepTime(b, Gpt1b(), {2048, 8, 1, false}).step_ms, 300, 1e-9);
}

TEST(StepTime, AnInconsistentSecondPointFallsBackToProportional) {
  StepTimeBasis b = Basis();
  b.second_micro_batch = 4;
  b.second_forward_backward_ms = 260;  // the smaller micro-batch was slower
  const StepTimeEstimate e = EstimateStepTime(b, Gpt1b(), {2048, 16, 1, false});
  EXPECT_DOUBLE_EQ(e.alpha_ms, 0);
  EXPECT_DOUBLE_EQ(e.forward_backward_ms, 500);
  EXPECT_TRUE(Says(e, "give no consistent fixed cost"));
}

// Micro-batch 1 timed too: below the half micro-batch the segment through
// 4 and 1 holds (a micro-batch too small to fill the device costs more per
// token), above it the line through 8 and 4 as before. Figures of the ninth
// round on an H200 (gpt-1b, seq 2048): 277.3, 138.7 and 43.3 ms; the run at
// micro-batch 2 took 74.6 ms, where the line through 8 and 4 says 69.4.
TEST(StepTime, ThreeMicroBatchesTakeTheSegmentOfTheQuery) {
  StepTimeBasis b = Basis();
  b.forward_backward_ms = 277.3;
  b.step_ms = 277.3 + 30 + 10 + 10;
  b.second_micro_batch = 4;
  b.second_forward_backward_ms = 138.7;
  b.smallest_micro_batch = 1;
  b.smallest_forward_backward_ms = 43.3;
  const double lower = (138.7 - 43.3) / 3;  // per sample, 1..4
  const double upper = (277.3 - 138.7) / 4;  // per sample, 4..8
  StepTimeEstimate e = EstimateStepTime(b, Gpt1b(), {2048, 2, 1, false});
  EXPECT_NEAR(e.alpha_ms, 43.3 - lower, 1e-9);
  EXPECT_NEAR(e.forward_backward_ms, 43.3 + lower, 1e-9);
  EXPECT_NEAR(e.forward_backward_ms, 74.6, 0.6);
  EXPECT_TRUE(Says(e, "from micro-batches 8 (277 ms), 4 (139 ms) and 1 (43.3 ms): between 1 and 4, "));
  EXPECT_FALSE(Says(e, "fewer tokens than any timed micro-batch"));
  // Above the half micro-batch, and past the pilot's: the upper segment.
  e = EstimateStepTime(b, Gpt1b(), {2048, 12, 1, false});
  EXPECT_NEAR(e.forward_backward_ms, 277.3 + 4 * upper, 1e-9);
  EXPECT_TRUE(Says(e, "between 4 and 8, "));
  // Still exact at the pilot's own shape and at the two timed ones.
  EXPECT_NEAR(EstimateStepTime(b, Gpt1b(), {2048, 8, 1, false}).forward_backward_ms, 277.3, 1e-9);
  EXPECT_NEAR(EstimateStepTime(b, Gpt1b(), {2048, 4, 1, false}).forward_backward_ms, 138.7, 1e-9);
  EXPECT_NEAR(EstimateStepTime(b, Gpt1b(), {2048, 1, 1, false}).forward_backward_ms, 43.3, 1e-9);
  // A shorter sequence at micro-batch 1 has less work than any timed one:
  // the lower segment extended, and said.
  e = EstimateStepTime(b, Gpt1b(), {1024, 1, 1, false});
  const double ratio = FlopsPerTokenAt(Gpt1b(), 1024) / FlopsPerTokenAt(Gpt1b(), 2048);
  EXPECT_NEAR(e.forward_backward_ms, (43.3 - lower) + lower * 0.5 * ratio, 1e-9);
  EXPECT_TRUE(Says(e, "fewer tokens than any timed micro-batch (1 x 2048)"));
  // A lower segment that says a micro-batch costs less than nothing gives
  // way to the upper one.
  b.smallest_forward_backward_ms = 20;
  e = EstimateStepTime(b, Gpt1b(), {2048, 2, 1, false});
  EXPECT_NEAR(e.forward_backward_ms, 138.7 - 2 * upper, 1e-9);
  EXPECT_TRUE(Says(e, "between 4 and 8, "));
  // Without the half micro-batch the smallest is not used on its own.
  b.second_micro_batch.reset();
  b.smallest_forward_backward_ms = 43.3;
  e = EstimateStepTime(b, Gpt1b(), {2048, 2, 1, false});
  EXPECT_DOUBLE_EQ(e.alpha_ms, 0);
}

TEST(StepTime, TheSmallestCalibrationIsTheThirdPoint) {
  SingleStage s;
  s.shape.seq_len = 2048;
  s.shape.micro_batch = 8;
  s.timings.step_ms = 300;
  s.timings.forward_backward_ms = 277.3;
  MemoryCalibrationCheck c;
  c.status = "ok";
  c.micro_batch = 4;
  c.seq_len = 2048;
  c.forward_backward_ms = 138.7;
  s.memory_calibration = c;
  c.micro_batch = 1;
  c.forward_backward_ms = 43.3;
  s.memory_calibration_smallest = c;
  StepTimeBasis b = StepTimeBasisFrom(s);
  ASSERT_TRUE(b.smallest_micro_batch.has_value());
  EXPECT_EQ(*b.smallest_micro_batch, 1);
  EXPECT_DOUBLE_EQ(*b.smallest_forward_backward_ms, 43.3);
  // Another setting, a failed run, or no half micro-batch: not used.
  s.memory_calibration_smallest->activation_checkpointing = true;
  EXPECT_FALSE(StepTimeBasisFrom(s).smallest_micro_batch.has_value());
  s.memory_calibration_smallest->activation_checkpointing = false;
  s.memory_calibration_smallest->status = "error";
  EXPECT_FALSE(StepTimeBasisFrom(s).smallest_micro_batch.has_value());
  s.memory_calibration_smallest->status = "ok";
  s.memory_calibration->status = "oom";
  EXPECT_FALSE(StepTimeBasisFrom(s).smallest_micro_batch.has_value());
}

TEST(StepTime, ALongerSequenceCostsMorePerToken) {
  const Workload w = Gpt1b();
  const double ratio = FlopsPerTokenAt(w, 4096) / FlopsPerTokenAt(w, 2048);
  // 6 L d S is 7.7% of 6N at 2048: 6 x 24 x 2048 x 2048 / (6 x 1.3e9).
  EXPECT_NEAR(ratio, (1.3e9 + 24.0 * 2048 * 4096) / (1.3e9 + 24.0 * 2048 * 2048), 1e-12);
  // Same tokens per micro-batch (4096 x 4), more FLOPs per token.
  const StepTimeEstimate e = EstimateStepTime(Basis(), w, {4096, 4, 1, false});
  EXPECT_NEAR(e.forward_backward_ms, 250 * ratio, 1e-9);
  EXPECT_DOUBLE_EQ(e.data_wait_ms, 10);
  EXPECT_TRUE(Says(e, "seq_len 2048 -> 4096: FLOPs per token x"));
}

TEST(StepTime, RecomputeUsesTheMeasuredCost) {
  StepTimeBasis b = Basis();
  b.recompute_cost_fraction = 0.35;
  StepTimeEstimate on = EstimateStepTime(b, Gpt1b(), {2048, 8, 1, true});
  EXPECT_DOUBLE_EQ(on.recompute_factor, 1.35);
  EXPECT_NEAR(on.forward_backward_ms, 250 * 1.35, 1e-9);
  EXPECT_TRUE(Says(on, "the recompute check measured 35%"));
  EXPECT_FALSE(Says(on, "recompute check: "));  // no step times in this basis

  // A pilot that checkpointed: turning it off divides by the same cost.
  b.activation_checkpointing = true;
  StepTimeEstimate off = EstimateStepTime(b, Gpt1b(), {2048, 8, 1, false});
  EXPECT_NEAR(off.forward_backward_ms, 250 / 1.35, 1e-9);

  // Not measured: one more forward pass.
  b = Basis();
  on = EstimateStepTime(b, Gpt1b(), {2048, 8, 1, true});
  EXPECT_NEAR(on.recompute_factor, 4.0 / 3.0, 1e-12);
  EXPECT_TRUE(Says(on, "not measured"));
}

TEST(StepTime, ForwardBackwardNotTimedApartIsTheComputeBesideTheOptimizer) {
  StepTimeBasis b = Basis();
  b.forward_backward_ms = 0;
  const StepTimeEstimate e = EstimateStepTime(b, Gpt1b(), {2048, 16, 1, false});
  EXPECT_DOUBLE_EQ(e.forward_backward_ms, 2 * 260);
  EXPECT_DOUBLE_EQ(e.step_ms, 20 + 520 + 30);
}

TEST(StepTime, NoTimingsNoEstimate) {
  StepTimeBasis b;
  b.seq_len = 128;
  b.micro_batch = 2;
  const StepTimeEstimate e = EstimateStepTime(b, Gpt1b(), {256, 2, 1, false});
  EXPECT_EQ(e.step_ms, 0);
  EXPECT_DOUBLE_EQ(e.tokens_per_step, 512);
}

// results.json is the user's file: "nan" reads as NaN.
TEST(StepTime, TimingsThatAreNotNumbersGiveNoEstimate) {
  for (double bad : {std::nan(""), static_cast<double>(INFINITY), -5.0}) {
    StepTimeBasis b = Basis();
    b.forward_backward_ms = bad;
    EXPECT_EQ(EstimateStepTime(b, Gpt1b(), {2048, 16, 1, false}).step_ms, 0) << bad;
    b = Basis();
    b.step_ms = bad;
    EXPECT_EQ(EstimateStepTime(b, Gpt1b(), {2048, 16, 1, false}).step_ms, 0) << bad;
  }
  StepTimeBasis b = Basis();
  b.second_micro_batch = 4;
  b.second_forward_backward_ms = std::nan("");
  b.recompute_cost_fraction = std::nan("");
  const StepTimeEstimate e = EstimateStepTime(b, Gpt1b(), {2048, 16, 1, true});
  EXPECT_TRUE(std::isfinite(e.step_ms));
  EXPECT_NEAR(e.recompute_factor, 4.0 / 3.0, 1e-12);  // as if not measured
}

TEST(StepTime, TheBasisReadsOnlyAMatchingCalibration) {
  SingleStage s;
  s.shape.seq_len = 2048;
  s.shape.micro_batch = 8;
  s.shape.grad_accum = 1;
  s.timings.step_ms = 300;
  s.timings.forward_backward_ms = 250;
  MemoryCalibrationCheck c;
  c.status = "ok";
  c.micro_batch = 4;
  c.seq_len = 2048;
  c.forward_backward_ms = 130;
  s.memory_calibration = c;
  s.recompute_check.ran = true;
  s.recompute_check.step_ms_with = 405;
  s.recompute_check.step_ms_without = 300;

  StepTimeBasis b = StepTimeBasisFrom(s);
  ASSERT_TRUE(b.second_micro_batch.has_value());
  EXPECT_EQ(*b.second_micro_batch, 4);
  EXPECT_DOUBLE_EQ(*b.second_forward_backward_ms, 130);
  ASSERT_TRUE(b.recompute_cost_fraction.has_value());
  // Forward and backward only: both steps less the 50 ms they share.
  EXPECT_NEAR(*b.recompute_cost_fraction, (405.0 - 50) / (300 - 50) - 1, 1e-12);
  s.timings.forward_backward_ms = 0;  // not timed apart: the steps' ratio
  EXPECT_NEAR(*StepTimeBasisFrom(s).recompute_cost_fraction, 0.35, 1e-12);
  s.timings.forward_backward_ms = 250;

  s.memory_calibration->activation_checkpointing = true;  // another setting
  EXPECT_FALSE(StepTimeBasisFrom(s).second_micro_batch.has_value());
  s.memory_calibration->activation_checkpointing = false;
  s.memory_calibration->forward_backward_ms.reset();  // an older file
  EXPECT_FALSE(StepTimeBasisFrom(s).second_micro_batch.has_value());
  s.recompute_check.ran = false;
  EXPECT_FALSE(StepTimeBasisFrom(s).recompute_cost_fraction.has_value());
}

// Both memory calibrations timed the same micro-batch, one per setting:
// their ratio is the recompute cost (the sixth round on an H200: 179.99 ms
// with, 136.48 without at micro-batch 4; the real runs' ratio at 8 was
// 358.2 / 273.5 = 1.310, the recompute check's 1.361).
TEST(StepTime, TheTwoCalibrationsGiveTheRecomputeCost) {
  SingleStage s;
  s.shape.seq_len = 2048;
  s.shape.micro_batch = 8;
  s.timings.step_ms = 289.2;
  s.timings.forward_backward_ms = 273.5;
  s.recompute_check.ran = true;
  s.recompute_check.step_ms_with = 388.0;
  s.recompute_check.step_ms_without = 289.2;
  MemoryCalibrationCheck c;
  c.status = "ok";
  c.micro_batch = 4;
  c.seq_len = 2048;
  c.forward_backward_ms = 136.48;
  s.memory_calibration = c;
  c.activation_checkpointing = true;
  c.forward_backward_ms = 179.99;
  s.memory_calibration_other = c;
  StepTimeBasis b = StepTimeBasisFrom(s);
  ASSERT_TRUE(b.recompute_cost_fraction.has_value());
  EXPECT_NEAR(*b.recompute_cost_fraction, 179.99 / 136.48 - 1, 1e-12);
  StepTimeEstimate on = EstimateStepTime(b, Gpt1b(), {2048, 8, 1, true});
  EXPECT_TRUE(Says(on, "by the two memory calibrations at micro_batch 4: 180 ms with, 136 ms without"));
  EXPECT_TRUE(Says(on, "recompute check: 388 ms"));  // still listed

  // A calibration at another micro-batch, or the same setting twice: the check.
  s.memory_calibration_other->micro_batch = 2;
  EXPECT_FALSE(StepTimeBasisFrom(s).recompute_calibration_micro_batch.has_value());
  s.memory_calibration_other->micro_batch = 4;
  s.memory_calibration_other->activation_checkpointing = false;
  EXPECT_FALSE(StepTimeBasisFrom(s).recompute_calibration_micro_batch.has_value());
  s.memory_calibration_other->activation_checkpointing = true;
  s.memory_calibration_other->status = "oom";
  EXPECT_FALSE(StepTimeBasisFrom(s).recompute_calibration_micro_batch.has_value());
}

// The plan's what-if follows the shape: checkpointing and a longer sequence
// cost more than the pilot's own tokens/s would say.
TEST(StepTime, PlanWhatIfsFollowTheShape) {
  HardwareCatalog cat;
  cat.currency = "USD";
  cat.gpus = {GpuType{"H200-141", int64_t{140} << 30, 4.8, 989, "NVLink 4", 900, "cuda", 4.0, "", "",
                      true}};
  Config cfg;
  cfg.run.seq_len = 2048;
  cfg.run.micro_batch = 8;
  cfg.run.target_steps = 1000;
  cfg.model.kind = "gpt";
  cfg.model.layers = 24;
  cfg.model.d_model = 2048;
  cfg.model.heads = 16;
  cfg.hardware.candidates = {"H200-141"};
  SingleStage s;
  s.status = "ok";
  s.device = "cuda";
  s.device_name = "NVIDIA H200";
  s.shape.params = 1300000000;
  s.shape.seq_len = 2048;
  s.shape.micro_batch = 8;
  s.shape.tokens_per_step = 16384;
  s.shape.precision = "bf16";
  s.timings.step_ms = 300;
  s.timings.forward_backward_ms = 260;
  s.timings.optimizer_ms = 30;
  s.tokens_per_second = 16384 / 0.3;
  s.recompute_check.ran = true;
  s.recompute_check.step_ms_with = 405;
  s.recompute_check.step_ms_without = 300;
  Policy policy;

  Result<Plan> same = MakePlan(s, cfg, cat, policy);
  ASSERT_TRUE(same.ok()) << same.status().ToString();
  EXPECT_NEAR(same->options[0].throughput.tokens_per_second, 16384 / 0.3, 1e-6);

  PlanQuery q;
  q.seq_len = 4096;
  q.activation_checkpointing = true;
  Result<Plan> what_if = MakePlan(s, cfg, cat, policy, q);
  ASSERT_TRUE(what_if.ok()) << what_if.status().ToString();
  const double expected_ms =
      260 * 2 * (365.0 / 260) * FlopsPerTokenAt(WorkloadFrom(s, &cfg), 4096) /
          FlopsPerTokenAt(WorkloadFrom(s, &cfg), 2048) +
      40;
  EXPECT_NEAR(what_if->options[0].throughput.tokens_per_second, 32768 / expected_ms * 1e3, 1e-6);
  bool noted = false;
  for (const std::string& n : what_if->notes) {
    noted |= n.find("throughput: activation checkpointing on") != std::string::npos;
  }
  EXPECT_TRUE(noted);
}

}  // namespace
}  // namespace pilot

namespace pilot {
namespace {

TEST(StepTime, BelowEveryTimedMicroBatchTheEstimateSaysSo) {
  StepTimeBasis b = Basis();
  b.second_micro_batch = 4;
  b.second_forward_backward_ms = 130;
  EXPECT_TRUE(Says(EstimateStepTime(b, Gpt1b(), {2048, 2, 1, false}), "fewer tokens than any timed micro-batch"));
  EXPECT_FALSE(Says(EstimateStepTime(b, Gpt1b(), {2048, 4, 1, false}), "fewer tokens than any timed"));
  EXPECT_FALSE(Says(EstimateStepTime(b, Gpt1b(), {4096, 2, 1, false}), "fewer tokens than any timed"));
}

}  // namespace
}  // namespace pilot
