#include "core/decide/decide.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "core/models/plan.h"
#include "core/base/strings.h"

namespace pilot {
namespace {

constexpr int64_t kNowDecide = 1796011506;  // 2026-11-30T04:05:06Z
constexpr int64_t kGiB = int64_t{1} << 30;

HardwareCatalog Catalog() {
  HardwareCatalog c;
  c.currency = "USD";
  GpuType a{"A100-80", 80 * kGiB, 2.0, 312, "NVLink 3", 600, "cuda", 2.0, "", "", true};
  GpuType h{"H200-141", 140 * kGiB, 4.8, 989, "NVLink 4", 900, "cuda", 4.0, "", "", true};
  GpuType m{"MI300X-192", 192 * kGiB, 5.3, 1307, "Infinity Fabric", 896, "rocm", 3.0, "", "", true};
  c.gpus = {a, h, m};
  return c;
}

// A pilot that passes everything: 1 node x 8 H200, GPU stage, bf16.
DecideInput Good() {
  DecideInput in;
  in.lock.job = {4242, "alice", 1001, 1001, 1, "gpu01", "gpu01", "/home/alice"};
  in.lock.config = {"/home/alice/gpt.toml", "/var/lib/slurm-pilot/jobs/4242/pilot.toml",
                    std::string(64, 'a'), std::string(64, 'a')};
  in.lock.container = {"ghcr.io/o/i:1", "sha256:" + std::string(64, 'b'), "", "registry"};
  in.lock.gpus = {{0, "NVIDIA H200", "GPU-1", 140 * kGiB}};
  Config cfg;
  cfg.run.name = "gpt-1b";
  cfg.run.nodes = 1;
  cfg.run.gpus_per_node = 8;
  cfg.run.gpu_type = "H200-141";
  cfg.run.seq_len = 2048;
  cfg.run.micro_batch = 8;
  cfg.run.target_tokens = 0;
  cfg.run.target_steps = 10000;
  cfg.run.reservation_days = 30;
  cfg.run.checkpoint_interval = 1000;
  cfg.run.eval_interval = 1000;
  cfg.training.seq_len = 2048;
  cfg.training.micro_batch = 8;
  cfg.hardware.candidates = {"A100-80", "H200-141", "MI300X-192", "B999"};
  in.config = cfg;

  Results r;
  r.config_sha256 = std::string(64, 'a');
  r.supervisor.emplace();
  r.supervisor->restore_compared = true;
  r.supervisor->ptrace_scope = 1;  // a node with Yama (ptrace_scope_test.cc: without)
  SingleStage s;
  s.status = "ok";
  s.device = "cuda";
  s.device_name = "NVIDIA H200";
  s.shape = {"gpt", 1300000000, 2048, 8, 1, true, 16384, "bf16", false, "adamw", true, true, std::nullopt,
             std::nullopt, std::nullopt, std::nullopt};
  s.steps = 20;
  s.tokens_per_second = 40000;
  s.timings.eval_seconds = 30;
  s.memory.device = "cuda";
  s.memory.peak_allocated_bytes = 60 * kGiB;
  s.memory.peak_reserved_bytes = 62 * kGiB;
  s.memory.device_used_bytes = 64 * kGiB;
  s.memory.device_total_bytes = 140 * kGiB;
  s.memory_first_step = s.memory;
  MemoryStats resumed = s.memory;
  resumed.device_used_bytes = 66 * kGiB;
  s.memory_resumed = resumed;
  s.checkpoint = {"/w/ckpt/step-10", 10, 20 * kGiB, 60, 30, 0.36, 0.7};
  s.restore.ran = true;
  s.restore.equal = true;
  s.restore.mode = "tolerance";
  s.restore.from_step = 10;
  s.restore.to_step = 20;
  s.restore.max_rel_loss_diff = 1e-5;
  s.precision_check.ran = true;
  s.precision_check.precision = "bf16";
  s.precision_check.max_rel_loss_diff = 0.01;
  s.precision_check.within = true;
  r.single = s;
  in.results = r;

  in.verify.ran = true;
  in.verify.checkpoint = "/w/ckpt/step-10";
  in.verify.complete_marker = true;
  in.verify.files_checked = 4;
  in.verify.manifest_ok = true;
  in.verify.params = 150;
  in.verify.params_with_optimizer_state = 150;
  in.verify.eval_recomputed = true;
  in.verify.eval_within = true;
  return in;
}

Policy TestPolicyDecide() {
  Policy p;
  p.thresholds.min_pilot_steps = 10;
  return p;
}

const Check* Find(const Verdict& v, const std::string& name) {
  for (const auto& c : v.checks) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

TEST(Decide, GoodPilotIsGo) {
  Verdict v = Decide(Good(), TestPolicyDecide(), Catalog(), kNowDecide);
  for (const auto& c : v.checks) {
    EXPECT_NE(c.status, CheckStatus::kFail) << c.name << ": " << c.detail;
  }
  EXPECT_EQ(v.decision, Decision::kGo);
  EXPECT_TRUE(v.binding);
  EXPECT_EQ(v.job.id, 4242);
  EXPECT_EQ(v.job.run, "gpt-1b");
  EXPECT_EQ(v.issued, "2026-11-30T04:05:06Z");
  EXPECT_EQ(v.expires, "2026-12-14T04:05:06Z");
  EXPECT_TRUE(v.signature.empty());
  EXPECT_EQ(Find(v, "restore")->verified_by, VerifiedBy::kSupervisor);
  EXPECT_EQ(Find(v, "checkpoint")->verified_by, VerifiedBy::kEpilog);
  EXPECT_EQ(Find(v, "pinning")->verified_by, VerifiedBy::kProlog);
  EXPECT_EQ(Find(v, "memory_headroom")->status, CheckStatus::kPass);
  EXPECT_EQ(Find(v, "memory_headroom")->measured, "66.0 GiB of 140.0 GiB on H200-141 (53% free)");
  EXPECT_EQ(Find(v, "container_tag"), nullptr);  // not re-resolved
}

// A node without Yama turns the good pilot NO-GO under the default policy,
// and only warns (GO) where the site sets require_ptrace_scope = false.
TEST(Decide, NodeWithoutYamaFailsUnlessTheSiteAllowsIt) {
  DecideInput in = Good();
  in.results->supervisor->ptrace_scope = -1;
  Verdict strict = Decide(in, TestPolicyDecide(), Catalog(), kNowDecide);
  EXPECT_EQ(strict.decision, Decision::kNoGo);
  EXPECT_EQ(Find(strict, "ptrace_scope")->status, CheckStatus::kFail);
  Policy lenient = TestPolicyDecide();
  lenient.require_ptrace_scope = false;
  Verdict warned = Decide(in, lenient, Catalog(), kNowDecide);
  EXPECT_EQ(warned.decision, Decision::kGo);
  EXPECT_EQ(Find(warned, "ptrace_scope")->status, CheckStatus::kWarn);
}

// The fit comes from the memory model: the run is DDP on 8 GPUs, so the
// pilot's single-process peak grows by one gradient copy (DDP buckets),
// scaled by the measured allocator workspace, plus the measured runtime
// overhead (core/models/memory_model.h).
TEST(Decide, HardwareFitUsesMemoryModelAndHeadroom) {
  Verdict v = Decide(Good(), TestPolicyDecide(), Catalog(), kNowDecide);
  ASSERT_EQ(v.hardware.size(), 3u);  // B999 is not in the catalog
  EXPECT_EQ(v.hardware[0].gpu_type, "A100-80");
  // allocated 60 GiB + DDP buckets 4 x 1.3e9, workspace 2/60, runtime 66 - 62.
  double predicted = (60.0 * kGiB + 4 * 1.3e9) * (1 + 2.0 / 60) + 4.0 * kGiB;
  EXPECT_NEAR(static_cast<double>(v.hardware[0].predicted_peak_bytes), predicted, 4);
  EXPECT_TRUE(v.hardware[0].fits);  // 71.0 of 80 GiB: 11% free >= 10%
  EXPECT_NEAR(v.hardware[0].headroom, 1 - predicted / (80.0 * kGiB), 1e-9);
  EXPECT_EQ(v.hardware[2].note, "needs ROCm qualification (stock PyTorch operators only)");
  EXPECT_EQ(Find(v, "memory_fit")->status, CheckStatus::kPass);

  // A program's loaded native extensions are what the ROCm type must be
  // qualified for, named in its note; the CUDA types' notes are unchanged.
  DecideInput program = Good();
  program.results->program.emplace();
  program.results->program->environment.extensions = {{"flash_attn", "flash-attn 2.7.4"},
                                                       {"my_ops", ""}};
  Verdict pv = Decide(program, TestPolicyDecide(), Catalog(), kNowDecide);
  ASSERT_EQ(pv.hardware.size(), 3u);
  EXPECT_EQ(pv.hardware[2].note,
            "needs ROCm qualification (with PyTorch, these native extensions the program loaded: "
            "flash_attn (flash-attn 2.7.4), my_ops (built outside any installed distribution))");
  EXPECT_EQ(pv.hardware[0].note, v.hardware[0].note);

  DecideInput big = Good();
  big.results->single->memory_resumed->device_used_bytes = 75 * kGiB;
  Verdict b = Decide(big, TestPolicyDecide(), Catalog(), kNowDecide);
  EXPECT_FALSE(b.hardware[0].fits);  // runtime overhead 13 GiB: ~80 of 80 GiB
  EXPECT_EQ(b.hardware[0].note, "does not fit with the required headroom");
  EXPECT_TRUE(b.hardware[1].fits);
}

// With the runner's memory calibration (a smaller micro-batch's allocated
// peak) the fit uses the slope between the two peaks and the measured
// offset of the static state: 60 GiB at micro-batch 8, 40 GiB at 4, so
// 5 GiB per sample and 20 GiB at none (not the 16 x 1.3e9 bytes the
// residual rule charges); DDP adds one gradient copy, and the offset grows
// with the state kept.
TEST(Decide, HardwareFitUsesTheRunnersCalibration) {
  DecideInput in = Good();
  MemoryCalibrationCheck c;
  c.status = "ok";
  c.micro_batch = 4;
  c.seq_len = 2048;
  c.steps = 2;
  c.step = 12;
  c.peak_allocated_bytes = 40 * kGiB;
  c.peak_reserved_bytes = 41 * kGiB;
  c.device_used_bytes = 43 * kGiB;
  in.results->single->memory_calibration = c;
  Verdict v = Decide(in, TestPolicyDecide(), Catalog(), kNowDecide);
  const double state = 16 * 1.3e9, ddp_state = state + 4 * 1.3e9;
  const double offset = 20.0 * kGiB - state;
  double predicted =
      (ddp_state + offset * ddp_state / state + 8 * 5.0 * kGiB) * (1 + 2.0 / 60) + 4.0 * kGiB;
  ASSERT_EQ(v.hardware.size(), 3u);
  EXPECT_NEAR(static_cast<double>(v.hardware[1].predicted_peak_bytes), predicted, 4);
  const Check* fit = Find(v, "memory_fit");
  ASSERT_NE(fit, nullptr);
  EXPECT_NE(fit->measured.find("(ddp x8, calibrated)"), std::string::npos) << fit->measured;

  // Without it (a CPU pilot records no allocator peaks; a skipped one
  // nothing) the residual rule applies, and the check says so.
  in.results->single->memory_calibration->peak_allocated_bytes.reset();
  Verdict r = Decide(in, TestPolicyDecide(), Catalog(), kNowDecide);
  EXPECT_NE(Find(r, "memory_fit")->measured.find("(ddp x8, residual)"), std::string::npos);
  in.results->single->memory_calibration.reset();
  Verdict n = Decide(in, TestPolicyDecide(), Catalog(), kNowDecide);
  EXPECT_EQ(n.hardware[1].predicted_peak_bytes, r.hardware[1].predicted_peak_bytes);
}

// A run with activation checkpointing is calibrated with it on; a plan
// for the other setting is the model's rule and says so.
TEST(Decide, CalibratedCheckpointingAndTheRuleForTheOther) {
  DecideInput in = Good();
  in.config->training.activation_checkpointing = true;
  in.results->single->shape.activation_checkpointing = true;
  MemoryCalibrationCheck c;
  c.status = "ok";
  c.micro_batch = 4;
  c.seq_len = 2048;
  c.activation_checkpointing = true;
  c.steps = 2;
  c.peak_allocated_bytes = 40 * kGiB;
  in.results->single->memory_calibration = c;
  Verdict v = Decide(in, TestPolicyDecide(), Catalog(), kNowDecide);
  EXPECT_NE(Find(v, "memory_fit")->measured.find("(ddp x8, recompute, calibrated)"),
            std::string::npos)
      << Find(v, "memory_fit")->measured;

  const SingleStage& s = *in.results->single;
  PlanQuery off;
  off.activation_checkpointing = false;
  Result<Plan> p = MakePlan(s, *in.config, Catalog(), TestPolicyDecide(), off, CalibrationFrom(s));
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->breakdown.source, "calibrated");
  EXPECT_EQ(p->options[0].memory.basis, "calibrated, activation checkpointing off by rule");
  bool noted = false;
  for (const auto& n : p->notes) {
    noted |=
        n.find("activation checkpointing off predicted by the model's rule") != std::string::npos;
  }
  EXPECT_TRUE(noted);
}

// A pilot measured with the fused loss says what the usual loss would add.
TEST(Decide, PlanNotesTheFusedLoss) {
  DecideInput in = Good();
  auto note = [&]() -> std::string {
    Result<Plan> p = MakePlan(*in.results->single, *in.config, Catalog(), TestPolicyDecide());
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    for (const auto& n : p->notes) {
      if (n.find("measured with the fused loss") != std::string::npos) return n;
    }
    return "";
  };
  EXPECT_EQ(note(), "");  // results without the field: the unfused loss
  in.results->single->shape.fused_loss = true;
  const Config& c = *in.config;
  const int64_t extra = int64_t{4} * c.model.vocab * c.run.seq_len * c.run.micro_batch;
  EXPECT_NE(note().find("holds about " + FormatGiB(extra) + " more per GPU"), std::string::npos)
      << note();
  in.results->single->shape.fused_loss = false;
  EXPECT_EQ(note(), "");
}

TEST(Decide, MemoryFitFailsOnTheWantedType) {
  DecideInput in = Good();
  in.config->run.gpu_type = "A100-80";
  in.results->single->memory_resumed->device_used_bytes = 75 * kGiB;
  Verdict v = Decide(in, TestPolicyDecide(), Catalog(), kNowDecide);
  const Check* c = Find(v, "memory_fit");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->status, CheckStatus::kFail);
  EXPECT_NE(c->detail.find("fits: H200-141, MI300X-192"), std::string::npos) << c->detail;
  EXPECT_EQ(v.decision, Decision::kNoGo);
}

// The budget: 10000 steps of 409.6 ms compute (16384 tokens at 40000 tok/s)
// plus the ring all-reduce of 4 x 1.3e9 gradient bytes over 8 GPUs on the
// H200's 900 GB/s link with 199 buckets of 25 MiB at 10 us per hop.
TEST(Decide, BudgetFromThroughput) {
  Verdict v = Decide(Good(), TestPolicyDecide(), Catalog(), kNowDecide);
  double comm_ms = 2.0 * 7 / 8 * 5.2e9 / 900e9 * 1e3 + 2.0 * 7 * 199 * 10e-3;
  double train = 10000.0 * (409.6 + comm_ms) / 1e3 / 86400;
  double ckpt = 10 * 60 / 86400.0;
  double eval = 10 * 30 / 86400.0;
  EXPECT_NEAR(v.budget.breakdown.at("train"), train, 1e-9);
  EXPECT_NEAR(v.budget.breakdown.at("checkpoint"), ckpt, 1e-12);
  EXPECT_NEAR(v.budget.breakdown.at("eval"), eval, 1e-12);
  EXPECT_EQ(v.budget.breakdown.at("data_stall"), 0);
  EXPECT_NEAR(v.budget.days, (train + ckpt + eval) * 1.15, 1e-9);
  EXPECT_EQ(v.budget.term, "7-day");
  EXPECT_NEAR(v.budget.gpu_hours, v.budget.days * 24 * 8, 1e-9);
  EXPECT_NEAR(v.budget.cost, v.budget.gpu_hours * 4.0, 1e-9);
  EXPECT_EQ(v.budget.currency, "USD");
  EXPECT_EQ(Find(v, "budget")->status, CheckStatus::kPass);

  DecideInput week = Good();
  week.config->run.reservation_days = 7;
  week.results->single->tokens_per_second = 250;  // 65.5 s a step: ~7.6 days
  Verdict w = Decide(week, TestPolicyDecide(), Catalog(), kNowDecide);
  EXPECT_EQ(w.budget.term, "30-day");  // > 7 days with the buffer
  EXPECT_EQ(Find(w, "budget")->status, CheckStatus::kWarn);
  EXPECT_EQ(w.decision, Decision::kGo);  // a warning does not block

  DecideInput slow = Good();
  slow.results->single->tokens_per_second = 40;  // 1000x slower: ~47 days
  Verdict s = Decide(slow, TestPolicyDecide(), Catalog(), kNowDecide);
  EXPECT_EQ(s.budget.term, "none");
  const Check* c = Find(s, "budget");
  EXPECT_EQ(c->status, CheckStatus::kFail);
  EXPECT_NE(c->detail.find("does not fit a 30-day term"), std::string::npos) << c->detail;
  EXPECT_EQ(s.decision, Decision::kNoGo);
}

struct Case {
  const char* name;
  std::function<void(DecideInput&, Policy&)> edit;
  std::string check;   // the check that changes
  CheckStatus status;  // to this status
  Decision decision;
  std::string detail_contains;
};

TEST(Decide, UnchangedPinsPassAndTheIdentityIsSigned) {
  DecideInput in = Good();
  EXPECT_EQ(Find(Decide(in, TestPolicyDecide(), Catalog(), kNowDecide), "pins_unchanged")->status,
            CheckStatus::kSkip);
  LockPin p;
  p.kind = "folder";
  p.name = "configs/";
  p.sha256 = std::string(64, 'c');
  p.commit = std::string(40, '1');
  p.dirty = "no";
  in.lock.pins = {p};
  in.lock.pins_submitted = PinSummary(in.lock.pins);
  in.lock.identity = RunIdentity(in.lock);
  Verdict v = Decide(in, TestPolicyDecide(), Catalog(), kNowDecide);
  EXPECT_EQ(Find(v, "pins_unchanged")->status, CheckStatus::kPass);
  EXPECT_EQ(v.decision, Decision::kGo);
  ASSERT_TRUE(v.identity.has_value());
  EXPECT_EQ(v.identity->sha256, in.lock.identity->sha256);
  EXPECT_NE(std::find(v.identity->lines.begin(), v.identity->lines.end(),
                      "pin configs/ sha256:" + std::string(64, 'c') + " commit " +
                          std::string(40, '1')),
            v.identity->lines.end());
  EXPECT_NE(CanonicalVerdict(v).find(in.lock.identity->sha256), std::string::npos);
  Result<Verdict> back = ParseVerdict(VerdictToJson(v));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->identity->lines, v.identity->lines);
}

