// One training session: the config, the device, the workload, its optimizer
// and data, and the step that drives them. Shared by the reference run, the
// resumed process, the checks and `verify`.
//
// A step, as the seed describes it:
//   zero_grad(set_to_none); for each micro-batch: forward loss, backward;
//   [fp16: unscale, skip on inf/NaN]; clip; optimizer step; schedule.
//
// Thread-safety: one thread per Session.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/results.h"
#include "core/status.h"
#include "runner/data.h"
#include "runner/device.h"
#include "runner/model.h"
#include "runner/optim.h"

namespace pilot::runner {

// Exit statuses of pilot-runner (pilot-runner(1), EXIT STATUS).
enum ExitCode : int {
  kExitOk = 0,           // run: pilot complete, restore equal; verify: verified
  kExitFailed = 1,       // run: a check failed (restore unequal...); verify: failed
  kExitUsage = 2,        // bad flags, config, lock or input files
  kExitOutOfMemory = 3,  // run: out of memory at the real shape (recorded)
  kExitError = 4,        // run: a runtime error (recorded when possible)
  kExitNotBuilt = 5,     // a stage this build does not have
};

// How the runner was asked to run (command line).
struct RunOptions {
  std::string config;
  std::string out;
  std::string lock;
  std::string stage = "single";
  std::vector<std::string> sets;   // --set section.key=value
  int overhead_steps = 0;          // --overhead-steps: instrumentation check
  int nproc = 0;                   // --nproc: node stage processes (0 = parallel.nproc)
  bool keep_reference = false;     // --keep-reference
  std::string trace;               // --trace: Chrome trace of steady steps
  int trace_steps = 3;             // --trace-steps: how many
  // Internal (the fresh process of the restore test):
  std::string resume_checkpoint;   // --resume-from
  std::string reference_params;    // --reference
};

struct VerifyOptions {
  std::string checkpoint;
  std::string config;
  std::string expect;  // results.json to compare with ("" = none)
  std::vector<std::string> sets;
  bool json = false;
};

// Pins from the lock (or the config when there is no lock).
struct Pins {
  uint64_t seed = 0;
  std::string train_sha256, eval_sha256;
};

// Loads the config (with --set overrides) and the lock, resolves the seed.
// Errors: kInvalid/kNotFound/kCorrupt (exit 2).
Status LoadInputs(const std::string& config_path, const std::string& lock_path,
                  const std::vector<std::string>& sets, Config* cfg, Pins* pins);

struct StepResult {
  at::Tensor loss;      // float32 scalar on the device (not synchronised)
  at::Tensor grad_norm; // before clipping
  double data_wait_ms = 0;
  double lr = 0;
};

class Session {
 public:
  // Builds the workload and optimizer (seeded), opens the data.
  static Result<std::unique_ptr<Session>> Create(const Config& cfg, const Pins& pins);

  // One optimizer step `step` (1-based) from `loader`. `timer` (may be null)
  // gets marks 0 (start), 1 (after backward), 2 (after the optimizer).
  // Throws c10::Error / std::exception from torch (OOM included); `phase()`
  // then says where it was.
  Result<StepResult> Step(Loader& loader, int64_t step, StepTimer* timer);

  // Mean loss over the pinned eval batches (float64 accumulation).
  Result<double> Eval();

  std::unique_ptr<Loader> MakeLoader(int64_t first_step, int64_t last_step);
  // The training data (batches at the session's shape).
  std::shared_ptr<const TokenSource> data() const { return data_; }

  const Config& cfg() const { return cfg_; }
  const at::Device& device() const { return dev_; }
  Workload& model() { return *model_; }
  const Workload& model() const { return *model_; }
  Optimizer& optim() { return *optim_; }
  GradScaler& scaler() { return scaler_; }
  const std::string& phase() const { return phase_; }
  int64_t current_step() const { return current_step_; }
  // Shifts the training micro-batch index (a restore that skips the data
  // position rewinds it); 0 normally.
  void set_data_shift(int64_t shift) { data_shift_ = shift; }
  void set_phase(std::string p) { phase_ = std::move(p); }
  uint64_t seed() const { return seed_; }
  int64_t horizon() const { return horizon_; }
  int64_t tokens_per_step() const;
  at::ScalarType compute_dtype() const { return dtype_; }
  void SetComputeDtype(at::ScalarType t);
  double build_seconds() const { return build_seconds_; }
  ShapeInfo Shape() const;

 private:
  Session() : dev_(at::kCPU) {}
  Config cfg_;
  at::Device dev_;
  uint64_t seed_ = 0;
  int64_t horizon_ = 0;
  at::ScalarType dtype_ = at::kFloat;
  std::unique_ptr<Workload> model_;
  std::unique_ptr<Optimizer> optim_;
  std::shared_ptr<TokenSource> data_;
  GradScaler scaler_;
  std::string phase_ = "build";
  int64_t current_step_ = 0;
  int64_t data_shift_ = 0;
  double build_seconds_ = 0;
};

// Per-step record kept for results and metrics.
struct StepRecord {
  int64_t step = 0;
  double loss = 0;
  double grad_norm = 0;
  double lr = 0;
  double data_wait_ms = 0;
  double fb_ms = 0;
  double opt_ms = 0;
  double step_ms = 0;       // wall clock, start to start of the next step
  bool timed = true;        // false in warm-up, at a measured or paused step and the next
};

// Drives steps [first, last] with deferred reads (the loss of step s is read
// after step s+1 was queued, so the device never waits for the host),
// measures memory on the steps listed in `measure` (synchronised, peak
// reset before), and calls
// `on_pause(step)` after the steps in `pause_at` completed. Appends to
// `records`, writes metrics lines and progress. OOM and torch errors throw.
struct LoopHooks {
  std::vector<int64_t> measure;                       // steps to measure
  std::function<void(int64_t, const MemoryStats&)> on_memory;
  std::vector<int64_t> pause_at;                      // steps to stop after
  std::function<Status(int64_t)> on_pause;            // eval, checkpoint
  std::string process = "reference";                 // metrics "process"
  bool instrument = true;                             // events, reads, progress
  int warmup = -1;                                    // untimed steps; -1 = config
};
Status RunSteps(Session& s, int64_t first, int64_t last, const LoopHooks& hooks,
                std::vector<StepRecord>* records, FILE* metrics);

// Mean of step_ms over timed records and derived figures into `out`.
void Summarise(const Session& s, const std::vector<StepRecord>& records, SingleStage* out);

// Entry points (return exit codes; never throw).
int RunPilot(const RunOptions& opts);
int RunResumed(const RunOptions& opts);
int RunVerify(const VerifyOptions& opts);
// The checks after the reference trajectory (precision, recompute, memory
// calibration, instrumentation overhead); each records its outcome in `st`.
void RunChecks(Session& s, const RunOptions& opts, const std::string& checkpoint,
               const std::vector<StepRecord>& reference, SingleStage* st, FILE* metrics);
void PrintVersions(bool json);

// Helpers shared by the entry points.
std::string NowRfc3339();
double RelDiff(double a, double b);  // |a - b| / max(|b|, 1e-12)
std::string FormatBytes(double bytes);  // "18.2 GiB"

}  // namespace pilot::runner
