// Cross-field rules of pilot.toml and the derived defaults. Each key has
// already passed its own type and range check (load.cc); here the keys are
// weighed against each other. The rules are listed, with these messages, in
// pilot.toml(5) under CROSS-FIELD RULES.
#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "core/config/config.h"
#include "core/config/config_schema.h"
#include "core/base/strings.h"

namespace pilot {

namespace config_internal {
namespace {

std::string Str(int64_t v) { return std::to_string(v); }

class Rules {
 public:
  Rules(Config& c, const Origins& o) : c_(c), o_(o) {}

  Status Run() {
    PILOT_RETURN_IF_ERROR(RunTarget());
    PILOT_RETURN_IF_ERROR(Program());
    PILOT_RETURN_IF_ERROR(Container());
    PILOT_RETURN_IF_ERROR(Model());
    PILOT_RETURN_IF_ERROR(Data());
    PILOT_RETURN_IF_ERROR(Shape());
    PILOT_RETURN_IF_ERROR(Steps());
    PILOT_RETURN_IF_ERROR(Optimizer());
    PILOT_RETURN_IF_ERROR(Placement());
    return Status::Ok();
  }

 private:
  bool IsSet(const char* key) const { return !c_.sources.at(key).is_default; }
  Status Err(std::initializer_list<const char*> keys, const std::string& detail,
             const std::string& hint = {}) const {
    Status s = Status::Invalid(o_.Blame(c_, keys), detail);
    return hint.empty() ? s : s.WithHint(hint);
  }

  Status RunTarget() {
    const RunConfig& r = c_.run;
    if (r.target_tokens > 0 && r.target_steps > 0) {
      return Err({"run.target_steps", "run.target_tokens"},
                 "set run.target_tokens or run.target_steps, not both",
                 "the other one follows from seq_len, micro_batch, grad_accum, "
                 "gpus_per_node and nodes");
    }
    if (r.target_tokens == 0 && r.target_steps == 0) {
      return Err({"run.target_tokens"},
                 "the long run's length is missing: set run.target_tokens or run.target_steps "
                 "to a value > 0");
    }
    if (!r.gpu_type.empty()) {
      const auto& cands = c_.hardware.candidates;
      if (std::find(cands.begin(), cands.end(), r.gpu_type) == cands.end()) {
        return Err(
            {"run.gpu_type"},
            Quote(r.gpu_type) + " is not among hardware.candidates (" + Join(cands, ", ") + ")",
            "add it to hardware.candidates, or leave run.gpu_type empty for any type");
      }
    }
    return Status::Ok();
  }

  // With [program] the user's program is the workload: the builtin model's
  // keys would describe something the pilot does not run.
  // [container]: a runtime needs an image it can run, and binds need a
  // runtime. pilot.conf(5)'s allowed_runtimes and allowed_mounts are the
  // site's and are checked where the policy is read (the plugin, the prolog).
  Status Container() {
    const ContainerConfig& k = c_.container;
    if (k.runtime == "none") {
      if (!k.mounts.empty()) {
        return Err({"container.mounts"}, "binds need a runtime, and container.runtime is \"none\"",
                   "set container.runtime to \"podman\", \"apptainer\" or \"pyxis\"");
      }
      return Status::Ok();
    }
    if (!c_.IsProgram()) {
      return Err({"container.runtime"},
                 "runs a user's program ([program]) in the image; the builtin model does not run "
                 "in a container",
                 "set program.command, or remove container.runtime");
    }
    if (k.image.empty()) {
      return Err({"container.runtime", "container.image"},
                 "container.runtime " + Quote(k.runtime) + " needs container.image");
    }
    const bool file = StartsWith(k.image, "/") || StartsWith(k.image, ".") ||
                      StartsWith(k.image, "$") || EndsWith(k.image, ".sif") ||
                      EndsWith(k.image, ".sqsh") || EndsWith(k.image, ".squashfs");
    if (file && k.runtime == "podman") {
      return Err({"container.image"}, "podman runs a registry image, not the file " + Quote(k.image),
                 "push the image to a registry and name it there");
    }
    if (file && k.runtime == "apptainer" && !EndsWith(k.image, ".sif")) {
      return Err({"container.image"}, "apptainer runs a .sif file or a registry image, got " +
                                          Quote(k.image));
    }
    if (file && k.runtime == "pyxis" && !EndsWith(k.image, ".sqsh") &&
        !EndsWith(k.image, ".squashfs")) {
      return Err({"container.image"}, "pyxis runs a .sqsh file or a registry image, got " +
                                          Quote(k.image));
    }
    return Status::Ok();
  }

