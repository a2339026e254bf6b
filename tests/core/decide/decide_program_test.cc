// Decide() for a pilot of the user's own program (pilot-program(7)): the
// supervisor vouches for completion, its sentence is the failure's detail,
// an unreported shape is not binding, the checkpoint is the program's
// own, re-read file by file by the epilog, the restore's losses are the
// program's figures compared by the supervisor, and a GO rests on what root
// saw: that the resumed process opened the checkpoint.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "core/decide/decide.h"
#include "core/decide/grant.h"
#include "core/models/plan.h"

namespace pilot {
namespace {

// What the supervisor saw of a checkpoint: opens (and, with `read_bytes`
// >= 0, the page cache's measure of what was read, `outside` opens by
// another process of the user).
CheckpointRead Seen(bool watched, const std::string& problem, int files, int64_t bytes, int opened,
                    int64_t opened_bytes, int64_t read_bytes = -1, int read_files = 0, int outside = 0) {
  CheckpointRead cr;
  cr.watched = watched;
  cr.problem = problem;
  cr.files = files;
  cr.bytes = bytes;
  cr.opened_files = opened;
  cr.opened_bytes = opened_bytes;
  if (read_bytes >= 0) {
    cr.read_measured = true;
    cr.read_bytes = read_bytes;
    cr.read_files = read_files;
    cr.first_record_seconds = 2.5;
  }
  if (outside > 0) {
    cr.outside_opens = outside;
    cr.outside_example = "pid 77 (cat), uid 1000";
  }
  return cr;
}


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
  cfg.checkpoint.at_step = 10;
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
  p.checkpoint_read = Seen(true, "", 1, 4096, 1, 4096);
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

// A GO whose program reported no parameter count has no plan: the budget
// check says so and what it means for a grant, rather than being left out.
TEST(DecideProgram, NoParameterCountIsSaidInTheBudgetCheck) {
  const Verdict v = DecideNow(ProgramPilot());
  ASSERT_EQ(v.decision, Decision::kGo);
  EXPECT_LE(v.budget.days, 0);
  const Check b = Get(v, "budget");
  EXPECT_EQ(b.status, CheckStatus::kSkip);
  EXPECT_NE(b.detail.find("reported no parameter count"), std::string::npos) << b.detail;
  EXPECT_NE(b.detail.find("pilot grant refuses it"), std::string::npos) << b.detail;
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

// Every process of the program, in every phase, must have exited 0 by
// itself: a resumed process that exits 1 after its last step is not a
// completed pilot, whatever its losses.
TEST(DecideProgram, EveryProcessExitedZero) {
  DecideInput in = ProgramPilot();
  ProgramProcess ok;
  ok.stage = "single";
  ok.process = "reference";
  ok.exit_code = 0;
  in.results->program->processes = {ok};
  EXPECT_EQ(Get(DecideNow(in), "completed").status, CheckStatus::kPass);
  ProgramProcess bad = ok;
  bad.process = "resumed";
  bad.exit_code = 1;
  in.results->program->processes.push_back(bad);
  const Verdict v = DecideNow(in);
  const Check c = Get(v, "completed");
  EXPECT_EQ(c.status, CheckStatus::kFail);
  EXPECT_EQ(c.measured, "single resumed rank 0 exit 1");
  EXPECT_EQ(c.verified_by, VerifiedBy::kSupervisor);
  EXPECT_EQ(v.decision, Decision::kNoGo);
  in.results->program->processes.back().exit_code = 0;
  in.results->program->processes.back().terminated = true;
  EXPECT_EQ(Get(DecideNow(in), "completed").measured, "single resumed rank 0 ended by the supervisor");
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

// The restore compares two processes the supervisor started, but their
// losses are the program's word: labelled so, and by default not what a GO
// rests on (program_independent_checks leaves it out).
TEST(DecideProgram, TheRestoreIsTheProgramsFiguresComparedByTheSupervisor) {
  const Verdict v = DecideNow(ProgramPilot());
  EXPECT_EQ(Get(v, "restore").verified_by, VerifiedBy::kWorkloadCompared);
  EXPECT_EQ(Get(v, "restore").status, CheckStatus::kPass);
  EXPECT_EQ(v.decision, Decision::kGo);
  // A site that names restore among the program's independent checks
  // fails it: only the program vouches for the losses.
  Policy strict = TestPolicy();
  strict.program_independent_checks.push_back("restore");
  const Verdict s = Decide(ProgramPilot(), strict, HardwareCatalog{}, kNow);
  EXPECT_EQ(Get(s, "restore").status, CheckStatus::kFail);
  EXPECT_NE(Get(s, "restore").detail.find("(program_independent_checks)"), std::string::npos);
  EXPECT_EQ(s.decision, Decision::kNoGo);
}

// A resumed process that reported the reference's losses without opening
// the checkpoint did not restore from it: NO-GO, whatever it reported.
TEST(DecideProgram, CheckpointReadIsWhatRootSaw) {
  auto read = [](const CheckpointRead& cr, const Policy& p = TestPolicy()) {
    DecideInput in = ProgramPilot();
    in.results->program->checkpoint_read = cr;
    return Decide(in, p, HardwareCatalog{}, kNow);
  };
  const Verdict ok = read(Seen(true, "", 3, 1000, 2, 950));
  EXPECT_EQ(Get(ok, "checkpoint_read").status, CheckStatus::kPass);
  EXPECT_EQ(Get(ok, "checkpoint_read").verified_by, VerifiedBy::kSupervisor);
  // The page cache could not tell: what it opened decides, and it says so.
  EXPECT_EQ(Get(ok, "checkpoint_read").measured.rfind("opened 2 of 3 files, 95.0% of ", 0), 0u)
      << Get(ok, "checkpoint_read").measured;
  EXPECT_NE(Get(ok, "checkpoint_read").detail.find("the bytes it read were not measured"), std::string::npos);

  // Measured: what it read before its first step decides, whatever it opened.
  const Verdict read_all = read(Seen(true, "", 3, 10485760, 3, 10485760, 10380902, 3));
  EXPECT_EQ(Get(read_all, "checkpoint_read").status, CheckStatus::kPass);
  EXPECT_EQ(Get(read_all, "checkpoint_read").measured,
            "read 9.9 MiB of 10.0 MiB (99.0%) in 3 of 3 files before its first step, 2.5 s after its start")
      << Get(read_all, "checkpoint_read").measured;
  const Verdict opened_only = read(Seen(true, "", 3, 1000, 3, 1000, 8, 1));
  EXPECT_EQ(Get(opened_only, "checkpoint_read").status, CheckStatus::kFail);
  EXPECT_NE(Get(opened_only, "checkpoint_read").detail.find("left most of the checkpoint unread"),
            std::string::npos);
  EXPECT_EQ(opened_only.decision, Decision::kNoGo);
  // Another process of the user opened the files meanwhile: its reads
  // would count as the resumed process's.
  const Verdict outside =
      read(Seen(true, "", 3, 1000, 3, 1000, 1000, 3, 2));
  EXPECT_EQ(Get(outside, "checkpoint_read").status, CheckStatus::kFail);
  EXPECT_NE(Get(outside, "checkpoint_read").detail.find("pid 77 (cat)"), std::string::npos);

  const Verdict never = read(Seen(true, "", 3, 1000, 0, 0));
  EXPECT_EQ(Get(never, "checkpoint_read").status, CheckStatus::kFail);
  EXPECT_NE(Get(never, "checkpoint_read").detail.find("never opened the checkpoint"), std::string::npos);
  EXPECT_EQ(never.decision, Decision::kNoGo);

  const Verdict little = read(Seen(true, "", 3, 1000, 1, 10));
  EXPECT_EQ(Get(little, "checkpoint_read").status, CheckStatus::kFail);

  // Not watched (no fanotify on the node): required by default, so a fail;
  // a site that leaves it out of program_independent_checks gets a warning.
  const Verdict unwatched = read(Seen(false, "fanotify: Operation not permitted", 3, 1000, 0, 0));
  EXPECT_EQ(Get(unwatched, "checkpoint_read").status, CheckStatus::kFail);
  EXPECT_NE(Get(unwatched, "checkpoint_read").detail.find("fanotify: Operation not permitted"),
            std::string::npos);
  Policy lenient = TestPolicy();
  lenient.program_independent_checks = {"completed", "checkpoint"};
  const Verdict warned = read(Seen(false, "fanotify: Operation not permitted", 3, 1000, 0, 0), lenient);
  EXPECT_EQ(Get(warned, "checkpoint_read").status, CheckStatus::kWarn);
  EXPECT_EQ(warned.decision, Decision::kGo);
}

// The resumed process's work before its first record against the
// reference's (K = 10 in ProgramPilot()): a retrain of K steps fails, a
// restore passes, a large checkpoint's load is allowed for by the save, and
// K steps too cheap to tell, or not measured, skip.
TEST(DecideProgram, ResumedWorkTellsAResumeFromARetrain) {
  auto work = [](double ref_cpu, double res_cpu, double save_step, double per_step) {
    DecideInput in = ProgramPilot();
    ProgramInfo& p = *in.results->program;
    p.busy = {{"single", "reference", 20, per_step, -1, 20}};  // 20 steps in 20 s
    p.starts = {{"single", "reference", 1, 3.0, ref_cpu, save_step},
                {"single", "resumed", 11, 3.0, res_cpu, -1}};
    return Get(DecideNow(in), "resumed_work");
  };
  // Steps of 1 CPU-s: K steps are 10 CPU-s; the limit is 5 + 0 + 1.
  EXPECT_EQ(work(2.0, 2.4, 1.0, 1.0).status, CheckStatus::kPass) << work(2.0, 2.4, 1.0, 1.0).detail;
  const Check retrain = work(2.0, 12.2, 1.0, 1.0);
  EXPECT_EQ(retrain.status, CheckStatus::kFail);
  EXPECT_EQ(retrain.verified_by, VerifiedBy::kSupervisor);
  EXPECT_NE(retrain.detail.find("did about 10 steps' work"), std::string::npos) << retrain.detail;
  // Steps of 3 CPU-s and a save of 4: a load of up to 8 is allowed; a retrain beside it is not.
  EXPECT_EQ(work(2.0, 12.0, 7.0, 3.0).status, CheckStatus::kPass) << work(2.0, 12.0, 7.0, 3.0).detail;
  EXPECT_EQ(work(2.0, 12.0 + 30.0, 7.0, 3.0).status, CheckStatus::kFail);
  // Steps of 0.05 CPU-s: 10 steps are 0.5 CPU-s, within start-up's margin.
  const Check cheap = work(2.0, 2.5, 0.05, 0.05);
  EXPECT_EQ(cheap.status, CheckStatus::kSkip);
  EXPECT_NE(cheap.detail.find("too little work to tell"), std::string::npos) << cheap.detail;
  EXPECT_NE(cheap.detail.find("the grant does not rest on this check"), std::string::npos);
  DecideInput none = ProgramPilot();
  EXPECT_EQ(Get(DecideNow(none), "resumed_work").status, CheckStatus::kSkip);
}

// The supervisor's measure of work while steps were reported: the GPUs'
// utilization where NVML sampled them, else the processes' CPU time.
TEST(DecideProgram, BusyIsWhatRootMeasured) {
  auto busy = [](std::vector<PhaseBusy> b) {
    DecideInput in = ProgramPilot();
    in.results->program->busy = std::move(b);
    return DecideNow(in);
  };
  // Not measured: a GO, but one pilot grant refuses, saying why.
  auto refusals = [](const Verdict& v) {
    std::string all;
    for (const std::string& w : GrantRefusals(v, Status::Ok(), GrantRequest{}, 0)) all += w + "\n";
    return all;
  };
  const Verdict none = busy({});
  EXPECT_EQ(Get(none, "busy").status, CheckStatus::kSkip);
  EXPECT_NE(Get(none, "busy").detail.find("pilot grant refuses"), std::string::npos);
  EXPECT_EQ(none.decision, Decision::kGo);
  EXPECT_NE(refusals(none).find("root did not measure the program's work (busy: "), std::string::npos)
      << refusals(none);
  const Verdict cpu = busy({{"single", "reference", 12, 0.95, -1}, {"single", "resumed", 6, 0.9, -1}});
  EXPECT_EQ(Get(cpu, "busy").status, CheckStatus::kPass);
  EXPECT_EQ(refusals(cpu).find("busy"), std::string::npos) << refusals(cpu);
  EXPECT_EQ(Get(cpu, "busy").verified_by, VerifiedBy::kSupervisor);
  const Verdict idle = busy({{"single", "reference", 12, 0.95, -1}, {"single", "resumed", 6, 0.01, -1}});
  EXPECT_EQ(Get(idle, "busy").status, CheckStatus::kFail);
  EXPECT_EQ(Get(idle, "busy").measured, "single resumed: 0.01 CPU cores over 6 s");
  EXPECT_EQ(idle.decision, Decision::kNoGo);
  // Either the GPUs or the CPU busy: a GPU the sampler misattributes does
  // not fail a program that works; neither busy fails.
  const Verdict gpu_idle = busy({{"single", "reference", 30, 1.0, 0.0}});
  EXPECT_EQ(Get(gpu_idle, "busy").status, CheckStatus::kPass);
  const Verdict both_idle = busy({{"single", "reference", 30, 0.02, 0.0}});
  EXPECT_EQ(Get(both_idle, "busy").status, CheckStatus::kFail);
  const Verdict gpu = busy({{"single", "reference", 30, 0.02, 0.87}});
  EXPECT_EQ(Get(gpu, "busy").status, CheckStatus::kPass);
  EXPECT_EQ(Get(gpu, "busy").measured, "single reference: GPUs 87% busy, 0.02 CPU cores over 30 s");
}

// The precision of a program is what its probe saw, never the config's
// builtin default ("bf16") nor an "fp32: nothing to compare" it did not see.
TEST(DecideProgram, ThePrecisionIsWhatTheProbeSaw) {
  DecideInput in = ProgramPilot();
  Check c = Get(DecideNow(in), "precision");
  EXPECT_EQ(c.status, CheckStatus::kSkip);
  EXPECT_EQ(c.measured, "not reported");
  ProgramPrecision& p = in.results->program->precision;
  p.reported = true;
  p.autocast = "bfloat16";
  p.autocast_device = "cuda";
  p.param_dtype = "float32";
  p.steps = 20;
  p.autocast_steps = 19;
  c = Get(DecideNow(in), "precision");
  EXPECT_EQ(c.measured, "bfloat16 autocast on cuda (19 of 20 steps), float32 parameters, no gradient scaler");
  EXPECT_EQ(Get(DecideNow(in), "memory_growth").status, CheckStatus::kSkip);  // no series here
}

// pilot plan at a shape the program did not run says so instead of guessing.
TEST(DecideProgram, AShapeTheProgramDidNotRunIsNotPredicted) {
  DecideInput in = ProgramPilot();
  in.results->single->shape.params = 1000000;
  PlanQuery twice;
  twice.micro_batch = 8;
  Result<Plan> p = MakePlan(*in.results->single, *in.config, HardwareCatalog{}, TestPolicy(), twice);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().detail(),
            "not predicted: a program's memory and throughput at seq_len 256 x micro_batch 8 are not "
            "modelled from the one shape the pilot measured (seq_len 256 x micro_batch 4)");
  EXPECT_NE(p.status().hint().find("pilot the program at that shape"), std::string::npos);
}

}  // namespace
}  // namespace pilot