TEST(Decide, Table) {
  const Case cases[] = {
      {"lock problem",
       [](DecideInput& in, Policy&) {
         in.lock.problems.push_back({"container_unresolved", "registry unreachable"});
       },
       "pinning", CheckStatus::kFail, Decision::kNoGo, "registry unreachable"},
      {"config changed",
       [](DecideInput& in, Policy&) { in.lock.config.sha256_copied = std::string(64, 'f'); },
       "config_unchanged", CheckStatus::kFail, Decision::kNoGo, "changed between submit"},
      {"config unreadable",
       [](DecideInput& in, Policy&) {
         in.config.reset();
         in.config_error = "pilot.toml:3: bad";
       },
       "config_unchanged", CheckStatus::kFail, Decision::kNoGo, "pilot.toml:3: bad"},
      {"pinned file moved",
       [](DecideInput& in, Policy&) {
         LockPin p;
         p.kind = "file";
         p.name = "train.py";
         p.sha256 = std::string(64, 'a');
         in.lock.pins_submitted = PinSummary({p});
         p.sha256 = std::string(64, 'b');
         in.lock.pins = {p};
       },
       "pins_unchanged", CheckStatus::kFail, Decision::kNoGo,
       "moved between submit and job start: train.py: sha256 bbbbbbbbbbbb..., at submit sha256 "
       "aaaaaaaaaaaa..."},
      {"pins not recorded at submit",
       [](DecideInput& in, Policy&) {
         LockPin p;
         p.kind = "hub_model";
         p.name = "org/m";
         in.lock.pins = {p};
       },
       "pins_unchanged", CheckStatus::kFail, Decision::kNoGo, "not recorded at submit"},
      {"runner ran other config",
       [](DecideInput& in, Policy&) { in.results->config_sha256 = std::string(64, 'e'); },
       "config_unchanged", CheckStatus::kFail, Decision::kNoGo, "different config"},
      {"results missing",
       [](DecideInput& in, Policy&) {
         in.results.reset();
         in.results_error = "results.json: no such file (job TIMEOUT)";
       },
       "completed", CheckStatus::kFail, Decision::kNoGo, "job TIMEOUT"},
      {"oom",
       [](DecideInput& in, Policy&) {
         FailureInfo f;
         f.kind = "oom";
         f.step = 1;
         f.phase = "optimizer";
         f.memory.peak_allocated_bytes = 139 * kGiB;
         f.memory.device_total_bytes = 140 * kGiB;
         in.results->single->status = "oom";
         in.results->single->failure = f;
       },
       "completed", CheckStatus::kFail, Decision::kNoGo,
       "out of memory in optimizer at step 1, peak allocated 139.0 GiB of 140.0 GiB"},
      {"runner exit", [](DecideInput& in, Policy&) { in.results->exit_code = 3; }, "completed",
       CheckStatus::kFail, Decision::kNoGo, "exited with an error"},
      {"shorter sequences",
       [](DecideInput& in, Policy&) { in.results->single->shape.seq_len = 512; }, "shape",
       CheckStatus::kFail, Decision::kNoGo, "differs"},
      {"smaller shape allowed",
       [](DecideInput& in, Policy&) {
         in.results->single->shape.micro_batch = 2;
         in.config->training.allow_smaller_shape = true;
         // Memory measured at micro_batch 2: the memory model scales the
         // activations to the run's 8, which must still fit (memory_fit).
         SingleStage& s = *in.results->single;
         s.memory.peak_allocated_bytes = 30 * kGiB;
         s.memory.peak_reserved_bytes = 31 * kGiB;
         s.memory.device_used_bytes = 32 * kGiB;
         s.memory_first_step = s.memory;
         s.memory_resumed = s.memory;
       },
       "shape", CheckStatus::kWarn, Decision::kGo, "not binding"},
      {"no optimizer state",
       [](DecideInput& in, Policy&) { in.results->single->shape.optimizer_state_included = false; },
       "shape", CheckStatus::kFail, Decision::kNoGo, "optimizer state"},
      {"too few steps", [](DecideInput&, Policy& p) { p.thresholds.min_pilot_steps = 50; }, "steps",
       CheckStatus::kFail, Decision::kNoGo, "too few"},
      {"restore unequal",
       [](DecideInput& in, Policy&) { in.results->single->restore.equal = false; }, "restore",
       CheckStatus::kFail, Decision::kNoGo, "differs"},
      {"restore over tolerance",
       [](DecideInput& in, Policy&) { in.results->single->restore.max_rel_loss_diff = 0.01; },
       "restore", CheckStatus::kFail, Decision::kNoGo, "differs"},
      {"restore's first step past restore_first_tolerance",
       [](DecideInput& in, Policy&) {
         in.results->single->restore.first_tolerance = 1e-4;
         in.results->single->restore.first_rel_loss_diff = 5e-4;
       },
       "restore", CheckStatus::kFail, Decision::kNoGo, "differs"},
      {"restore judged against the noise, and root's losses say otherwise",
       [](DecideInput& in, Policy&) {
         // Steps 11..20: the reference's, the resumed (1% off from step
         // 12) and a repeat that follows the resumed one exactly.
         SingleStage& s = *in.results->single;
         s.losses.assign(20, 2.0);
         s.restore.mode = "noise";
         s.restore.noise_steps = 9;
         s.restore.resumed_losses.assign(10, 2.02);
         s.restore.resumed_losses[0] = 2.0;
         s.restore.repeat_losses = s.restore.resumed_losses;
       },
       "restore", CheckStatus::kFail, Decision::kNoGo, "differs"},
      {"restore not bitwise on cpu",
       [](DecideInput& in, Policy&) {
         in.results->single->restore.mode = "bitwise";
         in.results->single->restore.max_abs_loss_diff = 1e-9;
       },
       "restore", CheckStatus::kFail, Decision::kNoGo, "differs"},
      {"restore skipped",
       [](DecideInput& in, Policy&) {
         in.results->single->restore.skipped = "PILOT_TEST_SKIP_RESTORE";
       },
       "restore", CheckStatus::kFail, Decision::kNoGo, "skipped"},
      {"restore did not run",
       [](DecideInput& in, Policy&) { in.results->single->restore.ran = false; }, "restore",
       CheckStatus::kFail, Decision::kNoGo, "did not run"},
      {"verify did not run",
       [](DecideInput& in, Policy&) {
         in.verify = VerifyReport{};
         in.verify.error = "timed out after 600 s";
       },
       "checkpoint", CheckStatus::kFail, Decision::kNoGo, "timed out after 600 s"},
      {"manifest mismatch",
       [](DecideInput& in, Policy&) {
         in.verify.manifest_ok = false;
         in.verify.manifest_detail = "model.safetensors: sha256 mismatch";
       },
       "checkpoint", CheckStatus::kFail, Decision::kNoGo, "sha256 mismatch"},
      {"no COMPLETE", [](DecideInput& in, Policy&) { in.verify.complete_marker = false; },
       "checkpoint", CheckStatus::kFail, Decision::kNoGo, "incomplete"},
      {"missing optimizer state",
       [](DecideInput& in, Policy&) { in.verify.params_with_optimizer_state = 149; }, "checkpoint",
       CheckStatus::kFail, Decision::kNoGo, "no optimizer state"},
      {"eval differs", [](DecideInput& in, Policy&) { in.verify.eval_within = false; },
       "checkpoint", CheckStatus::kFail, Decision::kNoGo, "differs from the recorded"},
      {"memory tight",
       [](DecideInput& in, Policy&) { in.results->single->memory.device_used_bytes = 130 * kGiB; },
       "memory_headroom", CheckStatus::kFail, Decision::kNoGo, "too little memory"},
      {"cpu pilot",
       [](DecideInput& in, Policy&) {
         SingleStage& s = *in.results->single;
         s.device = "cpu";
         s.memory = MemoryStats{};
         s.memory_first_step = MemoryStats{};
         s.memory_resumed.reset();
       },
       "memory_headroom", CheckStatus::kSkip, Decision::kGo, "cpu"},
      {"precision diverges",
       [](DecideInput& in, Policy&) {
         in.results->single->precision_check.max_rel_loss_diff = 0.2;
       },
       "precision", CheckStatus::kFail, Decision::kNoGo, "diverges"},
      {"precision not measured",
       [](DecideInput& in, Policy&) { in.results->single->precision_check.ran = false; },
       "precision", CheckStatus::kWarn, Decision::kGo, "not compared"},
      {"fp32", [](DecideInput& in, Policy&) { in.results->single->shape.precision = "fp32"; },
       "precision", CheckStatus::kSkip, Decision::kGo, "full precision"},
      {"tag unchanged",
       [](DecideInput& in, Policy&) { in.container_digest_now = in.lock.container.digest; },
       "container_tag", CheckStatus::kPass, Decision::kGo, "still points"},
      {"tag moved",
       [](DecideInput& in, Policy&) { in.container_digest_now = "sha256:" + std::string(64, '9'); },
       "container_tag", CheckStatus::kWarn, Decision::kGo, "moved during the job"},
  };
  for (const auto& c : cases) {
    DecideInput in = Good();
    Policy p = TestPolicyDecide();
    c.edit(in, p);
    Verdict v = Decide(in, p, Catalog(), kNowDecide);
    EXPECT_EQ(v.decision, c.decision) << c.name;
    const Check* ch = Find(v, c.check);
    ASSERT_NE(ch, nullptr) << c.name;
    EXPECT_EQ(ch->status, c.status) << c.name << ": " << ch->detail;
    EXPECT_NE(ch->detail.find(c.detail_contains), std::string::npos)
        << c.name << ": \"" << ch->detail << "\"";
    // GO iff no check fails.
    bool any_fail = false;
    for (const auto& x : v.checks) any_fail |= x.status == CheckStatus::kFail;
    EXPECT_EQ(v.decision == Decision::kNoGo, any_fail) << c.name;
  }
}