  Status Program() {
    if (!c_.IsProgram()) {
      for (const auto& [name, src] : c_.sources) {
        if (StartsWith(name, "program.") && !src.is_default) {
          return Err({name.c_str()}, "is set but program.command is not",
                     "name the program to run: command = [\"python3\", \"train.py\"]");
        }
      }
      return Status::Ok();
    }
    const std::vector<std::string>& kept = config_internal::KeysKeptForAProgram();
    for (const char* section : {"model", "data", "training", "checkpoint", "eval", "parallel"}) {
      for (const auto& [name, src] : c_.sources) {
        if (src.is_default || !StartsWith(name, std::string(section) + ".")) continue;
        if (std::find(kept.begin(), kept.end(), name) != kept.end()) continue;
        return Err({name.c_str()},
                   "applies to the builtin model and cannot be used with [program]",
                   std::string(section) == "model" || std::string(section) == "data"
                       ? "the program builds its own model and data; remove [" +
                             std::string(section) + "]"
                       : "with a program the pilot controls only " + Join(kept, ", "));
      }
    }
    for (const auto& [var, value] : c_.program.env) {
      if (StartsWith(var, "PILOT_") || StartsWith(var, "SLURM_") || StartsWith(var, "LD_") ||
          var == "RANK" || var == "LOCAL_RANK" || var == "WORLD_SIZE" ||
          var == "LOCAL_WORLD_SIZE" || var == "GROUP_RANK" || var == "MASTER_ADDR" ||
          var == "MASTER_PORT") {
        return Err({"program.env"}, var + " is set by the pilot or by Slurm and cannot be overridden");
      }
    }
    if (c_.parallel.launcher == "srun") {
      return Err({"parallel.launcher"},
                 "a program's ranks are started by the supervisor on the batch host; \"srun\" "
                 "is not available with [program] yet",
                 "leave parallel.launcher at \"auto\" or set \"local\"");
    }
    return Status::Ok();
  }

  Status Model() {
    ModelConfig& m = c_.model;
    if (m.d_model % m.heads != 0) {
      return Err({"model.heads", "model.d_model"},
                 "model.d_model = " + Str(m.d_model) +
                     " is not divisible by model.heads = " + Str(m.heads));
    }
    if (m.kv_heads == 0) m.kv_heads = m.heads;
    if (m.kv_heads > m.heads || m.heads % m.kv_heads != 0) {
      return Err(
          {"model.kv_heads", "model.heads"},
          "model.kv_heads = " + Str(m.kv_heads) + " must divide model.heads = " + Str(m.heads));
    }
    if (m.kind == "gpt" && m.kv_heads != m.heads) {
      return Err({"model.kv_heads"},
                 "grouped key/value heads need model.kind = \"llama\"; a gpt model has "
                 "kv_heads = heads = " +
                     Str(m.heads));
    }
    if (m.kind == "llama" && (m.d_model / m.heads) % 2 != 0) {
      return Err({"model.heads", "model.d_model"},
                 "llama's rotary embedding needs an even head size; d_model / heads = " +
                     Str(m.d_model) + " / " + Str(m.heads) + " = " + Str(m.d_model / m.heads));
    }
    if (m.max_seq_len == 0) m.max_seq_len = c_.run.seq_len;
    if (m.max_seq_len < c_.run.seq_len) {
      return Err({"model.max_seq_len"},
                 Str(m.max_seq_len) + " is shorter than run.seq_len = " + Str(c_.run.seq_len));
    }
    if (!m.init_weights.empty() && m.init_sha256.empty()) {
      return Err({"model.init_weights"}, "model.init_sha256 is required with init_weights",
                 "pin the file: init_sha256 = \"<output of sha256sum>\"");
    }
    if (m.init_weights.empty() && !m.init_sha256.empty()) {
      return Err({"model.init_sha256"}, "is set but model.init_weights is not");
    }
    return Status::Ok();
  }

  Status Data() {
    const DataConfig& d = c_.data;
    if (d.format == "random") {
      for (const char* key : {"data.train", "data.train_sha256", "data.eval", "data.eval_sha256"}) {
        if (IsSet(key)) {
          return Err({key}, "is set but data.format is \"random\" (tokens come from the seed)",
                     "set data.format = \"u16\" or \"u32\" to read token files");
        }
      }
      return Status::Ok();
    }
    if (d.train.empty()) {
      return Err({"data.train", "data.format"},
                 "data.format = " + Quote(d.format) + " needs data.train, a token file");
    }
    if (d.eval.empty() && !d.eval_sha256.empty()) {
      return Err({"data.eval_sha256"}, "is set but data.eval is not");
    }
    if (d.format == "u16" && c_.model.vocab > 65536) {
      return Err({"data.format", "model.vocab"},
                 "u16 tokens hold ids below 65536 but model.vocab = " + Str(c_.model.vocab),
                 "use data.format = \"u32\"");
    }
    return Status::Ok();
  }

