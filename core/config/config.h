// pilot.toml: the description of a training run and of its pilot.
//
// The schema is documented key by key, with defaults, in man/pilot.toml.5; a
// test fails when a key below is missing there. Every struct field has the
// default that applies when the key is absent.
//
// Loading is strict: unknown sections or keys, wrong types, out-of-range
// values, duplicate keys and TOML syntax errors each produce exactly one
// Status whose `what` starts with "FILE:LINE" (and names the key), e.g.
//   pilot: configs/x.toml:14: training.seq_len: must be between 1 and 1048576, got 0
//
// Derived defaults are filled by the loader: after LoadConfig the fields
// documented "0 = X" below hold X (training.seq_len, training.micro_batch,
// model.kv_heads, model.max_seq_len, training.schedule_steps,
// checkpoint.at_step), so consumers never see those zeros. Fields whose
// default is decided later (training.seed = -1, parallel.nproc = 0,
// checkpoint.dir = "", data.eval = "") keep their marker value.
//
// Thread-safety: plain values. LoadConfig reads the environment (for $VARS)
// through the ExpandEnv callback, nothing else global.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/base/env_lookup.h"
#include "core/base/status.h"

namespace pilot {

// [run]: the long run this pilot stands for. Used for the shape check, the
// hardware fit and the budget.
struct RunConfig {
  std::string name;                 // required; [A-Za-z0-9._-]{1,64}
  int nodes = 1;                    // nodes the long run wants
  int gpus_per_node = 8;            // GPUs per node of the long run
  std::string gpu_type;             // wanted type from the catalog; "" = any
  int seq_len = 0;                  // required: the long run's sequence length
  int micro_batch = 0;              // required: per-GPU micro-batch
  int grad_accum = 1;               // gradient accumulation steps
  int64_t target_tokens = 0;        // tokens to train; one of tokens/steps
  int64_t target_steps = 0;         //   (optimizer steps) must be > 0
  double reservation_days = 30;     // term the user hopes for (7 or 30 typical)
  int64_t checkpoint_interval = 1000;  // optimizer steps between checkpoints
  int64_t eval_interval = 1000;        // optimizer steps between evals
  double dataset_gb = 0;            // bytes to download/copy in (GB = 1e9)
  double preprocess_hours = 0;      // tokenization etc. before training
  double export_gb = 0;             // final artifacts to copy off the node
};

// [model]: the workload. kind selects a builtin family.
struct ModelConfig {
  std::string kind = "gpt";  // "gpt" (LayerNorm, GELU, learned pos, tied) or
                             // "llama" (RMSNorm, RoPE, SwiGLU, GQA)
  int layers = 12;
  int d_model = 768;
  int heads = 12;
  int kv_heads = 0;          // 0 = heads (no grouping); must divide heads
  int vocab = 50304;
  double ffn_mult = 4.0;     // MLP width: gpt hidden = round(ffn_mult *
                             // d_model); llama (SwiGLU) hidden = the multiple
                             // of 256 at or above round(2/3 * ffn_mult *
                             // d_model). Same rule in pilot.toml(5).
  int max_seq_len = 0;       // learned positions / RoPE table; 0 = run.seq_len
  std::string init_weights;  // optional safetensors file to start from
  std::string init_sha256;   // required when init_weights is set
};

// [data]: token files. format "random" synthesises tokens from the seed (no
// files); "u16"/"u32" are flat little-endian token arrays.
struct DataConfig {
  std::string format = "random";  // "random" | "u16" | "u32"
  std::string train;              // path, required unless format = "random"
  std::string train_sha256;       // pinned hash; empty = pinned by prolog
  std::string eval;               // path; empty = held-out tail of train
  std::string eval_sha256;
  int loader_threads = 1;         // producer threads of the prefetching loader
  int prefetch = 2;               // batches kept ready ahead of the step
};

// [training]: what the pilot executes.
struct TrainingConfig {
  int seq_len = 0;            // 0 = run.seq_len
  int micro_batch = 0;        // 0 = run.micro_batch
  bool allow_smaller_shape = false;  // permit a smaller shape (non-binding)
  int steps = 20;             // optimizer steps of the pilot (>= 2)
  int warmup_steps = 2;       // steps excluded from timing statistics
  std::string optimizer = "adamw";   // "adamw" | "sgd"
  double lr = 3e-4;
  double min_lr = 3e-5;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;
  double momentum = 0.9;      // sgd only
  std::string lr_schedule = "cosine";  // "constant" | "cosine" | "linear"
  int lr_warmup = 0;          // linear warm-up steps of the schedule
  int64_t schedule_steps = 0; // horizon of the schedule; 0 = run's total steps
  std::string precision = "bf16";  // "fp32" | "bf16" | "fp16"
  bool activation_checkpointing = false;
  bool fused_loss = true;     // output layer + loss as one function (bf16, fp32)
  double grad_clip = 1.0;     // max global grad norm; 0 = off
  int64_t seed = -1;          // -1 = derived from the job id by the prolog
  bool deterministic = false; // ask torch for deterministic kernels
  std::string device = "auto";  // "auto" | "cpu" | "cuda"
  int precision_check_steps = 3;  // fp32 comparison steps (bf16/fp16 only)
  int recompute_check_steps = 3;  // steps at the other checkpointing setting
  int memory_calibration_steps = 2;  // steps at a smaller micro-batch (memory model)
  // The memory one process of the pilot may use, MiB: on a GPU the smaller
  // of this and the device's memory, on a CPU this alone; 0 = the device's
  // (no cap on a CPU). A sharded run's single stage plans its depth by it.
  int memory_cap_mb = 0;
  // The device allocator's settings (PYTORCH_ALLOC_CONF) for every process of
  // the pilot; "" keeps the environment's.
  std::string alloc_conf = "expandable_segments:True";
};

// [checkpoint]
struct CheckpointConfig {
  std::string dir;            // "" = OUT/checkpoints
  int at_step = 0;            // 0 = steps / 2; must be < training.steps
  std::string format = "safetensors";  // only "safetensors" for now
  int keep = 2;               // checkpoints kept in dir
};

// [eval]
struct EvalConfig {
  int batches = 2;                      // eval micro-batches
  double restore_tolerance = 1e-3;      // max relative loss diff on GPU
};

// [parallel]: the node stage.
struct ParallelConfig {
  std::string mode = "ddp";         // "ddp" | "sharded"
  std::string launcher = "auto";    // "auto" | "srun" | "local"
  int nproc = 0;                    // 0 = GPUs visible (CPU: 2)
  int bucket_mb = 25;               // DDP gradient bucket size
};

// [container]
struct ContainerConfig {
  std::string image;   // "registry/repo:tag", "repo@sha256:..", or a .sqsh/.sif
  // What runs the program in the pinned image: "none" (pinned only, the
  // program runs on the node), "pyxis", "apptainer" or "podman"
  // (launch/container.h); the site allows runtimes in pilot.conf(5).
  std::string runtime = "none";
  // Extra binds: "PATH", "SRC:DST" or "SRC:DST:ro", absolute paths without
  // ',' or ':' (core/config/mounts.h); the site allows their sources.
  std::vector<std::string> mounts;
};

// [program]: the user's own training program as the pilot (pilot-program(7)).
// Absent (command empty): the builtin model of [model] is trained.
struct ProgramConfig {
  std::vector<std::string> command;  // argv, no shell; argv[0] looked up in PATH
  std::string workdir;               // "" = the job's submit directory
  std::map<std::string, std::string> env;  // added to the program's environment
  std::string launcher = "pilot";    // "pilot": one process per rank; "none": one
                                     // process that starts its own workers
  int step_timeout = 600;            // seconds without a metrics record: hung
  std::string loss_pattern;          // RE2 syntax (LossPattern), one group, over stdout lines; "" = metrics
  // Files and folders of the run identity, relative to workdir (no "..",
  // not absolute); empty = the command's script when it is a file
  // (job/pins.h). Hashed at submit and again by the prolog.
  std::vector<std::string> pin;
  // Hugging Face hub cache entries, "org/name" or "org/name@revision"
  // (revision: a ref under refs/, or a commit; default "main"), read from
  // the cache folder on disk only.
  std::vector<std::string> hub_models;
  std::vector<std::string> hub_datasets;
};

// [hardware]
struct HardwareConfig {
  std::vector<std::string> candidates = {"A100-80", "H100-80", "H200-141",
                                         "MI300X-192"};
};

// Where a value came from, for `pilot check`'s table and for messages.
struct KeySource {
  int line = 0;          // 0 = default or --set
  bool is_default = true;
  bool from_override = false;
};

struct Config {
  RunConfig run;
  ModelConfig model;
  DataConfig data;
  TrainingConfig training;
  CheckpointConfig checkpoint;
  EvalConfig eval;
  ParallelConfig parallel;
  ContainerConfig container;
  ProgramConfig program;
  HardwareConfig hardware;