// The image that ran, read back from the runtime, against the one pinned.
TEST(Decide, ContainerThatRanMustBeThePinnedOne) {
  DecideInput in = Good();
  EXPECT_EQ(Find(Decide(in, TestPolicyDecide(), Catalog(), kNowDecide), "container"), nullptr);
  const std::string pinned = in.lock.container.digest;
  ASSERT_FALSE(pinned.empty());
  in.results->program.emplace();
  ProgramContainer ran;
  ran.runtime = "podman";
  ran.image = "reg/x@" + pinned;
  ran.digest = pinned;
  in.results->program->container = ran;
  const Verdict good = Decide(in, TestPolicyDecide(), Catalog(), kNowDecide);
  const Check* ok = Find(good, "container");
  ASSERT_NE(ok, nullptr);
  EXPECT_EQ(ok->status, CheckStatus::kPass);
  EXPECT_EQ(ok->verified_by, VerifiedBy::kSupervisor);

  const std::string other = "sha256:" + std::string(64, '7');
  in.results->program->container->digest = other;
  Verdict bad = Decide(in, TestPolicyDecide(), Catalog(), kNowDecide);
  EXPECT_EQ(bad.decision, Decision::kNoGo);
  const Check* c = Find(bad, "container");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->status, CheckStatus::kFail);
  EXPECT_NE(c->detail.find(other), std::string::npos) << c->detail;
  EXPECT_NE(c->detail.find(pinned), std::string::npos) << c->detail;

  in.results->program->container->digest.clear();
  in.results->program->container->problem = "podman image inspect: exit 125";
  const Verdict unread = Decide(in, TestPolicyDecide(), Catalog(), kNowDecide);
  c = Find(unread, "container");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->status, CheckStatus::kFail);
  EXPECT_NE(c->detail.find("exit 125"), std::string::npos) << c->detail;

  // Started by digest under pyxis, which reports nothing: a pass that says
  // the digest was not read back.
  in.results->program->container->runtime = "pyxis";
  in.results->program->container->digest = pinned;
  in.results->program->container->digest_source = "reference";
  in.results->program->container->problem.clear();
  const Verdict by_reference = Decide(in, TestPolicyDecide(), Catalog(), kNowDecide);
  c = Find(by_reference, "container");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->status, CheckStatus::kPass);
  EXPECT_NE(c->detail.find("not read back"), std::string::npos) << c->detail;

  // An image file that changed while the pilot ran, hashed again after.
  in.results->program->container->runtime = "apptainer";
  in.results->program->container->image = "/images/torch.sif";
  in.results->program->container->digest = other;
  in.results->program->container->digest_source = "file";
  const Verdict changed = Decide(in, TestPolicyDecide(), Catalog(), kNowDecide);
  EXPECT_EQ(changed.decision, Decision::kNoGo);
  c = Find(changed, "container");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->status, CheckStatus::kFail);
  EXPECT_NE(c->detail.find("changed while the pilot ran"), std::string::npos) << c->detail;
  EXPECT_NE(c->detail.find(other), std::string::npos) << c->detail;
  EXPECT_NE(c->detail.find(pinned), std::string::npos) << c->detail;
}

