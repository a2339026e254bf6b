// Decide() for a pilot of the user's own program (pilot-program(7)): the
// supervisor vouches for completion, its sentence is the failure's detail,
// an unreported shape is not binding, and the checkpoint is the program's
// own, re-read file by file by the epilog.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "core/decide/decide.h"

namespace pilot {
namespace {

constexpr int64_t kNow = 1796011506;  // 2026-11-30T04:05:06Z

DecideInput ProgramPilot() {
  DecideInput in;
  in.lock.job = {4242, "alice", 1001, 1001, 1, "cpu01", "cpu01", "/home/alice"};
  in.lock.config = {"/home/alice/train.toml", "/var/lib/slurm-pilot/jobs/4242/pilot.toml",
                    std::string(64, 'a'), std::string(64, 'a')};
  Config cfg;
  cfg.run.name = "mine";
  cfg.run.seq_len = 256;
  cfg.run.micro_batch = 4;
  cfg.training.steps = 20;
  cfg.program.command = {"python3", "train.py"};
  in.config = cfg;

  Results r;
  r.workload = "program";
  r.config_sha256 = std::string(64, 'a');
  r.supervisor.emplace();
  r.supervisor->restore_compared = true;
  r.supervisor->ptrace_scope = 1;  // a node with Yama (ptrace_scope_test.cc: without)
  SingleStage s;
  s.status = "ok";
  s.device = "cpu";
  s.device_name = "cpu";
  s.shape.model_kind = "program";
  s.shape.seq_len = 256;
  s.shape.micro_batch = 4;
  s.shape.tokens_per_step = 1024;
  s.steps = 20;
  s.checkpoint.path = "/var/lib/slurm-pilot/jobs/4242/work/pilot-checkpoints/single";
  s.checkpoint.step = 10;
  s.restore.ran = true;
  s.restore.equal = true;
  s.restore.mode = "bitwise";
  s.restore.from_step = 10;
  s.restore.to_step = 20;
  r.single = s;
  ProgramInfo p;
  p.command = cfg.program.command;
  p.launcher = "pilot";
  p.metrics = "records";
  p.shape_reported = true;
  p.checkpoint_dir = s.checkpoint.path;
  p.checkpoint_files = "/var/lib/slurm-pilot/jobs/4242/checkpoint-files-single.json";
  p.checkpoint_file_count = 1;
  r.program = p;
  in.results = r;

  VerifyReport& v = in.verify;
  v.ran = true;
  v.mode = "program";
  v.checkpoint = s.checkpoint.path;
  v.manifest_ok = true;
  v.format = "torch";
  v.tensors = 12;
  v.optimizer_state = true;
  v.files = {{"ckpt.pt", 4096, std::string(64, 'c'), "torch", true, 12, "a dict of 3 keys"}};
  return in;
}

Policy TestPolicy() {
  Policy p;
  p.thresholds.min_pilot_steps = 10;
  return p;
}

Check Get(const Verdict& v, const std::string& name) {
  for (const Check& c : v.checks) {
    if (c.name == name) return c;
  }
  ADD_FAILURE() << "no check " << name;
  return Check{};
}

Verdict DecideNow(const DecideInput& in) { return Decide(in, TestPolicy(), HardwareCatalog{}, kNow); }

TEST(DecideProgram, TheSupervisorVouchesForCompletion) {
  const Verdict v = DecideNow(ProgramPilot());
  const Check c = Get(v, "completed");
  EXPECT_EQ(c.status, CheckStatus::kPass);
  EXPECT_EQ(c.verified_by, VerifiedBy::kSupervisor);
  EXPECT_EQ(Get(v, "shape").status, CheckStatus::kPass);
  EXPECT_TRUE(v.binding);
  const Check k = Get(v, "checkpoint");
  EXPECT_EQ(k.status, CheckStatus::kPass) << k.detail;
  EXPECT_EQ(k.verified_by, VerifiedBy::kEpilog);
  EXPECT_EQ(k.measured, "1 files, torch, 12 tensors, optimizer state");
}

TEST(DecideProgram, AFailureIsTheSupervisorsSentence) {
  DecideInput in = ProgramPilot();
  FailureInfo f;
  f.kind = "oom";
  f.step = 7;
  f.phase = "reference";
  f.message = "the program ran out of memory at step 7 (rank 0): torch.OutOfMemoryError: CUDA out of memory";
  in.results->single->status = "oom";
  in.results->single->failure = f;
  in.results->exit_code = 3;
  const Check c = Get(DecideNow(in), "completed");
  EXPECT_EQ(c.status, CheckStatus::kFail);
  EXPECT_EQ(c.measured, "out of memory at step 7");
  EXPECT_EQ(c.detail, f.message);
  EXPECT_EQ(c.verified_by, VerifiedBy::kSupervisor);

  f.kind = "error";
  f.message = "the program (rank 0) exited with status 1 after step 3: ValueError: bad batch";
  in.results->single->failure = f;
  const Check e = Get(DecideNow(in), "completed");
  EXPECT_EQ(e.measured, "error at step 7");
  EXPECT_EQ(e.detail, f.message);
}

TEST(DecideProgram, AnUnreportedShapeIsNotBinding) {
  DecideInput in = ProgramPilot();
  in.results->program->shape_reported = false;
  in.results->single->shape.seq_len = 0;
  in.results->single->shape.micro_batch = 0;
  const Verdict v = DecideNow(in);
  const Check s = Get(v, "shape");
  EXPECT_EQ(s.status, CheckStatus::kWarn);
  EXPECT_EQ(s.measured, "not reported");
  EXPECT_NE(s.detail.find("not binding"), std::string::npos);
  EXPECT_FALSE(v.binding);
}

TEST(DecideProgram, CheckpointChecks) {
  auto checkpoint = [](const std::function<void(VerifyReport&)>& change) {
    DecideInput in = ProgramPilot();
    change(in.verify);
    return Get(DecideNow(in), "checkpoint");
  };
  const Check changed = checkpoint([](VerifyReport& v) {
    v.manifest_ok = false;
    v.manifest_detail = "ckpt.pt: sha256 differs from the list made after the reference process";
  });
  EXPECT_EQ(changed.status, CheckStatus::kFail);
  EXPECT_EQ(changed.measured, "files changed");
  EXPECT_NE(changed.detail.find("ckpt.pt: sha256 differs"), std::string::npos) << changed.detail;

  const Check no_state = checkpoint([](VerifyReport& v) { v.optimizer_state = false; });
  EXPECT_EQ(no_state.status, CheckStatus::kFail);
  EXPECT_EQ(no_state.measured, "1 files, torch, 12 tensors, NO optimizer state");
  EXPECT_NE(no_state.detail.find("no optimizer state"), std::string::npos);

  const Check unreadable = checkpoint([](VerifyReport& v) {
    v.format = "unknown";
    v.tensors = 0;
    v.optimizer_state = false;
    v.files = {{"state.bin", 4096, std::string(64, 'd'), "other", false, 0, "not a known format"}};
    v.not_readable = {"state.bin"};
  });
  EXPECT_EQ(unreadable.status, CheckStatus::kWarn);
  EXPECT_NE(unreadable.detail.find("not independently readable: state.bin"), std::string::npos)
      << unreadable.detail;

  const Check empty = checkpoint([](VerifyReport& v) {
    v.files.clear();
    v.format = "none";
  });
  EXPECT_EQ(empty.status, CheckStatus::kFail);
  EXPECT_EQ(empty.measured, "no files");

  const Check problem = checkpoint([](VerifyReport& v) { v.problems = {"ckpt.pt: truncated zip", "b: x"}; });
  EXPECT_EQ(problem.status, CheckStatus::kFail);
  EXPECT_EQ(problem.detail, "ckpt.pt: truncated zip (and 1 more)");

  const Check not_run = checkpoint([](VerifyReport& v) {
    v = VerifyReport{};
    v.error = "timed out after 600 s";
  });
  EXPECT_EQ(not_run.status, CheckStatus::kFail);
  EXPECT_EQ(not_run.detail, "verification did not run: timed out after 600 s");

  const Check safetensors = checkpoint([](VerifyReport& v) {
    v.format = "safetensors";
    v.files[0].format = "safetensors";
  });
  EXPECT_EQ(safetensors.status, CheckStatus::kPass);
}

}  // namespace
}  // namespace pilot
