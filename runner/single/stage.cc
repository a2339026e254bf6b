// The single-GPU stage of the builtin workload, start to finish.
//
//   build -> steps 1..N (memory measured on step 1 and a steady step;
//   eval + checkpoint after step K) -> final eval -> reference parameters
//   written -> checks -> this process lets go of the device -> a fresh
//   process (this executable again) restores step K, resumes to N and
//   compares (stages.single of results.json).
#include "runner/single/stage.h"

#include <c10/util/Exception.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "core/base/atomic_file.h"
#include "core/base/strings.h"
#include "core/decide/restore_check.h"
#include "core/records/checkpoint_meta.h"
#include "core/records/exit_codes.h"
#include "pilot/version.h"
#include "runner/ckpt/checkpoint.h"
#include "runner/ckpt/compare.h"
#include "runner/ckpt/safetensors.h"
#include "runner/single/checks.h"
#include "runner/single/depth.h"
#include "runner/train/alloc_trace.h"
#include "runner/train/device.h"
#include "runner/train/format.h"
#include "runner/train/loop.h"
#include "runner/train/session.h"
#include "runner/train/trace.h"
#include "runner/workload/report.h"

extern char** environ;

namespace pilot::runner {
namespace fs = std::filesystem;
namespace {

// Records an exception from torch as the stage's failure.
int RecordFailure(const std::exception& e, Session* s, const at::Device& dev, SingleStage* st) {
  FailureInfo f;
  const bool oom = IsOutOfMemory(e);
  f.kind = oom ? "oom" : "error";
  f.step = s ? s->current_step() : 0;
  f.phase = s ? s->phase() : "build";
  std::string msg = e.what();
  // c10 messages carry a C++ backtrace after the first lines.
  const size_t cut = msg.find("\nException raised from");
  if (cut != std::string::npos) msg.resize(cut);
  if (msg.size() > 2000) msg.resize(2000);
  f.message = msg;
  f.memory = Snapshot(dev, f.step);
  st->status = f.kind;
  std::fprintf(
      stderr, "pilot: single: %s at step %lld (%s)%s%s\n", oom ? "out of memory" : "error",
      static_cast<long long>(f.step), f.phase.c_str(),
      f.memory.peak_allocated_bytes
          ? (", peak allocated " + FormatBytes(static_cast<double>(*f.memory.peak_allocated_bytes)))
                .c_str()
          : "",
      oom ? "" : (": " + msg.substr(0, msg.find('\n'))).c_str());
  st->failure = f;
  return oom ? kExitOutOfMemory : kExitError;
}

TrainState StateAt(Session& s, int64_t step, double eval_loss) {
  TrainState ts;
  const Config& c = s.cfg();
  ts.step = step;
  ts.seed = s.seed();
  ts.data = {c.data.format, step * std::max(1, c.run.grad_accum)};
  ts.scheduler = {c.training.lr_schedule, s.horizon(), LearningRate(c.training, step, s.horizon())};
  ts.scaler.precision = c.training.precision;
  if (s.compute_dtype() == at::kHalf) {
    ts.scaler.scale = s.scaler().scale;
    ts.scaler.growth_tracker = s.scaler().growth_tracker;
    ts.scaler.skipped = s.scaler().skipped;
  }
  ts.rng = {CaptureCpuRng(), s.device().is_cuda() ? CaptureCudaRng() : ""};
  ts.config_sha256 = c.sha256;
  ts.device = s.device().is_cuda() ? "cuda" : "cpu";
  ts.model = {s.model().Kind(), CountParameters(s.model()), s.model().Blocks()};
  ts.optimizer = s.optim().kind();
  ts.eval = {std::max(1, c.eval.batches), eval_loss};
  return ts;
}

// Runs this executable again for the restore test; returns its exit status.
int SpawnResume(const RunOptions& o, const std::string& checkpoint, const std::string& reference,
                const std::vector<std::string>& extra_env) {
  std::vector<std::string> args = {"/proc/self/exe", "run",    "--config",      o.config,
                                   "--out",          o.out,    "--resume-from", checkpoint,
                                   "--reference",    reference};
  if (!o.lock.empty()) {
    args.push_back("--lock");
    args.push_back(o.lock);
  }
  for (const auto& s : o.sets) {
    args.push_back("--set");
    args.push_back(s);
  }
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::fflush(nullptr);
  pid_t pid = 0;
  std::vector<std::string> env_store(extra_env);
  std::vector<char*> envp;
  for (char** e = environ; *e != nullptr; ++e) envp.push_back(*e);
  for (auto& e : env_store) envp.push_back(e.data());
  envp.push_back(nullptr);
  int rc = ::posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, argv.data(), envp.data());
  if (rc != 0) {
    std::fprintf(stderr, "pilot: restore: cannot start a fresh process: %s\n", std::strerror(rc));
    return -1;
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

// The config the stage runs: the run's, at fewer layers where a sharded
// run's state does not fit one process (recorded in st->reduced_depth).
Config SingleRunConfig(const RunOptions& o, const Config& cfg, SingleStage* st) {
  Config run_cfg = cfg;
  if (Result<at::Device> want = ResolveDevice(cfg.training.device); want.ok()) {
    st->reduced_depth = PlanSingleDepth(cfg, DeviceTotalBytes(*want), o.memory_headroom);
    if (st->reduced_depth) {
      run_cfg.model.layers = st->reduced_depth->layers;
      std::fprintf(stderr, "pilot: single: reduced depth: %s\n", st->reduced_depth->detail.c_str());
    }
  }
  return run_cfg;
}

// At the checkpoint's step: evaluates, then saves the checkpoint under
// `root` and records both in *st; *ckpt_path is the checkpoint's folder.
Status EvalAndSave(Session& s, const RunOptions& o, const std::string& root, int64_t step,
                   SingleStage* st, std::string* ckpt_path) {
  const Config& c = s.cfg();
  const auto t0 = std::chrono::steady_clock::now();
  PILOT_ASSIGN_OR_RETURN(double ev, s.Eval());
  st->timings.eval_seconds = SecondsSince(t0);
  st->eval.at_step = step;
  st->eval.loss_at_checkpoint = ev;
  s.set_phase("checkpoint");
  // After the save this stage writes the reference parameters and
  // results.json into --out: room for both is checked with the save's.
  int64_t reference_bytes = 0;
  for (const auto& [name, p] : s.model().Parameters())
    reference_bytes += static_cast<int64_t>(p.nbytes());
  PILOT_ASSIGN_OR_RETURN(
      CheckpointIo io,
      SaveCheckpoint(root, s.model(), s.optim(), StateAt(s, step, ev), c.checkpoint.keep,
                     RoomAfterSave(c.checkpoint, o.out, reference_bytes)));
  *ckpt_path = io.path;
  st->checkpoint.path = io.path;
  st->checkpoint.step = step;
  st->checkpoint.bytes = io.bytes;
  st->checkpoint.save_seconds = io.seconds;
  st->checkpoint.save_gb_per_s = io.bytes / io.seconds / 1e9;
  std::fprintf(
      stderr,
      "pilot: single: eval loss %.4f; checkpoint step %lld: %.2f GB in %.2f s (%.2f GB/s)\n", ev,
      static_cast<long long>(step), io.bytes / 1e9, io.seconds, io.bytes / io.seconds / 1e9);
  return Status::Ok();
}

// The restore test without a supervisor: lets go of the session and the
// device, runs a fresh process that resumes from `ckpt_path` and compares
// with `ref_path`, and judges it into st->restore. Returns the stage's
// exit code.
int RestoreInFreshProcess(const RunOptions& o, std::unique_ptr<Session>* s, const at::Device& dev,
                          const std::string& ckpt_path, const std::string& ref_path,
                          SingleStage* st) {
  // The fresh process needs the device to itself.
  const bool cuda = dev.is_cuda();
  const Config cfg_copy = (*s)->cfg();
  s->reset();
  ReleaseCachedMemory(dev);
  std::fprintf(stderr, "pilot: single: restore: a fresh process resumes step %d -> %d\n",
               cfg_copy.checkpoint.at_step, cfg_copy.training.steps);
  const std::string report = o.out + "/resume.json";
  std::vector<std::string> child_env;
  const std::string held = DeviceBaselineFor(dev);
  if (!held.empty()) child_env.push_back(std::string(kDeviceBaselineEnv) + "=" + held);
  const int child_rc = SpawnResume(o, ckpt_path, ref_path, child_env);
  const bool equal = JudgeRestore(cfg_copy, cuda, child_rc, ReadResultsFile(report), st);
  if (!o.keep_reference) {
    std::error_code ec;
    fs::remove(ref_path, ec);
  }
  std::fprintf(stderr,
               "pilot: single: restore %s (%s, max |loss diff| %.3g, max |param diff| %.3g)%s%s\n",
               equal ? "equal" : "NOT equal", st->restore.mode.c_str(),
               st->restore.max_abs_loss_diff, st->restore.max_abs_param_diff,
               st->restore.detail.empty() ? "" : ": ", st->restore.detail.c_str());
  if (child_rc == kExitOutOfMemory) return kExitOutOfMemory;
  return equal ? kExitOk : kExitFailed;
}

}  // namespace

int RunSingle(const RunOptions& o, const Config& cfg, const Pins& pins, SingleStage* st,
              FILE* metrics) {
  std::unique_ptr<Session> s;
  at::Device dev(at::kCPU);
  std::vector<StepRecord> records;
  std::string ckpt_path;
  const std::string ref_path = o.out + "/" + kReferenceParamsFile;
  st->steps = cfg.training.steps;
  st->warmup_steps = cfg.training.warmup_steps;
  st->status = "ok";
  try {
    // A sharded run whose state does not fit one process: fewer layers.
    const Config run_cfg = SingleRunConfig(o, cfg, st);
    // The reference's allocator requests, from before its model is built
    // through its first steady step that is not the checkpoint's (the
    // memory model's replay, core/models/memory_replay.h).
    const int record_to = cfg.checkpoint.at_step == 2 ? 3 : 2;
    bool recording = false;
    if (Result<at::Device> d = ResolveDevice(cfg.training.device); d.ok()) {
      recording = StartAllocRecording(*d, record_to);
    }
    Result<std::unique_ptr<Session>> made = Session::Create(run_cfg, pins);
    if (!made.ok()) {
      std::fprintf(stderr, "%s\n", made.status().ToString().c_str());
      st->status = "error";
      st->failure = FailureInfo{"error", 0, "build", made.status().Message(), {}};
      return ExitFor(made.status());
    }
    s = std::move(made).value();
    dev = s->device();
    st->device = dev.is_cuda() ? "cuda" : "cpu";
    st->device_name = DeviceName(dev);
    st->shape = s->Shape();
    st->timings.model_build_seconds = s->build_seconds();
    const Config& c = s->cfg();
    const int64_t n = c.training.steps, at = c.checkpoint.at_step;
    std::fprintf(stderr,
                 "pilot: single: %s %s, %lld params, seq_len %d, micro_batch %d x %d, %s on %s\n",
                 st->shape.model_kind.c_str(), c.run.name.c_str(),
                 static_cast<long long>(st->shape.params), st->shape.seq_len, st->shape.micro_batch,
                 st->shape.grad_accum, c.training.precision.c_str(), st->device_name.c_str());
    const std::string root = c.checkpoint.dir.empty() ? o.out + "/checkpoints" : c.checkpoint.dir;

    LoopHooks hooks;
    const int64_t steady = std::min<int64_t>(n, std::max<int64_t>(2, c.training.warmup_steps + 1));
    hooks.measure = {1, steady};
    hooks.on_memory = [&](int64_t step, const MemoryStats& m) {
      if (step == 1) st->memory_first_step = m;
      if (step == steady) st->memory = m;
    };
    hooks.pause_at = {at};
    hooks.on_pause = [&](int64_t step) { return EvalAndSave(*s, o, root, step, st, &ckpt_path); };
    Status run = RunSteps(*s, 1, n, hooks, &records, metrics);
    if (recording) {
      KeepAllocRecording("reference", c.training.micro_batch, c.training.seq_len, c.run.grad_accum,
                         c.training.activation_checkpointing, true, &st->allocator_requests);
    }
    if (!run.ok()) {
      std::fprintf(stderr, "%s\n", run.ToString().c_str());
      st->status = "error";
      st->failure =
          FailureInfo{"error", s->current_step(), s->phase(), run.Message(), Snapshot(dev, 0)};
      return ExitFor(run);
    }
    for (const auto& r : records) {
      st->losses.push_back(r.loss);
      st->grad_norms.push_back(r.grad_norm);
    }
    Summarise(*s, records, st);
    const auto te = std::chrono::steady_clock::now();
    Result<double> final_eval = s->Eval();
    if (!final_eval.ok()) return ExitFor(final_eval.status());
    st->timings.eval_seconds = 0.5 * (st->timings.eval_seconds + SecondsSince(te));
    st->eval.batches = std::max(1, c.eval.batches);
    st->eval.loss_final = *final_eval;
    s->set_phase("restore");
    Result<FileDigest> ref =
        WriteSafetensors(ref_path, s->model().Parameters(), {{"step", std::to_string(n)}});
    if (!ref.ok()) {
      std::fprintf(stderr, "%s\n", ref.status().ToString().c_str());
      st->status = "error";
      st->failure = FailureInfo{"error", n, s->phase(), ref.status().Message(), Snapshot(dev, n)};
      return kExitError;
    }
    RunChecks(*s, o, ckpt_path, records, st, metrics);
    if (!o.trace.empty()) {
      Status tr = TraceSteps(*s, o.trace, o.trace_steps);
      if (!tr.ok()) std::fprintf(stderr, "%s\n", tr.ToString().c_str());
    }
  } catch (const std::exception& e) {
    return RecordFailure(e, s.get(), dev, st);
  }

  // Under pilot-supervisor the supervisor starts the fresh process and
  // compares; the reference parameters stay for it.
  if (o.supervised) {
    st->restore.detail = "left to the supervisor";
    return kExitOk;
  }
  return RestoreInFreshProcess(o, &s, dev, ckpt_path, ref_path, st);
}

// The fresh process: restore, resume, compare parameters, report.
int RunResumed(const RunOptions& o) {
  Results res;
  res.started_at = NowRfc3339();
  res.config_path = o.config;
  res.versions.runner = PILOT_VERSION_STRING;
  SingleStage st;
  st.status = "ok";
  Config cfg;
  Pins pins;
  Status in = LoadInputs(o.config, o.lock, o.sets, &cfg, &pins);
  if (in.ok()) {
    Result<std::string> alloc = ApplyAllocConf(cfg.training.alloc_conf);
    in = alloc.ok() ? Status::Ok() : alloc.status();
    if (alloc.ok()) res.alloc_conf = *alloc;
  }
  if (in.ok()) in = RequireCommitted(o.resume_checkpoint);
  Result<TrainState> saved = in.ok() ? ReadTrainState(o.resume_checkpoint) : Result<TrainState>(in);
  if (!saved.ok()) {
    std::fprintf(stderr, "%s\n", saved.status().ToString().c_str());
    st.status = "error";
    st.failure = FailureInfo{"error", 0, "restore", saved.status().Message(), {}};
    res.single = st;
    res.exit_code = ExitFor(saved.status());
    (void)WriteReport(o, "resume.json", res);
    return res.exit_code;
  }
  pins.seed = saved->seed;
  // The saved model's depth (a sharded run's single stage may have run
  // fewer layers than the config names, runner/single/depth.h).
  if (Status depth = ApplySavedDepth(*saved, o.resume_checkpoint, &cfg); !depth.ok()) {
    std::fprintf(stderr, "%s\n", depth.ToString().c_str());
    st.status = "error";
    st.failure = FailureInfo{"error", 0, "restore", depth.Message(), {}};
    res.single = st;
    res.exit_code = kExitFailed;
    (void)WriteReport(o, "resume.json", res);
    return res.exit_code;
  }
  std::unique_ptr<Session> s;
  at::Device dev(at::kCPU);
  const RestoreSkips skips = RestoreSkips::FromEnv();
  try {
    Result<std::unique_ptr<Session>> made = Session::Create(cfg, pins);
    if (!made.ok()) throw std::runtime_error(made.status().ToString());
    s = std::move(made).value();
    dev = s->device();
    s->set_phase("restore");
    CheckpointIo io;
    Result<TrainState> ts =
        LoadCheckpoint(o.resume_checkpoint, &s->model(), &s->optim(), skips, &io);
    if (!ts.ok()) throw std::runtime_error(ts.status().ToString());
    if (s->compute_dtype() == at::kHalf && !skips.optimizer) {
      s->scaler().scale = ts->scaler.scale;
      s->scaler().growth_tracker = ts->scaler.growth_tracker;
      s->scaler().skipped = ts->scaler.skipped;
    }
    s->set_data_shift(ts->data.next_index - ts->step * std::max(1, cfg.run.grad_accum));
    st.checkpoint.path = o.resume_checkpoint;
    st.checkpoint.bytes = io.bytes;
    st.checkpoint.load_seconds = io.seconds;
    std::fprintf(
        stderr, "pilot: single resumed: loaded step %lld: %.2f GB in %.2f s (%.2f GB/s)%s%s\n",
        static_cast<long long>(ts->step), io.bytes / 1e9, io.seconds, io.bytes / io.seconds / 1e9,
        skips.Describe().empty() ? "" : "; TEST SWITCH: skipped ", skips.Describe().c_str());
    LoopHooks hooks;
    hooks.process = "resumed";
    hooks.measure = {ts->step + 1};
    hooks.on_memory = [&](int64_t, const MemoryStats& m) { st.memory_resumed = m; };
    std::vector<StepRecord> records;
    FILE* metrics = std::fopen((o.out + "/metrics.jsonl").c_str(), "a");
    Status run = RunSteps(*s, ts->step + 1, s->cfg().training.steps, hooks, &records, metrics);
    if (metrics) std::fclose(metrics);
    if (!run.ok()) throw std::runtime_error(run.ToString());
    RestoreInfo& r = st.restore;
    r.skipped = skips.Describe();
    for (const auto& rec : records) r.resumed_losses.push_back(rec.loss);
    // Final parameters against the reference process's.
    Result<ParamDiff> diff = CompareParameters(s->model().Parameters(), o.reference_params);
    if (!diff.ok()) throw std::runtime_error(diff.status().ToString());
    r.max_abs_param_diff = std::max(r.max_abs_param_diff, diff->max_abs);
    r.params_compared += diff->compared;
    r.max_rel_param_diff = diff->max_rel;
  } catch (const std::exception& e) {
    res.exit_code = RecordFailure(e, s.get(), dev, &st);
    if (!st.memory_resumed) st.memory_resumed = st.failure->memory;
  }
  res.single = st;
  // Under the supervisor nobody else needs the reference any more.
  if (o.supervised && res.exit_code == kExitOk) {
    std::error_code ec;
    fs::remove(o.reference_params, ec);
  }
  Status w = WriteReport(o, "resume.json", res);
  if (!w.ok()) {
    std::fprintf(stderr, "%s\n", w.ToString().c_str());
    return kExitError;
  }
  return res.exit_code;
}

}  // namespace pilot::runner