TEST(Decide, NonBindingWhenSmallerShape) {
  DecideInput in = Good();
  in.results->single->shape.seq_len = 1024;
  in.config->training.allow_smaller_shape = true;
  Verdict v = Decide(in, TestPolicyDecide(), Catalog(), kNowDecide);
  EXPECT_EQ(v.decision, Decision::kGo);
  EXPECT_FALSE(v.binding);
}

TEST(Decide, RestoreIsTheSupervisorsOnlyWhenItCompared) {
  DecideInput in = Good();
  Verdict v = Decide(in, TestPolicyDecide(), Catalog(), kNowDecide);
  EXPECT_EQ(Find(v, "restore")->verified_by, VerifiedBy::kSupervisor);
  EXPECT_EQ(Find(v, "completed")->verified_by, VerifiedBy::kSupervisor);
  EXPECT_EQ(Find(v, "checkpoint")->verified_by, VerifiedBy::kEpilog);
  EXPECT_EQ(Find(v, "memory_headroom")->verified_by, VerifiedBy::kWorkload);
  EXPECT_EQ(v.decision, Decision::kGo);
  in.verify.eval_recomputed = false;
  v = Decide(in, TestPolicyDecide(), Catalog(), kNowDecide);
  EXPECT_EQ(v.decision, Decision::kNoGo);  // the checkpoint check fails
}

