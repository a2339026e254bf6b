#include "core/models/memory_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <utility>

namespace pilot {
namespace {

constexpr int64_t kGiBMemoryModel = int64_t{1} << 30;

// 1e9 parameters, bf16, AdamW, measured at seq_len 2048 x micro_batch 4.
SingleStage Measured() {
  SingleStage s;
  s.device = "cuda";
  s.device_name = "NVIDIA H100 80GB HBM3";
  s.shape.params = 1000000000;
  s.shape.seq_len = 2048;
  s.shape.micro_batch = 4;
  s.shape.tokens_per_step = 8192;
  s.shape.precision = "bf16";
  s.shape.optimizer = "adamw";
  s.memory.device = "cuda";
  s.memory.peak_allocated_bytes = 16000000000 + 8192 * int64_t{500000};  // static + 500 kB/token
  s.memory.peak_reserved_bytes = *s.memory.peak_allocated_bytes + 2 * kGiBMemoryModel;
  s.memory.device_used_bytes = *s.memory.peak_reserved_bytes + kGiBMemoryModel;
  s.memory_first_step = s.memory;
  return s;
}

Workload W() {
  Workload w;
  w.params = 1000000000;
  w.layers = 24;
  w.d_model = 2048;
  w.heads = 16;
  w.vocab = 50304;
  w.precision = "bf16";
  return w;
}

TEST(MemoryModel, ResidualSplit) {
  MemoryBreakdown b = SplitMemory(Measured(), W(), std::nullopt);
  EXPECT_EQ(b.source, "residual");
  EXPECT_EQ(b.params_bytes, 4000000000);
  EXPECT_EQ(b.grads_bytes, 4000000000);
  EXPECT_EQ(b.optimizer_bytes, 8000000000);
  EXPECT_DOUBLE_EQ(b.activation_bytes_per_token, 500000);
  EXPECT_EQ(b.attention_bytes, 0);  // bf16 on a GPU: flash attention
  EXPECT_EQ(b.workspace_bytes, 2 * kGiBMemoryModel);
  EXPECT_EQ(b.runtime_bytes, kGiBMemoryModel);
}

// A user's program: the probe counted its parameters (bf16 here), gradients
// and optimizer state; those, not 4/4/8 bytes per parameter, are the static
// parts, and the activations are the rest of the allocated peak.
TEST(MemoryModel, AProgramsProbeFiguresAreTheStaticParts) {
  SingleStage s = Measured();
  s.shape.param_bytes = 2000000000;
  s.shape.grad_bytes = 2000000000;
  s.shape.optimizer_state_bytes = 8000000000;
  MemoryBreakdown b = SplitMemory(s, W(), std::nullopt);
  EXPECT_EQ(b.params_bytes, 2000000000);
  EXPECT_EQ(b.grads_bytes, 2000000000);
  EXPECT_EQ(b.optimizer_bytes, 8000000000);
  EXPECT_EQ(b.source, "residual");
  EXPECT_EQ(b.activation_bytes, *s.memory.peak_allocated_bytes - 12000000000);
}

TEST(MemoryModel, SameShapeReproducesTheMeasurement) {
  SingleStage s = Measured();
  MemoryBreakdown b = SplitMemory(s, W(), std::nullopt);
  MemoryPrediction p = PredictPeak(b, W(), {2048, 4, false, "single", 1});
  EXPECT_NEAR(static_cast<double>(p.total_bytes), static_cast<double>(*s.memory.device_used_bytes),
              2);
}

TEST(MemoryModel, CalibrationGivesTheSlope) {
  SingleStage s = Measured();
  // The true slope is 400 kB/token; the residual rule would see 500 kB
  // because 0.8 GB of the peak is not activations.
  const int64_t fixed = 16000000000 + 800000000;
  s.memory.peak_allocated_bytes = fixed + 8192 * int64_t{400000};
  MemoryCalibration cal{4, fixed + 8192 * int64_t{400000}, 2, fixed + 4096 * int64_t{400000}};
  MemoryBreakdown b = SplitMemory(s, W(), cal);
  EXPECT_EQ(b.source, "calibrated");
  EXPECT_NEAR(b.activation_bytes_per_token, 400000, 1e-6);
  // Doubling the micro-batch adds exactly 8192 tokens x 400 kB (+ workspace).
  MemoryPrediction p4 = PredictPeak(b, W(), {2048, 4, false, "single", 1});
  MemoryPrediction p8 = PredictPeak(b, W(), {2048, 8, false, "single", 1});
  EXPECT_EQ(p8.activation_bytes - p4.activation_bytes, 8192 * int64_t{400000});
  // A calibration with equal micro-batches is ignored.
  MemoryBreakdown r = SplitMemory(s, W(), MemoryCalibration{4, 1, 4, 1});
  EXPECT_EQ(r.source, "residual");
}

// The runner's own calibration (stages.single.memory_calibration) is used
// only when it ran at another micro-batch of the same shape with allocator
// peaks.
TEST(MemoryModel, CalibrationFromTheResults) {
  SingleStage s = Measured();
  std::string why;
  EXPECT_FALSE(CalibrationFrom(s, &why));
  EXPECT_EQ(why, "no memory calibration in the results");
  MemoryCalibrationCheck c;
  c.status = "ok";
  c.micro_batch = 2;
  c.seq_len = 2048;
  c.steps = 2;
  c.step = 8;
  c.peak_allocated_bytes = 16000000000 + 4096 * int64_t{500000};
  s.memory_calibration = c;
  std::optional<MemoryCalibration> cal = CalibrationFrom(s, &why);
  ASSERT_TRUE(cal);
  EXPECT_TRUE(why.empty());
  EXPECT_EQ(cal->micro_batch_a, 4);
  EXPECT_EQ(cal->peak_a, *s.memory.peak_allocated_bytes);
  EXPECT_EQ(cal->micro_batch_b, 2);
  EXPECT_EQ(cal->peak_b, *c.peak_allocated_bytes);
  EXPECT_EQ(SplitMemory(s, W(), cal).source, "calibrated");

  SingleStage cpu = s;  // a CPU pilot: only the process's resident set
  cpu.memory_calibration->peak_allocated_bytes.reset();
  cpu.memory_calibration->process_peak_rss_bytes = 300000000;
  EXPECT_FALSE(CalibrationFrom(cpu, &why));
  EXPECT_NE(why.find("without allocator peaks"), std::string::npos) << why;
  SingleStage skipped = s;
  skipped.memory_calibration->status = "skipped";
  skipped.memory_calibration->detail = "micro_batch is 1";
  EXPECT_FALSE(CalibrationFrom(skipped, &why));
  EXPECT_EQ(why, "memory calibration skipped: micro_batch is 1");
  SingleStage other = s;
  other.memory_calibration->seq_len = 1024;
  EXPECT_FALSE(CalibrationFrom(other));
  other = s;
  other.memory_calibration->activation_checkpointing = true;
  EXPECT_FALSE(CalibrationFrom(other));
}

// A prediction for the other checkpointing setting than the measured one
// comes from the model's rule, and says so.
TEST(MemoryModel, OtherCheckpointingModeIsARule) {
  SingleStage s = Measured();
  s.shape.activation_checkpointing = true;
  MemoryCalibration cal{4, *s.memory.peak_allocated_bytes, 2,
                        16000000000 + 4096 * int64_t{500000}};
  MemoryBreakdown b = SplitMemory(s, W(), cal);
  ASSERT_EQ(b.source, "calibrated");
  EXPECT_EQ(PredictPeak(b, W(), {2048, 8, true, "single", 1}).basis, "calibrated");
  EXPECT_EQ(PredictPeak(b, W(), {2048, 8, false, "single", 1}).basis,
            "calibrated, activation checkpointing off by rule");
  MemoryBreakdown r = SplitMemory(Measured(), W(), std::nullopt);
  EXPECT_EQ(PredictPeak(r, W(), {2048, 8, true, "single", 1}).basis,
            "residual, activation checkpointing on by rule");
}

TEST(MemoryModel, ShardedAndDdpLayouts) {
  MemoryBreakdown b = SplitMemory(Measured(), W(), std::nullopt);
  MemoryPrediction single = PredictPeak(b, W(), {2048, 4, false, "single", 1});
  MemoryPrediction ddp = PredictPeak(b, W(), {2048, 4, false, "ddp", 8});
  MemoryPrediction sharded = PredictPeak(b, W(), {2048, 4, false, "sharded", 8});
  EXPECT_EQ(single.static_bytes, 16000000000);
  EXPECT_EQ(ddp.static_bytes, 20000000000);  // + one gradient copy in buckets
  // 16e9 / 8 + (4e9 + 4e9) / 24 layers gathered.
  EXPECT_EQ(sharded.static_bytes, int64_t{2000000000} + 333333333);
  EXPECT_LT(sharded.total_bytes, single.total_bytes);
  EXPECT_EQ(sharded.activation_bytes, single.activation_bytes);
}

TEST(MemoryModel, CheckpointingAndSeqLen) {
  Workload w = W();
  MemoryBreakdown b = SplitMemory(Measured(), w, std::nullopt);
  MemoryPrediction plain = PredictPeak(b, w, {2048, 4, false, "single", 1});
  // Checkpointing needs a realistic activation size to save anything:
  // 2.5 MB per token measured without it.
  SingleStage big = Measured();
  big.memory.peak_allocated_bytes = 16000000000 + 8192 * int64_t{2500000};
  big.memory.peak_reserved_bytes = *big.memory.peak_allocated_bytes + 2 * kGiBMemoryModel;
  big.memory.device_used_bytes = *big.memory.peak_reserved_bytes + kGiBMemoryModel;
  MemoryBreakdown bb = SplitMemory(big, w, std::nullopt);
  MemoryPrediction full = PredictPeak(bb, w, {2048, 4, false, "single", 1});
  MemoryPrediction ckpt = PredictPeak(bb, w, {2048, 4, true, "single", 1});
  // Layer inputs (24 x 2048, fp32) + the larger of one layer's share and
  // the logits' gradient per token, plus the output layer (6 x vocab bytes
  // per token), which is not checkpointed.
  const double logits = 6.0 * 50304;
  EXPECT_NEAR(static_cast<double>(ckpt.activation_bytes),
              8192 * (24 * 2048 * 4 + std::max((2500000 - logits) / 24, logits) + logits), 1);
  // No gradient exists yet at that peak.
  EXPECT_EQ(ckpt.static_bytes, full.static_bytes - bb.grads_bytes);
  EXPECT_LT(ckpt.total_bytes, full.total_bytes);
  // With activations already smaller than the rule's, it keeps them.
  MemoryPrediction small = PredictPeak(b, w, {2048, 4, true, "single", 1});
  EXPECT_EQ(small.activation_bytes, plain.activation_bytes);
  // bf16: linear in seq_len.
  MemoryPrediction longer = PredictPeak(b, w, {4096, 4, false, "single", 1});
  EXPECT_EQ(longer.activation_bytes, 2 * plain.activation_bytes);
  // fp32: the math attention path adds B x heads x T^2 x 4 bytes x 2 per layer.
  w.precision = "fp32";
  MemoryPrediction f = PredictPeak(b, w, {4096, 4, false, "single", 1});
  EXPECT_EQ(f.activation_bytes - longer.activation_bytes,
            int64_t{2} * 24 * 4 * 16 * 4096 * 4096 * 4);
}

// Against a measurement: bench/RESULTS.md (one H200, configs/gpt-1b.toml at
// seq_len 2048 x micro-batch 8, bf16, fused AdamW). Steady step 53.64 GiB
// allocated, 56.26 reserved, 57.01 device; with activation checkpointing the
// runner measured 27.36 GiB allocated. Parameters of that model (24 layers
// of 12 d^2 + 13 d, tied 50304 x 2048 embedding, 2048 x 2048 positions,
// final norm): 1,315,819,520.
constexpr double kG = 1024.0 * 1024 * 1024;

// That measurement and model.
std::pair<SingleStage, Workload> H200Gpt1b() {
  SingleStage s;
  s.device = "cuda";
  s.device_name = "NVIDIA H200";
  s.shape.params = 1315819520;
  s.shape.seq_len = 2048;
  s.shape.micro_batch = 8;
  s.shape.tokens_per_step = 16384;
  s.shape.precision = "bf16";
  s.shape.optimizer = "adamw";
  s.memory.peak_allocated_bytes = static_cast<int64_t>(53.64 * kG);
  s.memory.peak_reserved_bytes = static_cast<int64_t>(56.26 * kG);
  s.memory.device_used_bytes = static_cast<int64_t>(57.01 * kG);
  Workload w;
  w.params = s.shape.params;
  w.layers = 24;
  w.d_model = 2048;
  w.heads = 16;
  w.vocab = 50304;
  return {s, w};
}

TEST(MemoryModel, PredictsTheMeasuredRecomputePeakWithin3Percent) {
  auto [s, w] = H200Gpt1b();
  MemoryBreakdown b = SplitMemory(s, w, std::nullopt);
  MemoryPrediction p = PredictPeak(b, w, {2048, 8, true, "single", 1});
  const double allocated = static_cast<double>(p.static_bytes + p.activation_bytes);
  EXPECT_NEAR(allocated / (27.36 * kG), 1.0, 0.03) << allocated / kG << " GiB";
}

// The same model calibrated by the pilot's own micro-batch 4 steps (35.43
// GiB allocated, bench/RESULTS.md 08:02 UTC); with checkpointing the runner
// measured 27.36 GiB at micro-batch 8 and 39.76 GiB at 16.
TEST(MemoryModel, CalibratedPredictsTheMeasuredCheckpointedPeaksWithin3Percent) {
  auto [s, w] = H200Gpt1b();
  MemoryCalibration cal{8, *s.memory.peak_allocated_bytes, 4, static_cast<int64_t>(35.43 * kG)};
  MemoryBreakdown b = SplitMemory(s, w, cal);
  ASSERT_EQ(b.source, "calibrated");
  for (auto [mb, measured] : {std::pair{8, 27.36}, std::pair{16, 39.76}}) {
    MemoryPrediction p = PredictPeak(b, w, {2048, mb, true, "single", 1});
    const double allocated = static_cast<double>(p.static_bytes + p.activation_bytes);
    EXPECT_NEAR(allocated / (measured * kG), 1.0, 0.03) << "micro-batch " << mb << ": " << allocated / kG;
  }
}

// With the recompute check's step at the other setting (runner since the
// third round), the checkpointed layout is the rule anchored to that step.
// Figures of the third round (bench/RESULTS.md, expandable segments): the
// pilot without checkpointing at micro-batch 8 (53.64 GiB allocated, 55.33
// reserved, 56.08 device; 35.43 at micro-batch 4), and with checkpointing
// 27.36 allocated / 30.44 reserved at micro-batch 8 and 45.00 GiB device
// used at micro-batch 16.
TEST(MemoryModel, RecomputeCheckAnchorsTheOtherSetting) {
  auto [s, w] = H200Gpt1b();
  s.memory.peak_reserved_bytes = static_cast<int64_t>(55.33 * kG);
  s.memory.device_used_bytes = static_cast<int64_t>(56.08 * kG);
  s.recompute_check.ran = true;
  s.recompute_check.measured = "with";
  s.recompute_check.peak_bytes_with = static_cast<int64_t>(27.36 * kG);
  s.recompute_check.peak_reserved_bytes = static_cast<int64_t>(30.44 * kG);
  MemoryCalibration cal{8, *s.memory.peak_allocated_bytes, 4, static_cast<int64_t>(35.43 * kG)};
  MemoryBreakdown b = SplitMemory(s, w, cal);
  ASSERT_TRUE(b.other_setting);
  EXPECT_TRUE(b.other_setting->activation_checkpointing);
  MemoryPrediction at8 = PredictPeak(b, w, {2048, 8, true, "single", 1});
  EXPECT_EQ(at8.basis, "calibrated, activation checkpointing on from the recompute check");
  EXPECT_NEAR(static_cast<double>(at8.static_bytes + at8.activation_bytes), 27.36 * kG, 2);
  // The workspace is the pilot's own steady fraction, not the check's
  // (whose steps reserve more after the reference in the same process).
  EXPECT_NEAR(static_cast<double>(at8.workspace_bytes),
              b.workspace_fraction * static_cast<double>(at8.static_bytes + at8.activation_bytes), 2);
  EXPECT_EQ(at8.runtime_bytes, b.runtime_bytes);
  MemoryPrediction at16 = PredictPeak(b, w, {2048, 16, true, "single", 1});
  EXPECT_GT(at16.total_bytes, at8.total_bytes);
  // The pilot's own setting is untouched by the check.
  EXPECT_EQ(PredictPeak(b, w, {2048, 8, false, "single", 1}).basis, "calibrated");
  // A check of an earlier runner (no "measured") is not used.
  s.recompute_check.measured.reset();
  EXPECT_FALSE(SplitMemory(s, w, cal).other_setting);
}

// The sixth round (bench/RESULTS.md, one H200, fused loss and AdamW,
// configs/gpt-1b.toml at seq_len 2048): the pilot without checkpointing at
// micro-batch 8 (50205097472 bytes allocated, 50417631232 reserved,
// 51221692416 device) and 4 (34631515648); with checkpointing at 8
// (24844829184, the recompute check) and 4 (23109698048,
// memory_calibration_other). Measured with checkpointing: 4096 tokens
// 22223437312, 24576 tokens 26575766016, 32768 tokens 29847757312 allocated
// (31397314560 device).
SingleStage SixthRound() {
  SingleStage s;
  s.device = "cuda";
  s.device_name = "NVIDIA H200";
  s.shape.params = 1315819520;
  s.shape.seq_len = 2048;
  s.shape.micro_batch = 8;
  s.shape.tokens_per_step = 16384;
  s.shape.precision = "bf16";
  s.shape.optimizer = "adamw";
  s.shape.fused_loss = true;
  s.memory.peak_allocated_bytes = 50205097472;
  s.memory.peak_reserved_bytes = 50417631232;
  s.memory.device_used_bytes = 51221692416;
  MemoryCalibrationCheck c;
  c.status = "ok";
  c.micro_batch = 4;
  c.seq_len = 2048;
  c.peak_allocated_bytes = 34631515648;
  s.memory_calibration = c;
  s.recompute_check.ran = true;
  s.recompute_check.measured = "with";
  s.recompute_check.peak_bytes_with = 24844829184;
  s.recompute_check.peak_reserved_bytes = 25813843968;
  c.activation_checkpointing = true;
  c.peak_allocated_bytes = 23109698048;
  s.memory_calibration_other = c;
  return s;
}

Workload SixthRoundWorkload() {
  Workload w;
  w.params = 1315819520;
  w.layers = 24;
  w.d_model = 2048;
  w.heads = 16;
  w.vocab = 50304;
  w.fused_loss = true;
  w.layer_params = 12 * 2048 * 2048 + 13 * 2048;  // 50358272
  return w;
}

// A layer's inputs (4 d bytes per token) outgrow its gradients (4 bytes per
// parameter) above layer_params / d tokens: 24588.
TEST(MemoryModel, CheckpointedStartOfBackwardTerm) {
  const Workload w = SixthRoundWorkload();
  MemoryBreakdown b;
  b.grads_bytes = 4 * w.params;
  MemoryQuery q{2048, 12, true, "single", 1};  // 24576 tokens: below
  EXPECT_EQ(CheckpointStartExtraBytes(b, w, q), 0);
  q.micro_batch = 16;  // 32768 tokens
  EXPECT_DOUBLE_EQ(CheckpointStartExtraBytes(b, w, q),
                   23.0 * (4.0 * 2048 * 32768 - 4.0 * 50358272));
  q.activation_checkpointing = false;
  EXPECT_EQ(CheckpointStartExtraBytes(b, w, q), 0);
  // Sharded over 8: each rank holds an eighth of a layer's gradients.
  q = {2048, 2, true, "sharded", 8};
  EXPECT_DOUBLE_EQ(CheckpointStartExtraBytes(b, w, q), 23.0 * (4.0 * 2048 * 4096 - 4.0 * 50358272 / 8));
  // From the config: the parameters less the embeddings and final norm.
  Config cfg;
  cfg.model.kind = "gpt";
  cfg.model.layers = 24;
  cfg.model.d_model = 2048;
  cfg.model.heads = 16;
  cfg.model.vocab = 50304;
  EXPECT_EQ(WorkloadFrom(SixthRound(), &cfg).layer_params, 50358272);
  cfg.model.kind = "llama";  // untied output layer, one norm
  EXPECT_EQ(WorkloadFrom(SixthRound(), &cfg).layer_params,
            (1315819520 - 2 * 50304 * 2048 - 2048) / 24);
  Workload program = w;  // a user's program: no layer structure known
  program.layer_params = 0;
  EXPECT_EQ(CheckpointStartExtraBytes(b, program, {2048, 16, true, "single", 1}), 0);
}

TEST(MemoryModel, TwoPointsOfTheOtherSettingPredictTheCheckpointedLayout) {
  const SingleStage s = SixthRound();
  const Workload w = SixthRoundWorkload();
  MemoryBreakdown b = SplitMemory(s, w, CalibrationFrom(s));
  ASSERT_EQ(b.source, "calibrated");
  ASSERT_TRUE(b.other_setting);
  EXPECT_EQ(b.other_setting->second_micro_batch, 4);
  // Allocated peaks within 0.2% on both sides of the phase change.
  for (auto [mb, measured] : {std::pair{2, 22223437312.0}, std::pair{12, 26575766016.0},
                              std::pair{16, 29847757312.0}}) {
    MemoryPrediction p = PredictPeak(b, w, {2048, mb, true, "single", 1});
    EXPECT_EQ(p.basis,
              "calibrated, activation checkpointing on calibrated by the recompute check and "
              "memory_calibration_other");
    const double allocated = static_cast<double>(p.static_bytes + p.activation_bytes);
    EXPECT_NEAR(allocated / measured, 1.0, 0.002) << "micro-batch " << mb;
  }
  // Device bytes at 32768 tokens within 2% (the pilot's own workspace).
  MemoryPrediction p16 = PredictPeak(b, w, {2048, 16, true, "single", 1});
  EXPECT_NEAR(static_cast<double>(p16.total_bytes) / 31397314560.0, 1.0, 0.02);
  // Without the second point: the rule anchored to the check's one.
  SingleStage one = s;
  one.memory_calibration_other.reset();
  MemoryBreakdown b1 = SplitMemory(one, w, CalibrationFrom(one));
  EXPECT_EQ(PredictPeak(b1, w, {2048, 16, true, "single", 1}).basis,
            "calibrated, activation checkpointing on from the recompute check");
}

// A pilot that ran with checkpointing: its own two points (ac8's own
// steps and its calibration at 4) and the same term.
TEST(MemoryModel, ACheckpointedPilotsOwnLineKeepsThePhaseChange) {
  SingleStage s = SixthRound();
  s.shape.activation_checkpointing = true;
  s.memory.peak_allocated_bytes = 24844829184;
  s.memory.peak_reserved_bytes = 25117589504;
  s.memory.device_used_bytes = 25921650688;
  s.memory_calibration->activation_checkpointing = true;
  s.memory_calibration->peak_allocated_bytes = 23109698048;
  s.recompute_check = RecomputeCheck{};
  s.memory_calibration_other.reset();
  const Workload w = SixthRoundWorkload();
  MemoryBreakdown b = SplitMemory(s, w, CalibrationFrom(s));
  ASSERT_EQ(b.source, "calibrated");
  MemoryPrediction p = PredictPeak(b, w, {2048, 16, true, "single", 1});
  EXPECT_NEAR(static_cast<double>(p.static_bytes + p.activation_bytes) / 29847757312.0, 1.0, 0.002);
  EXPECT_NEAR(static_cast<double>(p.total_bytes) / 31397314560.0, 1.0, 0.02);
}

TEST(MemoryModel, CpuPilotIsAnalytic) {
  SingleStage s = Measured();
  s.device = "cpu";
  s.memory = MemoryStats{};
  s.memory_first_step = MemoryStats{};
  MemoryBreakdown b = SplitMemory(s, W(), std::nullopt);
  EXPECT_EQ(b.source, "analytic");
  EXPECT_EQ(b.runtime_bytes, kAssumedRuntimeBytes);
  EXPECT_GT(b.activation_bytes_per_token, 24 * 34.0 * 2048);
  ASSERT_FALSE(b.notes.empty());
}

TEST(MemoryModel, FusedLossKeepsOneLogitsBuffer) {
  // Analytic split: the output layer counts 6 x vocab bytes per token in
  // bf16 the usual way, 2 x vocab with the fused loss; 8 and 4 in fp32.
  SingleStage s = Measured();
  s.device = "cpu";
  s.memory = MemoryStats{};
  s.memory_first_step = MemoryStats{};
  Workload w = W();
  const double plain = SplitMemory(s, w, std::nullopt).activation_bytes_per_token;
  w.fused_loss = true;
  EXPECT_DOUBLE_EQ(plain - SplitMemory(s, w, std::nullopt).activation_bytes_per_token, 4.0 * 50304);
  w.precision = "fp32";
  const double fused32 = SplitMemory(s, w, std::nullopt).activation_bytes_per_token;
  w.fused_loss = false;
  EXPECT_DOUBLE_EQ(SplitMemory(s, w, std::nullopt).activation_bytes_per_token - fused32, 4.0 * 50304);
  w.precision = "fp16";  // fp16 is never fused
  const double half = SplitMemory(s, w, std::nullopt).activation_bytes_per_token;
  w.fused_loss = true;
  EXPECT_DOUBLE_EQ(SplitMemory(s, w, std::nullopt).activation_bytes_per_token, half);
  // The results' shape says which ran; files without the field: unfused.
  EXPECT_FALSE(WorkloadFrom(s, nullptr).fused_loss);
  s.shape.fused_loss = true;
  EXPECT_TRUE(WorkloadFrom(s, nullptr).fused_loss);
}

TEST(MemoryModel, FitRuleUsesHeadroom) {
  GpuType g;
  g.name = "X-100";
  g.memory_bytes = 100 * kGiBMemoryModel;
  Policy p;
  MemoryPrediction m;
  m.total_bytes = 90 * kGiBMemoryModel;
  EXPECT_TRUE(FitOn(m, g, p).fits);  // exactly 10% free
  m.total_bytes = 90 * kGiBMemoryModel + 1;
  FitResult f = FitOn(m, g, p);
  EXPECT_FALSE(f.fits);
  EXPECT_EQ(f.note, "does not fit with the required headroom");
  g.stack = "rocm";
  m.total_bytes = 10 * kGiBMemoryModel;
  EXPECT_EQ(FitOn(m, g, p).note, "needs ROCm qualification (stock PyTorch operators only)");
  EXPECT_EQ(RocmNote({"flash_attn"}),
            "needs ROCm qualification (with PyTorch, these native extensions the program loaded: "
            "flash_attn)");
}

}  // namespace
}  // namespace pilot