  std::string path;     // as given (absolute when the caller made it so)
  std::string sha256;   // of the file's bytes, hex
  // "section.key" -> where it came from; every known key is present.
  std::map<std::string, KeySource> sources;

  // True when the pilot runs the user's program ([program] command set).
  bool IsProgram() const { return !program.command.empty(); }
  // True when the pilot's shape equals the long run's (binding pilot).
  bool ShapeIsBinding() const {
    return training.seq_len == run.seq_len &&
           training.micro_batch == run.micro_batch;
  }
  // Tokens of one optimizer step of the long run: run.seq_len * micro_batch
  // * grad_accum * gpus_per_node * nodes (a double: the product may not fit
  // in 64 bits for absurd inputs).
  double RunTokensPerStep() const;
  // Optimizer steps of the long run: run.target_steps, or run.target_tokens
  // / RunTokensPerStep() rounded up. REQUIRES: a config LoadConfig accepted.
  int64_t RunTotalSteps() const;
};

// One entry of program.hub_models / hub_datasets: "org/name[@revision]".
struct HubRef {
  std::string repo;      // "org/name" (or "name")
  std::string revision;  // a ref name under refs/ or a 40-hex commit; default "main"
};
// Errors (kInvalid, detail only): a repo that is not one or two names of
// [A-Za-z0-9._-] (no "..", not starting with '.'), a revision with a
// character outside [A-Za-z0-9._/-], a ".." or an empty part.
Result<HubRef> ParseHubRef(std::string_view text);
// "" when `path` may be a program.pin entry: relative, no "", "." or ".."
// component but a trailing '/', no NUL; else why not.
std::string PinPathProblem(std::string_view path);

}  // namespace pilot