// Exit 1 (a check failed) is a run that completed: the failing check says
// which; an exit 1 no check explains still fails.
TEST(Decide, ExitOneNamesTheFailingCheck) {
  DecideInput in = Good();
  in.results->exit_code = 1;
  in.results->single->restore.equal = false;
  Verdict v = Decide(in, TestPolicyDecide(), Catalog(), kNowDecide);
  EXPECT_EQ(v.decision, Decision::kNoGo);
  EXPECT_EQ(Find(v, "completed")->status, CheckStatus::kPass);
  EXPECT_EQ(Find(v, "restore")->status, CheckStatus::kFail);
  in.results->single->restore.equal = true;
  v = Decide(in, TestPolicyDecide(), Catalog(), kNowDecide);
  EXPECT_EQ(v.decision, Decision::kNoGo);
  EXPECT_EQ(Find(v, "completed")->status, CheckStatus::kFail);
  in.results->exit_code = 4;
  v = Decide(in, TestPolicyDecide(), Catalog(), kNowDecide);
  EXPECT_EQ(Find(v, "completed")->status, CheckStatus::kFail);
  EXPECT_EQ(Find(v, "restore"), nullptr);
}

// The supervisor was told to stop (cancelled, time limit): whatever the
// stages say, the pilot did not finish.
TEST(Decide, AStoppedPilotDidNotFinish) {
  DecideInput in = Good();
  in.results->supervisor->stopped = true;
  in.results->exit_code = 4;
  Verdict v = Decide(in, TestPolicyDecide(), Catalog(), kNowDecide);
  EXPECT_EQ(v.decision, Decision::kNoGo);
  const Check* c = Find(v, "completed");
  EXPECT_EQ(c->status, CheckStatus::kFail);
  EXPECT_EQ(c->verified_by, VerifiedBy::kSupervisor);
  EXPECT_NE(c->detail.find("did not finish"), std::string::npos);
  in.results->single.reset();
  v = Decide(in, TestPolicyDecide(), Catalog(), kNowDecide);
  EXPECT_NE(Find(v, "completed")->detail.find("cancelled or reached its time limit"), std::string::npos);
  // A node of the job that Slurm took down is why.
  in.nodes_down = {"pn2 (Not responding)"};
  v = Decide(in, TestPolicyDecide(), Catalog(), kNowDecide);
  EXPECT_EQ(Find(v, "completed")->detail,
            "the pilot did not finish: the job ended while Slurm had its node pn2 (Not responding) down");
  in.results.reset();
  in.results_error = "no results.json from the supervisor";
  v = Decide(in, TestPolicyDecide(), Catalog(), kNowDecide);
  EXPECT_EQ(Find(v, "completed")->detail,
            "no results.json from the supervisor; Slurm has the job's node pn2 (Not responding) down");
}

