// results.json: what pilot-runner measured, read by the epilog and `pilot`.
//
// The file is written by the runner (as the job's user) and is therefore
// untrusted input to everything that reads it: ParseResults() refuses files
// larger than a size limit, unknown keys, wrong types and a wrong schema
// string, and names the offending field by its JSON path, e.g.
//   pilot: results.json: stages.single.restore.equal: expected a boolean, got a string
//
// Schema "slurm-pilot/results/1" (documented field by field in
// docs/formats.md and pilot-files(5)). Byte counts are integers; durations are
// seconds unless the field name says `_ms`; a measurement that does not exist
// on a device (allocator peaks on a CPU) is JSON null, held as std::nullopt.
//
// ResultsToJson(ParseResults(x)) == x for every file this program writes
// (round trip), and ParseResults(ResultsToJson(r)) == r.
//
// Thread-safety: plain values and pure functions.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/base/status.h"
#include "core/records/memory_figures.h"
#include "core/records/results_node.h"

namespace pilot {

struct RecordKey;  // core/records/record.h

inline constexpr char kResultsSchema[] = "slurm-pilot/results/1";
inline constexpr size_t kResultsMaxBytes = 16u << 20;  // 16 MiB

// Memory around one optimizer step (reset peak, zero_grad, forward, backward,
// optimizer step, synchronize): the figures of MemoryFigures
// (core/records/memory_figures.h) that kMemoryStatsKeys names, in that
// order, written null when unset. CUDA figures are null on a CPU.
inline constexpr MemoryKey kMemoryStatsKeys[] = {
    {"device"},
    {"step"},
    {"peak_allocated_bytes"},
    {"peak_reserved_bytes"},
    {"device_used_bytes"},
    {"device_total_bytes"},
    {"process_device_bytes"},
    {"runtime_overhead_bytes"},
    {"alloc_retries"},
    {"ooms"},
    {"process_peak_rss_bytes"},
    {"process_rss_bytes"},
};
struct MemoryStats : MemoryFigures {
  MemoryStats() = default;
  // The figures of `f` this record has (KeepFigures).
  explicit MemoryStats(const MemoryFigures& f) : MemoryFigures(KeepFigures(f, kMemoryStatsKeys)) {}
  bool operator==(const MemoryStats&) const = default;
};

struct ShapeInfo {
  std::string model_kind;          // "gpt" | "llama"
  int64_t params = 0;              // distinct trainable elements
  int seq_len = 0;
  int micro_batch = 0;
  int grad_accum = 1;
  bool binding = false;            // pilot shape == the long run's shape
  int64_t tokens_per_step = 0;     // seq_len * micro_batch * grad_accum
  std::string precision;           // "fp32" | "bf16" | "fp16"
  bool activation_checkpointing = false;
  std::string optimizer;           // "adamw" | "sgd"
  bool fused_optimizer = false;    // fused device kernel used
  bool optimizer_state_included = true;
  // The output layer and loss ran as one function (training.fused_loss);
  // null in files written before the field existed (the unfused loss).
  std::optional<bool> fused_loss;
  // A user's program: what its probe counted (slurm_pilot.step(model=...,
  // optimizer=...)); the memory model's static parts. null = not reported.
  std::optional<int64_t> param_bytes;
  std::optional<int64_t> grad_bytes;
  std::optional<int64_t> optimizer_state_bytes;
  bool operator==(const ShapeInfo&) const = default;
};

// Means over the timed steps (after warm-up), milliseconds.
struct Timings {
  int timed_steps = 0;
  double data_wait_ms = 0;         // time the step waited for its batch
  double data_wait_max_ms = 0;
  double forward_backward_ms = 0;
  double optimizer_ms = 0;         // clip + optimizer step + schedule
  double step_ms = 0;              // whole step, wall clock
  double step_ms_median = 0;
  double eval_seconds = 0;         // each eval pass (mean)
  double model_build_seconds = 0;  // construct + initialise + move to device
  bool operator==(const Timings&) const = default;
};

struct EvalInfo {
  int batches = 0;
  int64_t at_step = 0;             // eval recorded at the checkpoint step
  double loss_at_checkpoint = 0;
  double loss_final = 0;
  bool operator==(const EvalInfo&) const = default;
};

struct CheckpointInfo {
  std::string path;                // the committed checkpoint directory
  int64_t step = 0;
  int64_t bytes = 0;               // all files of the checkpoint
  double save_seconds = 0;         // state to durable files, COMPLETE written
  double load_seconds = 0;         // in the fresh process, files to device
  double save_gb_per_s = 0;        // bytes / save_seconds / 1e9
  double load_gb_per_s = 0;
  bool operator==(const CheckpointInfo&) const = default;
};

struct RestoreInfo {
  bool ran = false;
  bool equal = false;              // losses and parameters within tolerance
  // "bitwise" (CPU, deterministic kernels) | "tolerance" (every step
  // within it) | "noise" (steps past it judged against a second resumed
  // process: core/decide/restore_check.h)
  std::string mode;
  double tolerance = 0;            // relative, for "tolerance" and "noise"
  int64_t from_step = 0;
  int64_t to_step = 0;
  std::vector<double> resumed_losses;  // steps from_step+1 .. to_step
  double first_rel_loss_diff = 0;  // step from_step+1 ("tolerance", "noise")
  double first_tolerance = 0;      // its bound
  std::vector<double> repeat_losses;  // "noise": the second resumed process's, as resumed_losses
  double noise_margin = 0;         // "noise": a step past `tolerance` within this x the spread
  double noise_max_ratio = 0;      // the largest |reference - resumed| / spread
  int noise_steps = 0;             // steps past `tolerance` judged against the spread
  double max_abs_loss_diff = 0;
  double max_rel_loss_diff = 0;
  double max_abs_param_diff = 0;   // largest element-wise |a - b|
  double max_rel_param_diff = 0;   // ||a - b|| / ||b||, all parameters together
  int64_t params_compared = 0;     // tensors compared
  std::string skipped;             // test switch in effect ("" = none)
  std::string detail;              // why unequal / why it did not run
  bool operator==(const RestoreInfo&) const = default;
};

struct PrecisionCheck {
  bool ran = false;
  std::string precision;           // the run's precision
  int steps = 0;                   // fp32 steps from the checkpoint state
  double max_abs_loss_diff = 0;
  double max_rel_loss_diff = 0;
  double threshold = 0;            // relative
  bool within = false;
  std::string detail;
  bool operator==(const PrecisionCheck&) const = default;
};

// Activation checkpointing, measured both ways: the pilot's own steps at its
// setting, and a few steps from the checkpoint at the other one.
struct RecomputeCheck {
  bool ran = false;
  // Which setting the check's own steps ran: "without" (the pilot
  // checkpoints) or "with" (it does not). Null in files of earlier runners,
  // whose checks ran only "without".
  std::optional<std::string> measured;
  bool fits_without = false;       // steps without recompute fit in memory
  int steps = 0;
  double step_ms_with = 0;
  double step_ms_without = 0;
  double cost_fraction = 0;        // with / without - 1
  std::optional<int64_t> peak_bytes_with;
  std::optional<int64_t> peak_bytes_without;
  std::optional<int64_t> memory_saved_bytes;
  // The allocator's reserved peak of the check's measured step, its cached
  // blocks released before the check (null on a CPU and in older files).
  std::optional<int64_t> peak_reserved_bytes;
  std::string detail;
  bool operator==(const RecomputeCheck&) const = default;
};

// Steps timed with the per-step measurements and without them.
struct InstrumentationCheck {
  bool ran = false;
  int steps = 0;
  double step_ms_instrumented = 0;
  double step_ms_plain = 0;
  double overhead_fraction = 0;    // instrumented / plain - 1
  bool operator==(const InstrumentationCheck&) const = default;
};

// A few steps at a smaller micro-batch (the run's seq_len, precision and
// activation checkpointing) from the checkpoint state, the last one measured
// like `memory`: with the steady step's allocated peak it gives the memory
// model two points (core/models/memory_model.h, "calibrated"). On a CPU there are no
// allocator peaks: the process's peak resident set is recorded as what it is
// and the memory model does not use it. The measured step's figures are
// those of MemoryFigures that kCalibrationMemoryKeys names (between `steps`
// and `forward_backward_ms` in the file).
inline constexpr MemoryKey kCalibrationMemoryKeys[] = {
    {"step"},
    {"peak_allocated_bytes"},
    {"peak_reserved_bytes"},
    {"device_used_bytes"},
    {"process_peak_rss_bytes"},  // VmHWM (CPU figure)
};
struct MemoryCalibrationCheck : MemoryFigures {
  std::string status;              // "ok" | "skipped" | "oom" | "error"
  int micro_batch = 0;
  int seq_len = 0;
  bool activation_checkpointing = false;
  int steps = 0;  // steps run (the last one measured)
  // One micro-batch's forward and backward, mean over the check's steps
  // after its first: with the steady steps' figure, the step-time model's
  // second point (core/models/step_time.h). Null in older files.
  std::optional<double> forward_backward_ms;
  std::string detail;              // why skipped / failed, or what the figures are
  // Takes the measured step's figures of `f` (KeepFigures); the rest stays.
  void SetFigures(const MemoryFigures& f) {
    static_cast<MemoryFigures&>(*this) = KeepFigures(f, kCalibrationMemoryKeys);
  }
  bool operator==(const MemoryCalibrationCheck&) const = default;
};

// A failure that ended the stage early (an out-of-memory is a result).
struct FailureInfo {
  std::string kind;                // "oom" | "error"
  int64_t step = 0;
  std::string phase;               // "build" | "forward" | "backward" |
                                   // "optimizer" | "eval" | "checkpoint" |
                                   // "restore"
  std::string message;
  MemoryStats memory;
  bool operator==(const FailureInfo&) const = default;
};

// A sharded run whose training state does not fit one process
// (training.memory_cap_mb, pilot.toml(5)): the single stage ran fewer
// layers of the same width, sequence and micro-batch.
struct ReducedDepth {
  int layers = 0;                    // layers the single stage ran
  int full_layers = 0;               // model.layers of the config
  int64_t full_params = 0;           // parameters at full depth
  int64_t predicted_full_bytes = 0;  // predicted one-process peak at full depth
  int64_t predicted_bytes = 0;       // the same at `layers`
  int64_t capacity_bytes = 0;        // the memory one process may use
  int64_t limit_bytes = 0;           // (1 - memory headroom) x capacity
  std::string detail;                // the sentence for people
  bool operator==(const ReducedDepth&) const = default;
};

// What one part of the single stage's process asked of the CUDA caching
// allocator (core/models/alloc_replay.h's text form), for the memory model's
// replay (core/models/memory_replay.h): the reference process from its start
// through its first steady step, and the last two steps of each memory
// calibration and of the recompute check.
struct AllocRecording {
  std::string process;  // "reference" | "memory_calibration" | "memory_calibration_other" | "recompute_check"
  int micro_batch = 0;
  int seq_len = 0;
  int grad_accum = 1;
  bool activation_checkpointing = false;
  std::string requests;
  bool operator==(const AllocRecording&) const = default;
};

struct SingleStage {
  std::string status;              // "ok" | "oom" | "error"
  std::string device;              // "cuda" | "cpu"
  std::string device_name;
  ShapeInfo shape;
  int64_t steps = 0;
  int64_t warmup_steps = 0;
  Timings timings;
  double tokens_per_second = 0;
  double flops_per_token = 0;      // 6N + 12 L d T
  double tflops = 0;               // achieved, from tokens_per_second
  std::vector<double> losses;      // reference steps 1 .. steps
  std::vector<double> grad_norms;  // before clipping
  EvalInfo eval;
  MemoryStats memory;              // a steady step
  MemoryStats memory_first_step;   // lazy optimizer state created here
  std::optional<MemoryStats> memory_resumed;  // fresh process, first step
  CheckpointInfo checkpoint;
  RestoreInfo restore;
  PrecisionCheck precision_check;
  RecomputeCheck recompute_check;
  InstrumentationCheck instrumentation;
  // null when the checks did not run (the stage ended earlier) or the file
  // predates the member.
  std::optional<MemoryCalibrationCheck> memory_calibration;
  // The same at the other activation-checkpointing setting (the one the
  // recompute check measured at the pilot's micro-batch): that layout's
  // second point. Null when the check did not measure it, or in older files.
  std::optional<MemoryCalibrationCheck> memory_calibration_other;
  // The same steps as memory_calibration at micro-batch 1 (the step-time
  // model's point below which no micro-batch exists). Null when the
  // calibration did not run above micro-batch 1, or in older files.
  std::optional<MemoryCalibrationCheck> memory_calibration_smallest;
  // Null when the stage ran the config's depth (and in older files).
  std::optional<ReducedDepth> reduced_depth;
  // The allocator's requests (on a GPU with torch 2.2 or later; empty on a
  // CPU and in older files).
  std::vector<AllocRecording> allocator_requests;
  std::optional<FailureInfo> failure;
  bool operator==(const SingleStage&) const = default;
};

struct Versions {
  std::string runner;
  std::string torch;
  std::string cuda_runtime;        // "" when built without CUDA
  std::string cuda_driver;
  std::string cudnn;
  std::string nccl;
  std::vector<std::string> devices;  // device names
  bool operator==(const Versions&) const = default;
};

// One workload process the supervisor started, as the supervisor saw it.
struct SupervisedProcess {
  std::string role;             // "single" | "restore" | "node"
  int exit_code = -1;           // its exit status; -1 when a signal ended it
  int signal = 0;               // that signal, else 0
  double wall_seconds = 0;      // start to exit, on the supervisor's clock
  int64_t report_bytes = 0;     // what it wrote to its report pipe
  std::string report_problem;   // "" = a valid report; else why not
  bool operator==(const SupervisedProcess&) const = default;
};

// Peak memory in use on one device while the workload ran, sampled by the
// supervisor (NVML), whatever the workload's own allocator says.
struct DeviceMemorySample {
  int index = 0;
  std::string uuid;
  int64_t peak_used_bytes = 0;
  int64_t total_bytes = 0;
  bool operator==(const DeviceMemorySample&) const = default;
};

// What pilot-supervisor (root) established itself. Present only in the
// results.json it writes into the job's root-owned folder.
struct SupervisorInfo {
  std::string version;
  std::string started_at;       // RFC 3339 UTC, supervisor's clock
  std::string finished_at;
  double wall_seconds = 0;
  std::vector<SupervisedProcess> processes;
  // sha256 of the checkpoint's manifest.json (itself the list of every
  // file's sha256) when the single stage reported the checkpoint complete,
  // read as the job's user. "" = no checkpoint was reported.
  std::string checkpoint_manifest_sha256;
  // True when the restore comparison in stages.single.restore was made by
  // the supervisor from the reports of two processes it started.
  bool restore_compared = false;
  // True when the supervisor was told to stop (SIGTERM/SIGINT: the job was
  // cancelled or reached its time limit) before the pilot finished.
  bool stopped = false;
  // Why the supervisor stopped it itself ("" = it was told to): its work
  // folder took the state file system below the floor (work_guard.h).
  std::string stopped_reason;
  // kernel.yama.ptrace_scope on the node while the workload ran: 0 lets any
  // process of the user attach to the workload (and change what it reports),
  // 1 and above only its ancestors or root; -1 = no Yama (as 0).
  int ptrace_scope = -1;
  std::vector<std::string> environment;    // names of the variables the workload got
  std::vector<std::string> test_switches;  // PILOT_RUNNER_TEST_* passed (policy allowed)
  std::string device_memory_source;        // "nvml", or why there are no samples
  std::vector<DeviceMemorySample> device_memory;
  bool operator==(const SupervisorInfo&) const = default;
};

// One process of the user's program, as the supervisor saw it (program
// mode, pilot-program(7)).
struct ProgramProcess {
  std::string stage;            // "single" | "node"
  std::string process;          // "reference" | "resumed"
  int rank = 0;                 // its RANK (launcher "none": 0, the one started)
  int exit_code = -1;           // -1 when a signal ended it
  int signal = 0;
  bool terminated = false;      // the supervisor ended it (hung, step N passed, a rank failed)
  double wall_seconds = 0;
  int64_t records = 0;          // metrics records read while it ran
  int64_t first_step = 0;       // first step it reported (0 = none)
  int64_t last_step = 0;
  std::string stderr_tail;      // the end of its standard error
  bool operator==(const ProgramProcess&) const = default;
};

// Whether the resumed process read the checkpoint the reference process
// wrote, as root saw it: fanotify marks on every listed file while the
// resumed process ran, an open by a process of its tree counted. The
// supervisor's observation, not the program's word.
struct CheckpointRead {
  bool watched = false;         // the files were watched (false: see problem)
  std::string problem;          // why they were not, or events were lost
  int files = 0;                // listed regular files
  int64_t bytes = 0;            // their bytes
  int opened_files = 0;         // opened by the resumed process's tree
  int64_t opened_bytes = 0;
  // What it read of them before its first record: the pages cached again
  // after the supervisor dropped them (read_measured false: see
  // read_problem, and the opens decide).
  bool read_measured = false;
  std::string read_problem;
  int read_files = 0;           // files of which it read anything
  int64_t read_bytes = 0;
  double first_record_seconds = -1;  // from its start; -1: no record
  // Opens by other processes of the job's user while it ran (their reads
  // would count as its own): counted, the first named.
  int outside_opens = 0;
  std::string outside_example;
  bool operator==(const CheckpointRead&) const = default;
};

// Which of the listed checkpoint files hold step K: those whose status last
// changed before the reference process reported a step past K (the
// supervisor's clock against the files' ctime, which their owner cannot set
// back). A program that saves on a schedule (K, 2K) leaves later saves in
// the folder; the read check counts the step-K files only.
struct CheckpointSaves {
  double saved_by_unix = 0;       // the time; 0 when no step past K was reported
  int at_step_files = 0;          // the checkpoint of step K
  int64_t at_step_bytes = 0;
  int later_files = 0;            // changed after it: later saves
  int64_t later_bytes = 0;
  std::string later_example;      // the first of them, relative to the folder
  // Every file changed later: the reference saved again into the same files
  // (or an asynchronous save finished late); all count as the checkpoint.
  bool rewritten = false;
  bool operator==(const CheckpointSaves&) const = default;
};

// One step of the reference process (single stage, rank 0) as its record
// gave it: the series a leak shows in. -1: not reported.
struct StepMemory {
  int64_t step = 0;
  int64_t peak_allocated_bytes = -1;  // the step's peak (the probe resets it every step)
  int64_t peak_reserved_bytes = -1;
  int64_t peak_rss_bytes = -1;        // the process's resident high-water mark
  bool operator==(const StepMemory&) const = default;
};

// The precision the program trained in, as its probe saw it (never the
// config's assumption): autocast regions entered during its steps, the
// parameters' dtype, a gradient scaler at work.
struct ProgramPrecision {
  bool reported = false;            // a record carried one of the fields below
  std::string autocast;             // "bfloat16", "float16"; "" when none was seen
  std::string autocast_device;      // "cuda" | "cpu" | ""
  std::string param_dtype;          // "float32", "bfloat16", ...; "" not reported
  bool grad_scaler = false;
  int64_t steps = 0;                // reference steps read
  int64_t autocast_steps = 0;       // of them, with an autocast region
  bool operator==(const ProgramPrecision&) const = default;
};

// What the program's probe found it ran with (rank 0's env line).
struct ProgramEnvironment {
  std::string python, torch, cuda, hip, nccl, cudnn, gpu, gpu_capability;
  int64_t gpu_count = 0;
  // The probe's "packages" lines: installed distributions (name -> version)
  // and the loaded modules with native code outside the standard library
  // and torch (top-level module -> "distribution version", "" when built
  // outside any installed distribution).
  std::map<std::string, std::string> distributions, extensions;
  bool operator==(const ProgramEnvironment&) const = default;
};

// One component of the training state, fingerprinted by the probe when the
// reference saved step K and when the resumed process had restored it.
struct StateComponentDiff {
  int rank = 0;
  std::string component;      // "model", "optimizer", "scheduler", "rng.torch", ...
  std::string saved;          // its digest at the save ("" when not reported)
  std::string restored;       // after the restore
  bool equal = false;
  std::string saved_detail;   // what the probe added ("last_epoch 20"), or ""
  std::string restored_detail;
  bool operator==(const StateComponentDiff&) const = default;
};

// How busy a phase's processes kept the node while they reported steps, as
// root measured it: their CPU time (/proc) and the job's GPUs' utilization
// (NVML) over the window from the first record to the last. A phase whose
// window was under 2 s has no entry.
struct PhaseBusy {
  std::string stage;               // "single" | "node"
  std::string process;             // "reference" | "resumed"
  double seconds = 0;              // the window measured
  double cpu_cores = 0;            // CPU seconds per second over it
  double device_utilization = -1;  // 0..1, the GPUs' mean; -1 = not measured
  double steps = 0;                // the window's length in steps (0 = not measured)
  bool operator==(const PhaseBusy&) const = default;
};

// What a phase's processes did before their first record, as the supervisor
// read it: their CPU time (their process groups, reaped children included)
// when the record arrived. A resumed process that trains steps 1..K again
// before it reports K+1 spends about K of the reference's steps more than
// the reference did before its step 1.
struct PhaseStart {
  std::string stage;                  // "single" | "node"
  std::string process;                // "reference" | "resumed"
  int64_t first_step = 0;             // the step of its first record
  double seconds = 0;                 // from the phase's start to that record
  double cpu_seconds = 0;             // the processes' CPU seconds by then
  // The reference: CPU seconds between the first records of step K and
  // K+1 (its save and one step); -1 = not read.
  double save_step_cpu_seconds = -1;
  bool operator==(const PhaseStart&) const = default;
};

// The image the program's processes ran in ([container] runtime), as the
// supervisor started it and read it back from the runtime afterwards.
struct ProgramContainer {
  std::string runtime;   // "podman" | "apptainer" | "pyxis"
  std::string image;     // the reference started: the lock's pinned REPO@sha256:HEX
  std::string digest;    // what ran ("" = not known: see problem)
  // Where `digest` comes from: "runtime" (podman image inspect), "file"
  // (the image file hashed again after the processes ran), "reference"
  // (Apptainer and pyxis report nothing: the digest the processes were
  // started with, not read back); "" with no digest.
  std::string digest_source;
  std::string image_id;  // the runtime's id of that image ("" when not read)
  std::string problem;   // why the digest was not read back
  bool operator==(const ProgramContainer&) const = default;
};

// What the supervisor saw of the user's program. Present when results.json
// was written for a [program] pilot.
struct ProgramInfo {
  std::vector<std::string> command;  // argv as run
  std::string workdir;
  std::string launcher;              // "pilot" | "none"
  std::string metrics;               // "records" (PILOT_METRICS) | "loss_pattern"
  bool shape_reported = false;       // the program reported seq_len and micro_batch
  std::string checkpoint_dir;        // where the reference process saved step K
  std::string checkpoint_files;      // the file list hashed after it exited (root's copy)
  int checkpoint_file_count = 0;
  int64_t checkpoint_bytes = 0;
  bool lr_compared = false;          // lr of the resumed steps compared with the reference's
  bool eval_compared = false;        // eval_loss likewise
  std::vector<std::string> problems; // every problem found, in the order found
  std::vector<ProgramProcess> processes;
  CheckpointRead checkpoint_read;    // the resumed process and the checkpoint, as root saw it
  // Processes of a phase still alive when it ended (a daemon that left its
  // process group), killed then: "single resumed: pid 123 (python3), uid 1000".
  std::vector<std::string> outlived;
  std::vector<PhaseBusy> busy;       // per phase, the supervisor's measurement
  std::vector<PhaseStart> starts;    // per phase, before its first record
  CheckpointSaves checkpoint_saves;  // the single stage's listed files and step K
  std::vector<StepMemory> memory_steps;  // the single reference's steps, rank 0
  // The memory the job's processes may use, as the supervisor read it: its
  // cgroup's memory.max, else the node's MemTotal; 0 when not read.
  int64_t memory_limit_bytes = 0;
  ProgramPrecision precision;
  ProgramEnvironment environment;
  // Absent when the program ran on the node (container.runtime "none").
  std::optional<ProgramContainer> container;
  // The single stage's state fingerprints compared, component by component
  // and rank; empty when the program reported none (slurm_pilot.saved and
  // slurm_pilot.restored, pilot-program(7)).
  std::vector<StateComponentDiff> state;
  bool operator==(const ProgramInfo&) const = default;
};

struct Results {
  std::string schema = kResultsSchema;
  // "builtin" (the runner's model) or "program" (the user's program).
  std::string workload = "builtin";
  // The pilot instance (lock.json's) these results belong to; "" when the
  // runner ran outside a supervised job.
  std::string instance;
  std::string config_path;
  std::string config_sha256;
  std::string lock_path;           // "" when run without a lock
  int64_t seed = 0;
  std::string started_at;          // RFC 3339 UTC
  std::string finished_at;
  int exit_code = 0;               // the runner's exit status for this run
  Versions versions;
  // PYTORCH_ALLOC_CONF the runner's processes ran with ("" = torch's
  // defaults); the memory figures hold for these settings.
  std::string alloc_conf;
  std::optional<SingleStage> single;  // stages.single
  std::optional<NodeStage> node;      // stages.node
  std::optional<SupervisorInfo> supervisor;  // only from pilot-supervisor
  std::optional<ProgramInfo> program;        // only in program mode
  bool operator==(const Results&) const = default;
};

// Every member, in field-list order, nested ones by their path
// ("stages.single.restore.equal", "program.processes[].stage"):
// pilot-files(5) documents each; a test checks it.
const std::vector<RecordKey>& ResultsKeys();

// Pretty JSON text (2-space indent, trailing newline).
std::string ResultsToJson(const Results& r);

// Parses and validates. `name` is used in messages ("results.json").
// Errors: kInvalid (larger than kResultsMaxBytes, not JSON, wrong schema,
// unknown key, missing required key, wrong type: the message names the
// field path).
Result<Results> ParseResults(const std::string& text, const std::string& name = "results.json");

// Reads a file (at most kResultsMaxBytes) and parses it.
// Errors: kNotFound, kIoError, kInvalid.
Result<Results> ReadResultsFile(const std::string& path);

}  // namespace pilot