  Status Shape() {
    TrainingConfig& t = c_.training;
    const RunConfig& r = c_.run;
    if (t.seq_len == 0) t.seq_len = r.seq_len;
    if (t.micro_batch == 0) t.micro_batch = r.micro_batch;
    struct Dim {
      const char* key;
      const char* run_key;
      int pilot;
      int run;
    };
    for (const Dim& d :
         {Dim{"training.seq_len", "run.seq_len", t.seq_len, r.seq_len},
          Dim{"training.micro_batch", "run.micro_batch", t.micro_batch, r.micro_batch}}) {
      if (d.pilot > d.run) {
        return Err({d.key}, Str(d.pilot) + " is larger than " + d.run_key + " = " + Str(d.run) +
                                "; a pilot may not be larger than the run it stands for");
      }
      if (d.pilot != d.run && !t.allow_smaller_shape) {
        return Err({d.key},
                   "the pilot must use the real shape: " + Str(d.pilot) + " differs from " +
                       d.run_key + " = " + Str(d.run),
                   "set training.allow_smaller_shape = true to run it anyway; the verdict "
                   "will then be non-binding");
      }
    }
    return Status::Ok();
  }

  Status Steps() {
    TrainingConfig& t = c_.training;
    if (t.warmup_steps >= t.steps) {
      return Err({"training.warmup_steps", "training.steps"},
                 "training.warmup_steps = " + Str(t.warmup_steps) +
                     " leaves no measured step; it must be < training.steps = " + Str(t.steps));
    }
    CheckpointConfig& k = c_.checkpoint;
    if (k.at_step == 0) k.at_step = t.steps / 2;
    if (k.at_step < 1 || k.at_step > t.steps - 1) {
      return Err({"checkpoint.at_step", "training.steps"},
                 "checkpoint.at_step = " + Str(k.at_step) + " must be between 1 and " +
                     Str(t.steps - 1) + " (training.steps - 1): the pilot resumes from it",
                 "a restore is proven only when steps follow the checkpoint");
    }
    const std::pair<const char*, int> check_steps[] = {
        {"training.precision_check_steps", t.precision_check_steps},
        {"training.recompute_check_steps", t.recompute_check_steps}};
    for (const auto& [key, v] : check_steps) {
      if (v > t.steps) {
        return Err({key}, Str(v) + " is more than training.steps = " + Str(t.steps));
      }
    }
    if (t.schedule_steps == 0) t.schedule_steps = c_.RunTotalSteps();
    if (t.lr_warmup >= t.schedule_steps) {
      return Err({"training.lr_warmup", "training.schedule_steps"},
                 "training.lr_warmup = " + Str(t.lr_warmup) +
                     " must be less than the schedule's horizon of " + Str(t.schedule_steps) +
                     " steps");
    }
    return Status::Ok();
  }

  Status Optimizer() {
    const TrainingConfig& t = c_.training;
    if (t.min_lr > t.lr) {
      return Err({"training.min_lr", "training.lr"},
                 "training.min_lr = " + FormatDouble(t.min_lr) +
                     " is above training.lr = " + FormatDouble(t.lr));
    }
    return Status::Ok();
  }

  Status Placement() {
    const TrainingConfig& t = c_.training;
    if (t.device == "cpu" && t.precision == "fp16") {
      return Err({"training.precision", "training.device"},
                 "fp16 is not supported on the cpu device", "use \"bf16\" or \"fp32\" on cpu");
    }
    // Across nodes (the srun launcher in an allocation of several) the
    // node stage's processes may span the run's nodes.
    const int64_t gpus = int64_t{c_.run.nodes} * c_.run.gpus_per_node;
    if (c_.parallel.nproc > gpus) {
      return Err({"parallel.nproc"},
                 Str(c_.parallel.nproc) + " processes is more than the run's " + Str(gpus) + " GPUs (run.nodes = " +
                     Str(c_.run.nodes) + " times run.gpus_per_node = " + Str(c_.run.gpus_per_node) +
                     "); a pilot may not be larger than the run it stands for");
    }
    return Status::Ok();
  }

  Config& c_;
  const Origins& o_;
};

}  // namespace

Status ResolveAndValidate(Config& c, const Origins& origins) { return Rules(c, origins).Run(); }

}  // namespace config_internal
}  // namespace pilot