// A job of several nodes: every other node's record is held against the
// first node's lock; what the ranks share must be the same everywhere.
TEST(Decide, EveryNodeOfAJobPinnedTheSame) {
  DecideInput in = Good();
  in.lock.job.nodes = 3;
  in.lock.job.node_list = "gpu[01-03]";
  in.lock.versions = {{"libtorch", "2.4.1"}, {"nccl", "2.21.5"}, {"kernel", "6.1.0-27"}};
  // Not in sight of this node: nothing compared.
  Verdict v = Decide(in, TestPolicyDecide(), Catalog(), kNowDecide);
  ASSERT_NE(Find(v, "nodes_pinned"), nullptr);
  EXPECT_EQ(Find(v, "nodes_pinned")->status, CheckStatus::kSkip);
  EXPECT_EQ(v.decision, Decision::kGo);

  Lock same = in.lock;
  same.job.host = "gpu02";
  same.container = {"", "", "", "none"};  // a node without the pyxis image pins none
  same.versions["kernel"] = "6.1.0-28";   // not shared by the ranks' software
  Lock other = same;
  other.job.host = "gpu03";
  in.other_nodes = {{"gpu02", same, ""}, {"gpu03", other, ""}};
  v = Decide(in, TestPolicyDecide(), Catalog(), kNowDecide);
  EXPECT_EQ(Find(v, "nodes_pinned")->status, CheckStatus::kPass) << Find(v, "nodes_pinned")->detail;
  EXPECT_EQ(Find(v, "nodes_pinned")->measured, "3 nodes, same pins");
  EXPECT_EQ(Find(v, "nodes_pinned")->verified_by, VerifiedBy::kProlog);

  // A record missing: a warning that names the node.
  in.other_nodes[1] = {"gpu03", std::nullopt, "its prolog left no record"};
  v = Decide(in, TestPolicyDecide(), Catalog(), kNowDecide);
  EXPECT_EQ(Find(v, "nodes_pinned")->status, CheckStatus::kWarn);
  EXPECT_EQ(Find(v, "nodes_pinned")->detail, "no pins of gpu03 (its prolog left no record)");
  EXPECT_EQ(v.decision, Decision::kGo);

  // Another NCCL, other GPUs, another image behind the tag: NO-GO naming each.
  other.versions["nccl"] = "2.18.1";
  other.gpus = {{0, "NVIDIA A100-SXM4-80GB", "GPU-9", 80 * kGiB}};
  other.container = {"ghcr.io/o/i:1", "sha256:" + std::string(64, 'c'), "", "registry"};
  in.other_nodes[1] = {"gpu03", other, ""};
  v = Decide(in, TestPolicyDecide(), Catalog(), kNowDecide);
  EXPECT_EQ(v.decision, Decision::kNoGo);
  const Check* c = Find(v, "nodes_pinned");
  EXPECT_EQ(c->status, CheckStatus::kFail);
  EXPECT_EQ(c->measured, "3 nodes, 1 different");
  EXPECT_EQ(c->detail, "gpu03: nccl 2.18.1 (gpu01: 2.21.5); 1 x NVIDIA A100-SXM4-80GB (gpu01: 1 x NVIDIA H200); "
                       "container sha256:" + std::string(64, 'c') + " (gpu01: sha256:" + std::string(64, 'b') +
                       "): the run's ranks would not run the same software on the same hardware");
  // A problem its prolog recorded fails it too.
  same.problems = {{"container_unresolved", "ghcr.io/o/i:1: registry unreachable"}};
  in.other_nodes = {{"gpu02", same, ""}};
  v = Decide(in, TestPolicyDecide(), Catalog(), kNowDecide);
  EXPECT_NE(Find(v, "nodes_pinned")->detail.find("gpu02: container_unresolved: ghcr.io/o/i:1: registry unreachable"),
            std::string::npos);
  // One node: no such check.
  in.lock.job.nodes = 1;
  EXPECT_EQ(Find(Decide(in, TestPolicyDecide(), Catalog(), kNowDecide), "nodes_pinned"), nullptr);
}

