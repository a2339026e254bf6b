#include "core/config/config_schema.h"

#include <algorithm>

namespace pilot::config_internal {
namespace {

constexpr int64_t kMaxSeqLen = 1 << 20;
constexpr int64_t kBig = 1'000'000'000'000;            // 1e12 steps
constexpr int64_t kMaxTokens = 1'000'000'000'000'000;  // 1e15 tokens

}  // namespace

// `.section`, `.key` and `.field` of one KeySpec from the struct member.
#define PILOT_KEY(sec, name) \
  .section = #sec, .key = #name, .field = [](Config& c) -> FieldPtr { return &c.sec.name; }

const std::vector<KeySpec>& Schema() {
  static const std::vector<KeySpec> kSchema = {
      // [run]
      {PILOT_KEY(run, name), .kind = StringKind::kName, .required = true},
      {PILOT_KEY(run, nodes), .ilo = 1, .ihi = 100000},
      {PILOT_KEY(run, gpus_per_node), .ilo = 1, .ihi = 64},
      {PILOT_KEY(run, gpu_type)},
      {PILOT_KEY(run, seq_len), .ilo = 1, .ihi = kMaxSeqLen, .required = true},
      {PILOT_KEY(run, micro_batch), .ilo = 1, .ihi = 65536, .required = true},
      {PILOT_KEY(run, grad_accum), .ilo = 1, .ihi = 65536},
      {PILOT_KEY(run, target_tokens), .ilo = 0, .ihi = kMaxTokens, .float_ok = true},
      {PILOT_KEY(run, target_steps), .ilo = 0, .ihi = kBig, .float_ok = true},
      {PILOT_KEY(run, reservation_days), .dlo = 0, .dhi = 366, .dlo_open = true},
      {PILOT_KEY(run, checkpoint_interval), .ilo = 1, .ihi = kBig},
      {PILOT_KEY(run, eval_interval), .ilo = 1, .ihi = kBig},
      {PILOT_KEY(run, dataset_gb), .dlo = 0, .dhi = 1e9},
      {PILOT_KEY(run, preprocess_hours), .dlo = 0, .dhi = 1e5},
      {PILOT_KEY(run, export_gb), .dlo = 0, .dhi = 1e9},
      // [model]
      {PILOT_KEY(model, kind), .choices = {"gpt", "llama"}},
      {PILOT_KEY(model, layers), .ilo = 1, .ihi = 1024},
      {PILOT_KEY(model, d_model), .ilo = 1, .ihi = 65536},
      {PILOT_KEY(model, heads), .ilo = 1, .ihi = 1024},
      {PILOT_KEY(model, kv_heads), .ilo = 0, .ihi = 1024},
      {PILOT_KEY(model, vocab), .ilo = 2, .ihi = 1 << 24},
      {PILOT_KEY(model, ffn_mult), .dlo = 0, .dhi = 64, .dlo_open = true},
      {PILOT_KEY(model, max_seq_len), .ilo = 0, .ihi = kMaxSeqLen},
      {PILOT_KEY(model, init_weights), .kind = StringKind::kPath},
      {PILOT_KEY(model, init_sha256), .kind = StringKind::kSha256},
      // [data]
      {PILOT_KEY(data, format), .choices = {"random", "u16", "u32"}},
      {PILOT_KEY(data, train), .kind = StringKind::kPath},
      {PILOT_KEY(data, train_sha256), .kind = StringKind::kSha256},
      {PILOT_KEY(data, eval), .kind = StringKind::kPath},
      {PILOT_KEY(data, eval_sha256), .kind = StringKind::kSha256},
      {PILOT_KEY(data, loader_threads), .ilo = 1, .ihi = 64},
      {PILOT_KEY(data, prefetch), .ilo = 1, .ihi = 64},
      // [training]
      {PILOT_KEY(training, seq_len), .ilo = 0, .ihi = kMaxSeqLen},
      {PILOT_KEY(training, micro_batch), .ilo = 0, .ihi = 65536},
      {PILOT_KEY(training, allow_smaller_shape)},
      {PILOT_KEY(training, steps), .ilo = 2, .ihi = 1000000},
      {PILOT_KEY(training, warmup_steps), .ilo = 0, .ihi = 1000000},
      {PILOT_KEY(training, optimizer), .choices = {"adamw", "sgd"}},
      {PILOT_KEY(training, lr), .dlo = 0, .dhi = 10, .dlo_open = true},
      {PILOT_KEY(training, min_lr), .dlo = 0, .dhi = 10},
      {PILOT_KEY(training, beta1), .dlo = 0, .dhi = 1, .dhi_open = true},
      {PILOT_KEY(training, beta2), .dlo = 0, .dhi = 1, .dhi_open = true},
      {PILOT_KEY(training, eps), .dlo = 0, .dhi = 1, .dlo_open = true},
      {PILOT_KEY(training, weight_decay), .dlo = 0, .dhi = 10},
      {PILOT_KEY(training, momentum), .dlo = 0, .dhi = 1, .dhi_open = true},
      {PILOT_KEY(training, lr_schedule), .choices = {"constant", "cosine", "linear"}},
      {PILOT_KEY(training, lr_warmup), .ilo = 0, .ihi = 1000000000},
      {PILOT_KEY(training, schedule_steps), .ilo = 0, .ihi = kBig},
      {PILOT_KEY(training, precision), .choices = {"fp32", "bf16", "fp16"}},
      {PILOT_KEY(training, activation_checkpointing)},
      {PILOT_KEY(training, fused_loss)},
      {PILOT_KEY(training, grad_clip), .dlo = 0, .dhi = 1e6},
      {PILOT_KEY(training, seed), .ilo = -1, .ihi = std::numeric_limits<int64_t>::max()},
      {PILOT_KEY(training, deterministic)},
      {PILOT_KEY(training, device), .choices = {"auto", "cpu", "cuda"}},
      {PILOT_KEY(training, precision_check_steps), .ilo = 0, .ihi = 1000},
      {PILOT_KEY(training, recompute_check_steps), .ilo = 0, .ihi = 1000},
      {PILOT_KEY(training, memory_calibration_steps), .ilo = 0, .ihi = 1000},
      {PILOT_KEY(training, memory_cap_mb), .ilo = 0, .ihi = 1 << 30},
      {PILOT_KEY(training, alloc_conf), .kind = StringKind::kAllocConf},
      // [checkpoint]
      {PILOT_KEY(checkpoint, dir), .kind = StringKind::kPath},
      {PILOT_KEY(checkpoint, at_step), .ilo = 0, .ihi = 1000000},
      {PILOT_KEY(checkpoint, format), .choices = {"safetensors"}},
      {PILOT_KEY(checkpoint, keep), .ilo = 1, .ihi = 1000},
      // [eval]
      {PILOT_KEY(eval, batches), .ilo = 1, .ihi = 100000},
      {PILOT_KEY(eval, restore_tolerance), .dlo = 0, .dhi = 1},
      // [parallel]
      {PILOT_KEY(parallel, mode), .choices = {"ddp", "sharded"}},
      {PILOT_KEY(parallel, launcher), .choices = {"auto", "srun", "local"}},
      {PILOT_KEY(parallel, nproc), .ilo = 0, .ihi = 1024},
      {PILOT_KEY(parallel, bucket_mb), .ilo = 1, .ihi = 4096},
      // [container]
      {PILOT_KEY(container, image), .kind = StringKind::kImage},
      {PILOT_KEY(container, runtime), .choices = {"none", "pyxis", "apptainer", "podman"}},
      {PILOT_KEY(container, mounts), .kind = StringKind::kMount, .may_be_empty = true},
      // [program]
      {PILOT_KEY(program, command), .argv = true},
      {PILOT_KEY(program, workdir), .kind = StringKind::kPath},
      {PILOT_KEY(program, env)},
      {PILOT_KEY(program, launcher), .choices = {"pilot", "none"}},
      {PILOT_KEY(program, step_timeout), .ilo = 1, .ihi = 86400},
      {PILOT_KEY(program, loss_pattern), .kind = StringKind::kRegex},
      {PILOT_KEY(program, pin), .kind = StringKind::kPinPath},
      {PILOT_KEY(program, hub_models), .kind = StringKind::kHubRef},
      {PILOT_KEY(program, hub_datasets), .kind = StringKind::kHubRef},
      // [hardware]
      {PILOT_KEY(hardware, candidates)},
  };
  return kSchema;
}

#undef PILOT_KEY

const std::vector<std::string>& SectionNames() {
  static const std::vector<std::string> kSections = [] {
    std::vector<std::string> out;
    for (const KeySpec& k : Schema()) {
      if (std::find(out.begin(), out.end(), k.section) == out.end()) out.push_back(k.section);
    }
    return out;
  }();
  return kSections;
}

const KeySpec* FindKey(std::string_view section, std::string_view key) {
  for (const KeySpec& k : Schema()) {
    if (section == k.section && key == k.key) return &k;
  }
  return nullptr;
}

std::vector<std::string> KeysOf(std::string_view section) {
  std::vector<std::string> out;
  for (const KeySpec& k : Schema()) {
    if (section == k.section) out.push_back(k.key);
  }
  return out;
}

const std::vector<std::string>& KeysKeptForAProgram() {
  static const std::vector<std::string> kept = {
      "training.steps",     "training.warmup_steps",  "training.seed",  "training.deterministic",
      "training.device",    "training.alloc_conf",    "checkpoint.at_step", "eval.restore_tolerance",
      "parallel.nproc",     "parallel.launcher"};
  return kept;
}

}  // namespace pilot::config_internal

namespace pilot {

const std::vector<std::string>& KnownConfigKeys() {
  static const std::vector<std::string> kKeys = [] {
    std::vector<std::string> out;
    for (const config_internal::KeySpec& k : config_internal::Schema()) out.push_back(k.Name());
    return out;
  }();
  return kKeys;
}
}  // namespace pilot