namespace pilot {
namespace {

// Measured at 8 of 32 layers: the static parts grow with the parameters,
// each layer's activations once per added layer (not with checkpointing,
// whose per-token working set is one layer's), the output layer's stay.
TEST(MemoryModel, ExtendDepthPerLayer) {
  Workload from = W();
  from.layers = 8;
  from.params = 400000000;
  from.layer_params = 40000000;
  ReducedDepth r;
  r.layers = 8;
  r.full_layers = 32;
  r.full_params = 1360000000;
  const Workload to = FullDepth(from, r);
  EXPECT_EQ(to.layers, 32);
  EXPECT_EQ(to.params, 1360000000);
  r.full_params = 0;  // older record: measured + the missing layers
  EXPECT_EQ(FullDepth(from, r).params, 400000000 + 24 * 40000000);

  MemoryBreakdown b;
  b.seq_len = 2048;
  b.micro_batch = 4;
  b.params_bytes = 4 * from.params;
  b.grads_bytes = 4 * from.params;
  b.optimizer_bytes = 8 * from.params;
  const double logits = 6.0 * from.vocab;
  b.activation_bytes_per_token = logits + 8 * 70000.0;
  b.workspace_fraction = 0.02;
  b.other_setting = MemoryBreakdown::OtherSetting{true, 1, 0, 0, 0};
  MemoryBreakdown e = ExtendDepth(b, from, to);
  EXPECT_EQ(e.params_bytes, 4 * to.params);
  EXPECT_EQ(e.optimizer_bytes, 8 * to.params);
  EXPECT_DOUBLE_EQ(e.activation_bytes_per_token, logits + 32 * 70000.0);
  EXPECT_FALSE(e.other_setting);
  b.activation_checkpointing = true;
  EXPECT_DOUBLE_EQ(ExtendDepth(b, from, to).activation_bytes_per_token, b.activation_bytes_per_token);
}

}  // namespace
}  // namespace pilot