// The runner was killed (SIGKILL during its checkpoint save, say): the
// supervisor recorded the signal and no stage results; the verdict names
// the kill, on the supervisor's word.
TEST(Decide, AKilledRunnerIsNamedInTheVerdict) {
  DecideInput in = Good();
  in.results->single.reset();
  in.results->exit_code = 4;
  SupervisedProcess p;
  p.role = "single";
  p.signal = 9;
  p.wall_seconds = 12.34;
  p.report_problem = "single: the process wrote no report (killed by signal 9)";
  in.results->supervisor->processes = {p};
  Verdict v = Decide(in, TestPolicyDecide(), Catalog(), kNowDecide);
  EXPECT_EQ(v.decision, Decision::kNoGo);
  const Check* c = Find(v, "completed");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->status, CheckStatus::kFail);
  EXPECT_EQ(c->measured, "single killed by SIGKILL (9)");
  EXPECT_EQ(c->detail, "the pilot was killed: its single process ended by SIGKILL (9) after 12.3 s and wrote no results");
  EXPECT_EQ(c->verified_by, VerifiedBy::kSupervisor);
  // A signal the table does not name, and a process that exited: the plain record.
  in.results->supervisor->processes[0].signal = 40;
  EXPECT_EQ(Find(Decide(in, TestPolicyDecide(), Catalog(), kNowDecide), "completed")->measured, "single killed by signal 40");
  in.results->supervisor->processes[0].signal = 0;
  in.results->supervisor->processes[0].exit_code = 4;
  EXPECT_EQ(Find(Decide(in, TestPolicyDecide(), Catalog(), kNowDecide), "completed")->measured, "no single stage");
}

// Results the workload wrote itself (a runner started by hand, no
// supervisor): its pass of "completed" and "restore" is only its word, and
// the site's independent_checks turn that into a fail.
TEST(Decide, WorkloadOnlyPassesOfIndependentChecksFail) {
  DecideInput in = Good();
  in.results->supervisor.reset();
  Verdict v = Decide(in, TestPolicyDecide(), Catalog(), kNowDecide);
  EXPECT_EQ(v.decision, Decision::kNoGo);
  const Check* restore = Find(v, "restore");
  EXPECT_EQ(restore->verified_by, VerifiedBy::kWorkload);
  EXPECT_EQ(restore->status, CheckStatus::kFail);
  EXPECT_NE(restore->detail.find("independent_checks"), std::string::npos);
  EXPECT_EQ(Find(v, "completed")->status, CheckStatus::kFail);
  Policy open = TestPolicyDecide();
  open.independent_checks.clear();
  v = Decide(in, open, Catalog(), kNowDecide);
  EXPECT_EQ(v.decision, Decision::kGo);
  EXPECT_EQ(Find(v, "restore")->verified_by, VerifiedBy::kWorkload);
}

TEST(Decide, LifetimeFromPolicyAndPurity) {
  Policy p = TestPolicyDecide();
  p.thresholds.verdict_lifetime_days = 1;
  DecideInput in = Good();
  Verdict a = Decide(in, p, Catalog(), kNowDecide);
  Verdict b = Decide(in, p, Catalog(), kNowDecide);
  EXPECT_EQ(a.expires, "2026-12-01T04:05:06Z");
  EXPECT_EQ(VerdictToJson(a), VerdictToJson(b));  // same inputs, same verdict
}

TEST(Decide, PeakDeviceBytes) {
  SingleStage s;
  EXPECT_FALSE(PeakDeviceBytes(s).has_value());
  s.memory.peak_allocated_bytes = 5;
  s.memory_first_step.peak_reserved_bytes = 9;
  EXPECT_EQ(PeakDeviceBytes(s), 9);
}

}  // namespace
}  // namespace pilot

