#include "core/models/memory_model.h"

#include <algorithm>
#include <cmath>

namespace pilot {
namespace {

// Output-layer bytes per token: the logits in the compute precision and
// their fp32 copy for the loss (6 x vocab; fp32: 8 x vocab), or with the
// fused loss the one buffer that holds the logits and then their gradient
// (2 x vocab; fp32: 4 x vocab). Not split by layer, so activation
// checkpointing leaves them as they are.
double LogitsBytesPerToken(const Workload& w) {
  if (w.fused_loss && w.precision != "fp16") {
    return (w.precision == "fp32" ? 4.0 : 2.0) * static_cast<double>(w.vocab);
  }
  return (w.precision == "fp32" ? 8.0 : 6.0) * static_cast<double>(w.vocab);
}

// Bytes of one activation element in the compute precision.
double ComputeBytes(const std::string& precision) { return precision == "fp32" ? 4.0 : 2.0; }

// SDPA keeps the T x T score matrix only on its math path.
bool MathAttention(const std::string& device, const std::string& precision) {
  return device == "cpu" || precision == "fp32";
}

// Scores and probabilities of every stored layer: 2 x B x heads x T^2.
double AttentionBytes(const Workload& w, int micro_batch, int seq_len, int stored_layers) {
  return 2.0 * stored_layers * micro_batch * static_cast<double>(std::max(1, w.heads)) *
         static_cast<double>(seq_len) * seq_len * ComputeBytes(w.precision);
}

std::optional<int64_t> Largest(const SingleStage& s, std::optional<int64_t> MemoryStats::*f) {
  std::optional<int64_t> out;
  auto take = [&](const MemoryStats& m) {
    const auto& v = m.*f;
    if (v && *v > 0 && (!out || *v > *out)) out = v;
  };
  take(s.memory);
  take(s.memory_first_step);
  if (s.memory_resumed) take(*s.memory_resumed);
  return out;
}

int64_t Bytes(double v) { return v <= 0 ? 0 : static_cast<int64_t>(std::llround(v)); }

// The checkpointed start-of-backward term at one micro-batch of the
// measured seq_len, one process.
double ExtraAt(const MemoryBreakdown& b, const Workload& w, bool checkpointing, int micro_batch) {
  MemoryQuery q;
  q.seq_len = b.seq_len;
  q.micro_batch = micro_batch;
  q.activation_checkpointing = checkpointing;
  return CheckpointStartExtraBytes(b, w, q);
}

// The line through two allocated peaks of one setting, at the measured
// seq_len (the checkpointed term taken out first): activations at the
// measured micro-batch and the offset of the static parts. False when the
// two do not make a rising line.
bool ApplyLine(MemoryBreakdown* b, const Workload& w, bool checkpointing, int mb_a, int64_t peak_a,
               int mb_b, int64_t peak_b) {
  if (mb_a == mb_b || mb_a <= 0 || mb_b <= 0 || peak_a <= 0 || peak_b <= 0) return false;
  const double ya = static_cast<double>(peak_a) - ExtraAt(*b, w, checkpointing, mb_a);
  const double yb = static_cast<double>(peak_b) - ExtraAt(*b, w, checkpointing, mb_b);
  const double slope = (ya - yb) / static_cast<double>(mb_a - mb_b);
  if (slope <= 0) return false;
  b->activation_bytes = Bytes(slope * b->micro_batch);
  b->calibration_offset_bytes = static_cast<int64_t>(
      std::llround(ya - slope * mb_a - static_cast<double>(b->StaticBytes())));
  return true;
}

}  // namespace

double CheckpointStartExtraBytes(const MemoryBreakdown& b, const Workload& w, const MemoryQuery& q) {
  if (!q.activation_checkpointing || w.layers < 2 || w.d_model <= 0 || w.layer_params <= 0 ||
      w.params <= 0) {
    return 0;
  }
  double layer_grads = static_cast<double>(b.grads_bytes) / static_cast<double>(w.params) *
                       static_cast<double>(w.layer_params);
  if (q.mode == "sharded" && q.gpus > 1) layer_grads /= q.gpus;
  const double inputs = 4.0 * w.d_model * static_cast<double>(q.seq_len) * q.micro_batch;
  return (w.layers - 1) * std::max(0.0, inputs - layer_grads);
}

double UnfusedLossExtraBytesPerToken(const Workload& w) {
  Workload unfused = w;
  unfused.fused_loss = false;
  return LogitsBytesPerToken(unfused) - LogitsBytesPerToken(w);
}

std::optional<MemoryCalibration> CalibrationFrom(const SingleStage& s, std::string* why_not) {
  auto no = [&](std::string why) -> std::optional<MemoryCalibration> {
    if (why_not != nullptr) *why_not = std::move(why);
    return std::nullopt;
  };
  if (!s.memory_calibration) return no("no memory calibration in the results");
  const MemoryCalibrationCheck& c = *s.memory_calibration;
  if (c.status != "ok") {
    return no("memory calibration " + c.status + (c.detail.empty() ? "" : ": " + c.detail));
  }
  if (!c.peak_allocated_bytes || !s.memory.peak_allocated_bytes) {
    return no("memory calibration without allocator peaks (" + s.device + ")");
  }
  if (c.micro_batch <= 0 || c.micro_batch == s.shape.micro_batch || c.seq_len != s.shape.seq_len ||
      c.activation_checkpointing != s.shape.activation_checkpointing) {
    return no("memory calibration not at another micro-batch of the same shape");
  }
  if (why_not != nullptr) why_not->clear();
  return MemoryCalibration{s.shape.micro_batch, *s.memory.peak_allocated_bytes, c.micro_batch,
                           *c.peak_allocated_bytes};
}

Workload WorkloadFrom(const SingleStage& s, const Config* cfg) {
  Workload w;
  w.params = s.shape.params;
  w.precision = s.shape.precision.empty() ? "fp32" : s.shape.precision;
  w.optimizer = s.shape.optimizer.empty() ? "adamw" : s.shape.optimizer;
  w.fused_loss = s.shape.fused_loss.value_or(false);
  // A user's program: [model] does not describe it; only the parameter
  // count it reported is known (6N FLOPs per token).
  if (cfg != nullptr && cfg->IsProgram()) {
    if (s.shape.precision.empty()) w.precision = "fp32";
    return w;
  }
  if (cfg != nullptr) {
    w.layers = std::max(1, cfg->model.layers);
    w.d_model = cfg->model.d_model;
    w.heads = std::max(1, cfg->model.heads);
    w.vocab = cfg->model.vocab;
    if (cfg->model.kind == "gpt") w.ffn_mult = cfg->model.ffn_mult;
    if (s.shape.precision.empty()) w.precision = cfg->training.precision;
    const int64_t outside = NonLayerParameters(cfg->model, s.shape.seq_len);
    if (s.reduced_depth && s.reduced_depth->layers >= 1) w.layers = s.reduced_depth->layers;
    if (w.params > outside) w.layer_params = (w.params - outside) / w.layers;
  }
  return w;
}

int64_t NonLayerParameters(const ModelConfig& m, int seq_len) {
  const int64_t d = m.d_model, v = m.vocab;
  if (m.kind == "gpt") {
    // Token and position embeddings (the head tied to the first), ln_f.
    const int64_t max_t = m.max_seq_len > 0 ? m.max_seq_len : seq_len;
    return v * d + max_t * d + 2 * d;
  }
  // Token embedding, the untied output layer, the final RMSNorm.
  return 2 * v * d + d;
}

Workload FullDepth(const Workload& measured, const ReducedDepth& r) {
  Workload w = measured;
  w.layers = std::max(1, r.full_layers);
  w.params = r.full_params > 0 ? r.full_params
                               : measured.params + (w.layers - measured.layers) * measured.layer_params;
  return w;
}

MemoryBreakdown ExtendDepth(const MemoryBreakdown& b, const Workload& from, const Workload& to) {
  MemoryBreakdown e = b;
  if (from.params <= 0 || from.layers <= 0) return e;
  const double p = static_cast<double>(to.params) / static_cast<double>(from.params);
  e.params_bytes = Bytes(p * static_cast<double>(b.params_bytes));
  e.grads_bytes = Bytes(p * static_cast<double>(b.grads_bytes));
  e.optimizer_bytes = Bytes(p * static_cast<double>(b.optimizer_bytes));
  const double l = static_cast<double>(to.layers) / from.layers;
  if (!b.activation_checkpointing) {
    const double logits = std::min(b.activation_bytes_per_token, LogitsBytesPerToken(from));
    e.activation_bytes_per_token = logits + (b.activation_bytes_per_token - logits) * l;
    e.attention_bytes = Bytes(l * static_cast<double>(b.attention_bytes));
    // Below the full state: the weights' compute-precision copies the
    // layers keep for backward, which grow with the parameters.
    e.calibration_offset_bytes = static_cast<int64_t>(std::llround(p * static_cast<double>(b.calibration_offset_bytes)));
  }
  const double tokens = std::max(1.0, static_cast<double>(b.seq_len) * b.micro_batch);
  e.activation_bytes = Bytes(e.activation_bytes_per_token * tokens + static_cast<double>(e.attention_bytes));
  e.workspace_bytes = Bytes(b.workspace_fraction * static_cast<double>(e.StaticBytes() + e.activation_bytes));
  e.other_setting.reset();
  e.notes.push_back("measured at " + std::to_string(from.layers) + " of " + std::to_string(to.layers) +
                    " layers, extended per layer to " + std::to_string(to.layers));
  return e;
}

MemoryBreakdown SplitMemory(const SingleStage& s, const Workload& w,
                            const std::optional<MemoryCalibration>& cal) {
  MemoryBreakdown b;
  b.seq_len = s.shape.seq_len;
  b.micro_batch = s.shape.micro_batch;
  b.activation_checkpointing = s.shape.activation_checkpointing;
  b.device = s.device;
  const double n = static_cast<double>(w.params);
  b.params_bytes = Bytes(4 * n);
  b.grads_bytes = Bytes(4 * n);
  b.optimizer_bytes = Bytes((w.optimizer == "sgd" ? 4 : 8) * n);
  const ShapeInfo& sh = s.shape;
  if (sh.param_bytes && sh.optimizer_state_bytes) {
    // A program's probe counted its tensors: no assumption about dtypes.
    b.params_bytes = *sh.param_bytes;
    b.grads_bytes = sh.grad_bytes.value_or(*sh.param_bytes);
    b.optimizer_bytes = *sh.optimizer_state_bytes;
    b.notes.push_back("parameters, gradients and optimizer state as the program's probe counted them");
  } else if (w.precision != "fp32") {
    b.notes.push_back(w.precision + " compute with fp32 master weights, gradients and moments");
  }

  const double tokens = std::max(1.0, static_cast<double>(b.seq_len) * b.micro_batch);
  const int stored_layers = b.activation_checkpointing ? 1 : w.layers;
  // The T^2 term needs the model's shape; a program's is not known.
  const double attn_measured = w.d_model > 0 && MathAttention(s.device, w.precision)
                                   ? AttentionBytes(w, b.micro_batch, b.seq_len, stored_layers)
                                   : 0.0;
  std::optional<int64_t> alloc = Largest(s, &MemoryStats::peak_allocated_bytes);
  std::optional<int64_t> reserved = Largest(s, &MemoryStats::peak_reserved_bytes);
  std::optional<int64_t> device = Largest(s, &MemoryStats::device_used_bytes);
  b.measured_peak_bytes = std::max({alloc.value_or(0), reserved.value_or(0), device.value_or(0)});

  double activations = -1;
  if (cal && ApplyLine(&b, w, b.activation_checkpointing, cal->micro_batch_a, cal->peak_a,
                       cal->micro_batch_b, cal->peak_b)) {
    b.source = "calibrated";
    activations = static_cast<double>(b.activation_bytes);
    b.notes.push_back("activations from two micro-batches (" + std::to_string(cal->micro_batch_a) +
                      " and " + std::to_string(cal->micro_batch_b) + ")");
  }
  if (activations < 0 && alloc) {
    b.source = "residual";
    activations = static_cast<double>(*alloc) - static_cast<double>(b.StaticBytes()) -
                  ExtraAt(b, w, b.activation_checkpointing, b.micro_batch);
    b.notes.push_back("activations = allocated peak - parameters, gradients and optimizer state");
    if (activations < 0) {
      activations = 0;
      b.notes.push_back("the allocated peak is below the static parts: activations taken as 0");
    }
  }
  if (activations < 0) {
    b.source = "analytic";
    // Saved activations of a transformer layer, per token, at 16 bits:
    // (18 + 4 ffn_mult) d, 34 d with the usual 4x MLP (+ 5 heads T on the
    // math attention path, counted separately), plus fp32 logits and their
    // gradient.
    const double eb = ComputeBytes(w.precision) / 2.0;
    const double layer = (18.0 + 4.0 * w.ffn_mult) * w.d_model * eb;
    double per_token = b.activation_checkpointing ? w.layers * 2.0 * w.d_model * eb + layer
                                                  : w.layers * layer;
    per_token += LogitsBytesPerToken(w);
    activations = per_token * tokens + attn_measured;
    b.notes.push_back("no device memory measured: activations estimated analytically");
    if (w.d_model == 0) b.notes.push_back("model size unknown: activations taken as 0");
  }
  b.attention_bytes = Bytes(std::min(attn_measured, activations));
  b.activation_bytes = Bytes(activations);
  b.activation_bytes_per_token =
      std::max(0.0, (activations - static_cast<double>(b.attention_bytes)) / tokens);

  if (alloc && reserved && *reserved >= *alloc) {
    b.workspace_bytes = *reserved - *alloc;
    b.workspace_fraction = static_cast<double>(b.workspace_bytes) / static_cast<double>(*alloc);
  } else {
    b.workspace_fraction = kAssumedWorkspaceFraction;
    b.workspace_bytes = Bytes(kAssumedWorkspaceFraction *
                              static_cast<double>(b.StaticBytes() + b.activation_bytes));
    b.notes.push_back("allocator workspace assumed 5% (not measured)");
  }
  const RecomputeCheck& rc = s.recompute_check;
  const int64_t* other_alloc = nullptr;
  if (rc.ran && rc.measured) {
    const auto& peak = *rc.measured == "with" ? rc.peak_bytes_with : rc.peak_bytes_without;
    if (peak && *peak > 0) other_alloc = &*peak;
  }
  if (s.device == "cuda" && other_alloc && rc.peak_reserved_bytes && *rc.peak_reserved_bytes >= *other_alloc) {
    b.other_setting = MemoryBreakdown::OtherSetting{
        *rc.measured == "with", *other_alloc,
        static_cast<double>(*rc.peak_reserved_bytes - *other_alloc) / static_cast<double>(*other_alloc)};
    if (const auto& c = s.memory_calibration_other;
        c && c->status == "ok" && c->peak_allocated_bytes && *c->peak_allocated_bytes > 0 &&
        c->seq_len == b.seq_len && c->micro_batch > 0 && c->micro_batch != b.micro_batch &&
        c->activation_checkpointing == b.other_setting->activation_checkpointing) {
      b.other_setting->second_micro_batch = c->micro_batch;
      b.other_setting->second_allocated_bytes = *c->peak_allocated_bytes;
    }
  }
  if (device && reserved && *device >= *reserved) {
    b.runtime_bytes = *device - *reserved;
  } else {
    b.runtime_bytes = kAssumedRuntimeBytes;
    b.notes.push_back("runtime/context overhead assumed 1 GiB (not measured)");
  }
  return b;
}

MemoryPrediction PredictPeak(const MemoryBreakdown& b, const Workload& w, const MemoryQuery& q) {
  const bool other_measured = q.activation_checkpointing != b.activation_checkpointing &&
                              b.other_setting &&
                              b.other_setting->activation_checkpointing == q.activation_checkpointing;
  if (other_measured && b.other_setting->second_micro_batch > 0) {
    // Two points of the other setting: its own line, as if the pilot had
    // run that way (the workspace stays the pilot's).
    MemoryBreakdown other = b;
    other.other_setting.reset();
    other.activation_checkpointing = q.activation_checkpointing;
    if (ApplyLine(&other, w, q.activation_checkpointing, b.micro_batch,
                  b.other_setting->allocated_bytes, b.other_setting->second_micro_batch,
                  b.other_setting->second_allocated_bytes)) {
      const double tokens = std::max(1.0, static_cast<double>(b.seq_len) * b.micro_batch);
      const double attn =
          w.d_model > 0 && MathAttention(b.device, w.precision)
              ? AttentionBytes(w, b.micro_batch, b.seq_len, q.activation_checkpointing ? 1 : w.layers)
              : 0.0;
      other.attention_bytes = Bytes(std::min(attn, static_cast<double>(other.activation_bytes)));
      other.activation_bytes_per_token = std::max(
          0.0, static_cast<double>(other.activation_bytes - other.attention_bytes) / tokens);
      MemoryPrediction p = PredictPeak(other, w, q);
      p.basis = b.source + ", activation checkpointing " + (q.activation_checkpointing ? "on" : "off") +
                " calibrated by the recompute check and memory_calibration_other";
      return p;
    }
  }
  if (other_measured) {
    // The rule, anchored: at the measured shape it must give the allocated
    // peak the recompute check measured; the workspace is the pilot's.
    MemoryBreakdown rule = b;
    rule.other_setting.reset();
    MemoryQuery at_measured;
    at_measured.seq_len = b.seq_len;
    at_measured.micro_batch = b.micro_batch;
    at_measured.activation_checkpointing = q.activation_checkpointing;
    const MemoryPrediction ref = PredictPeak(rule, w, at_measured);
    const int64_t shift = b.other_setting->allocated_bytes - (ref.static_bytes + ref.activation_bytes);
    MemoryPrediction p = PredictPeak(rule, w, q);
    p.activation_bytes = std::max<int64_t>(0, p.activation_bytes + shift);
    p.workspace_bytes =
        Bytes(b.workspace_fraction * static_cast<double>(p.static_bytes + p.activation_bytes));
    p.total_bytes = p.static_bytes + p.activation_bytes + p.workspace_bytes + p.runtime_bytes;
    p.basis = b.source + ", activation checkpointing " + (q.activation_checkpointing ? "on" : "off") +
              " from the recompute check";
    return p;
  }
  MemoryPrediction p;
  const int layers = std::max(1, w.layers);
  const double eb = ComputeBytes(w.precision);
  // The layers' part changes with checkpointing, the output layer's not.
  const double logits = std::min(b.activation_bytes_per_token, LogitsBytesPerToken(w));
  double per_layer = b.activation_bytes_per_token - logits;
  // Checkpointing switched on by rule: each block keeps only its input, the
  // residual stream, which stays in float32. The peak moves to the start of
  // backward, before any gradient exists: the logits and their gradient
  // (another compute-precision and fp32 copy) are live then, or one
  // block's recomputed activations, whichever is larger.
  const bool ckpt_by_rule = q.activation_checkpointing && !b.activation_checkpointing;
  if (ckpt_by_rule) {
    per_layer = std::min(per_layer, layers * w.d_model * 4.0 + std::max(per_layer / layers, logits));
  } else if (!q.activation_checkpointing && b.activation_checkpointing) {
    per_layer = std::max(per_layer, (per_layer - layers * w.d_model * eb) * layers);
  }
  p.basis = b.source;
  if (q.activation_checkpointing != b.activation_checkpointing) {
    p.basis += std::string(", activation checkpointing ") +
               (q.activation_checkpointing ? "on" : "off") + " by rule";
  }
  const double per_token = per_layer + logits;
  const double tokens = static_cast<double>(q.seq_len) * q.micro_batch;
  double attention = 0;
  if (w.precision == "fp32") {  // math SDPA path on the GPU as well
    attention =
        AttentionBytes(w, q.micro_batch, q.seq_len, q.activation_checkpointing ? 1 : layers);
  }
  p.activation_bytes = Bytes(per_token * tokens + attention +
                             (q.activation_checkpointing && b.activation_checkpointing
                                  ? CheckpointStartExtraBytes(b, w, q)
                                  : 0.0));

  // At the checkpointed peak no gradient is allocated yet (zero_grad frees
  // them); the measured offset belongs to the other peak.
  const double state = static_cast<double>(b.StaticBytes() - (ckpt_by_rule ? b.grads_bytes : 0));
  const int g = std::max(1, q.gpus);
  if (q.mode == "sharded" && g > 1) {
    const double gathered = static_cast<double>(b.params_bytes + b.grads_bytes) / layers;
    p.static_bytes = Bytes(state / g + gathered);
  } else if (q.mode == "ddp" && g > 1) {
    p.static_bytes = Bytes(state + static_cast<double>(b.grads_bytes));  // bucket copy
  } else {
    p.static_bytes = Bytes(state);
  }
  if (b.calibration_offset_bytes != 0 && b.StaticBytes() > 0 && !ckpt_by_rule) {
    // The measured offset, in proportion to the state this layout keeps.
    const double share = static_cast<double>(p.static_bytes) / state;
    p.static_bytes = std::max<int64_t>(
        0, p.static_bytes + static_cast<int64_t>(std::llround(b.calibration_offset_bytes * share)));
  }
  p.workspace_bytes =
      Bytes(b.workspace_fraction * static_cast<double>(p.static_bytes + p.activation_bytes));
  p.runtime_bytes = b.runtime_bytes;
  p.total_bytes = p.static_bytes + p.activation_bytes + p.workspace_bytes + p.runtime_bytes;
  return p;
}

void ApplyReplay(MemoryPrediction* p, const ReplayPrediction& r) {
  p->replay = r;
  p->total_bytes = p->runtime_bytes + r.most.at_full_speed;
  p->workspace_bytes = std::max<int64_t>(0, r.most.at_full_speed - p->static_bytes - p->activation_bytes);
  p->basis = r.basis;
}

FitResult FitOn(const MemoryPrediction& p, const GpuType& gpu, const Policy& policy,
                const std::vector<std::string>& native_extensions) {
  FitResult f;
  const double mem = static_cast<double>(gpu.memory_bytes);
  f.limit_bytes = Bytes((1.0 - policy.thresholds.memory_headroom) * mem);
  f.headroom = mem > 0 ? 1.0 - static_cast<double>(p.total_bytes) / mem : -1;
  f.fits = mem > 0 && p.total_bytes <= f.limit_bytes;
  std::vector<std::string> notes;
  if (gpu.stack == "rocm") notes.push_back(RocmNote(native_extensions));
  if (!f.fits) notes.push_back("does not fit with the required headroom");
  for (size_t i = 0; i < notes.size(); ++i) f.note += (i ? "; " : "") + notes[i];
  return f;
}

std::string RocmNote(const std::vector<std::string>& custom_ops) {
  std::string needs = "stock PyTorch operators only";
  if (!custom_ops.empty()) {
    needs = "with PyTorch, these native extensions the program loaded: ";
    for (size_t i = 0; i < custom_ops.size(); ++i) needs += (i ? ", " : "") + custom_ops[i];
  }
  return "needs ROCm qualification (" + needs + ")";
}

}  // namespace pilot