namespace pilot {
namespace {

// The node stage adds its checks: a failed rank or an unequal restore at any
// world size is a NO-GO; low GPU scaling is a warning.
NodeStage GoodNode() {
  NodeStage n;
  n.status = "ok";
  n.world_size = 2;
  n.mode = "ddp";
  n.scaling.efficiency = 0.95;
  n.comm.exposed_fraction = 0.04;
  NodeRestore same;
  same.ran = true;
  same.equal = true;
  same.world_size = 2;
  same.from_world_size = 2;
  NodeRestore other = same;
  other.world_size = 1;
  n.restore = {same, other};
  return n;
}

TEST(DecideNode, EqualRestoresPass) {
  DecideInput in = Good();
  in.results->node = GoodNode();
  Verdict v = Decide(in, TestPolicyDecide(), Catalog(), kNowDecide);
  ASSERT_NE(Find(v, "node_restore"), nullptr);
  EXPECT_EQ(Find(v, "node_restore")->status, CheckStatus::kPass);
  EXPECT_EQ(Find(v, "node_restore")->measured, "2 procs ddp: 2->2 equal, 2->1 equal");
  EXPECT_EQ(v.decision, Decision::kGo);
}

TEST(DecideNode, UnequalRestoreAtAnotherWorldSizeIsNoGo) {
  DecideInput in = Good();
  in.results->node = GoodNode();
  in.results->node->restore[1].equal = false;
  in.results->node->restore[1].detail = "parameters differ";
  Verdict v = Decide(in, TestPolicyDecide(), Catalog(), kNowDecide);
  EXPECT_EQ(Find(v, "node_restore")->status, CheckStatus::kFail);
  EXPECT_EQ(Find(v, "node_restore")->detail, "parameters differ");
  EXPECT_EQ(v.decision, Decision::kNoGo);
}

TEST(DecideNode, FailedRankIsNamed) {
  DecideInput in = Good();
  in.results->node = GoodNode();
  in.results->node->failure = NodeFailure{"train", 1, "killed by signal 9"};
  Verdict v = Decide(in, TestPolicyDecide(), Catalog(), kNowDecide);
  EXPECT_EQ(Find(v, "node_stage")->status, CheckStatus::kFail);
  EXPECT_EQ(Find(v, "node_stage")->detail, "rank 1: killed by signal 9");
  EXPECT_EQ(v.decision, Decision::kNoGo);
}

TEST(DecideNode, RanksOnSeveralNodesAreCountedAndAFailureNamesItsNodeOnce) {
  DecideInput in = Good();
  in.results->node = GoodNode();
  NodeStage& n = *in.results->node;
  n.world_size = 4;
  for (int r = 0; r < 4; ++r) {
    NodeRankStats s;
    s.rank = r;
    s.host = r < 2 ? "pn1" : "pn2";
    n.ranks.push_back(s);
  }
  Verdict v = Decide(in, TestPolicyDecide(), Catalog(), kNowDecide);
  EXPECT_EQ(Find(v, "node_restore")->measured, "4 procs ddp on 2 nodes: 2->2 equal, 2->1 equal");
  EXPECT_EQ(Find(v, "node_levels"), nullptr) << "no levels measured";
  n.comm.intra_node = NodeCommLevel{2, 2, 12'600'000, 3.14, 4.0};
  n.comm.inter_node = NodeCommLevel{2, 2, 12'600'000, 9.8, 1.3};
  v = Decide(in, TestPolicyDecide(), Catalog(), kNowDecide);
  ASSERT_NE(Find(v, "node_levels"), nullptr);
  EXPECT_EQ(Find(v, "node_levels")->measured,
            "all-reduce of 12.6 MB: 3.1 ms within a node (2 ranks x 2), 9.8 ms between nodes (2 ranks x 2)");
  EXPECT_EQ(Find(v, "node_levels")->status, CheckStatus::kPass) << "a GPU pilot: recorded as measured";
  EXPECT_EQ(v.decision, Decision::kGo) << "recorded, not judged";
  n.failure = NodeFailure{"train", 2, "rank 2 on pn2 failed (srun: Killed)"};
  v = Decide(in, TestPolicyDecide(), Catalog(), kNowDecide);
  EXPECT_EQ(Find(v, "node_stage")->measured, "4 procs ddp on 2 nodes, failed in train");
  EXPECT_EQ(Find(v, "node_stage")->detail, "rank 2 on pn2 failed (srun: Killed)");
}


// A sharded run whose state does not fit one GPU: its single stage ran 8
// of 32 layers (runner/single/depth.h). The shape still passes and says
// so, the memory evidence is the node stage's per-rank peak at full depth,
// and the plan's memory_fit extends the single stage per layer.
DecideInput ReducedDepthPilot() {
  DecideInput in = Good();
  in.config->parallel.mode = "sharded";
  in.config->model.kind = "llama";
  in.config->model.layers = 32;
  in.config->model.d_model = 4096;
  in.config->model.heads = 32;
  in.config->model.vocab = 128256;
  in.config->run.gpus_per_node = 8;
  in.config->run.nodes = 4;
  SingleStage& s = *in.results->single;
  s.shape.params = 2800000000;  // 8 layers and the embeddings
  s.reduced_depth = ReducedDepth{8,           32,          8030000000, 160 * kGiB, 50 * kGiB,
                                 140 * kGiB,  126 * kGiB,  "the run's training state does not fit one process"};
  return in;
}

TEST(DecideReducedDepth, TheNodeStagesPeakIsTheRunsMemory) {
  DecideInput in = ReducedDepthPilot();
  NodeStage n = GoodNode();
  n.mode = "sharded";
  n.memory.fresh_peak_bytes = 40 * kGiB;
  n.memory.resumed_peak_bytes = 42 * kGiB;
  in.results->node = n;
  Verdict v = Decide(in, TestPolicyDecide(), Catalog(), kNowDecide);
  const Check* shape = Find(v, "shape");
  ASSERT_NE(shape, nullptr);
  EXPECT_EQ(shape->status, CheckStatus::kPass);
  EXPECT_NE(shape->measured.find("8 of 32 layers"), std::string::npos) << shape->measured;
  EXPECT_NE(shape->detail.find("reduced depth"), std::string::npos) << shape->detail;
  const Check* mem = Find(v, "memory_headroom");
  ASSERT_NE(mem, nullptr);
  EXPECT_EQ(mem->status, CheckStatus::kPass);
  EXPECT_EQ(mem->measured.rfind("42.0 GiB", 0), 0u) << mem->measured;
  EXPECT_NE(mem->detail.find("full-node stage's per-rank peak at full depth"), std::string::npos);
  // The node stage out of memory at full depth: NO-GO, as for any run.
  in.results->node->memory.resumed_peak_bytes = 139 * kGiB;
  v = Decide(in, TestPolicyDecide(), Catalog(), kNowDecide);
  EXPECT_EQ(Find(v, "memory_headroom")->status, CheckStatus::kFail);
  EXPECT_EQ(v.decision, Decision::kNoGo);
}

TEST(DecideReducedDepth, WithoutANodeStageTheMemoryIsOnlyPredicted) {
  DecideInput in = ReducedDepthPilot();
  Verdict v = Decide(in, TestPolicyDecide(), Catalog(), kNowDecide);
  const Check* mem = Find(v, "memory_headroom");
  ASSERT_NE(mem, nullptr);
  EXPECT_EQ(mem->status, CheckStatus::kWarn);
  EXPECT_NE(mem->detail.find("predicted only"), std::string::npos);
}

}  // namespace
}  // namespace pilot
