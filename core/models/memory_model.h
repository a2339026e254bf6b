// The memory model: splits what the pilot measured into its parts and
// predicts the peak device memory of other shapes, layouts and GPU types.
//
// Parts of the allocator peak (bytes per GPU):
//   parameters   params x 4 (fp32; bf16/fp16 runs keep fp32 master weights
//                and cast for compute, as the runner does)
//   gradients    params x 4 (gradients of the fp32 master weights)
//   optimizer    AdamW: params x 8 (two fp32 moments); SGD: params x 4
//                (momentum)
//   activations  bytes per token x tokens of the micro-batch (seq_len x
//                micro_batch), from one of three sources (`source`):
//                  "calibrated": two measured peaks at micro-batches a != b
//                    of the same seq_len (MemoryCalibration): slope per token
//                  "residual":   (allocated peak - the static parts above) /
//                    tokens of the measured step
//                  "analytic":   no device figures (a CPU pilot): the
//                    transformer estimate of saved activations per layer and
//                    token, (34 d + 5 h T) bytes at 16 bits (x2 in fp32)
//   workspace    reserved - allocated peak (allocator caching and
//                fragmentation), scaled with the allocated bytes
//   runtime      device used - reserved (CUDA/ROCm context, libraries),
//                taken as a constant per process
// Assumptions (stated in PredictPeak's `notes`):
//   - activations grow linearly in tokens. The attention score matrix
//     (B x heads x T x T per layer) is stored only when SDPA falls back to
//     the math kernel: on a CPU and for fp32 runs. For bf16/fp16 on a GPU
//     the flash / memory-efficient kernels keep attention linear in T.
//   - activation checkpointing, measured at two micro-batches (the pilot's
//     own setting, or the other one through the recompute check and
//     memory_calibration_other): each layer keeps its input (d_model fp32
//     values per token: the residual stream); backward recomputes one layer
//     at a time and allocates the gradients layer by layer. The peak is at
//     one end of backward: at its start every layer input and no layer's
//     gradient is live, at its end every gradient and one layer input. Per
//     token both hold the same working set (the line through the two
//     points); the start holds (layers - 1) x (4 d_model x tokens - one
//     layer's gradient bytes) more when that is positive, i.e. once a layer's
//     inputs outgrow its gradients (about 12 d_model tokens for a GPT block;
//     measured on an H200, bench/RESULTS.md). That term is taken out of the
//     measured points before the line is drawn and added to the prediction.
//   - checkpointing by rule (one point of the other setting, or none): each
//     layer keeps its input and the peak moves to the
//     start of backward, before any gradient is allocated, where the output
//     layer (logits in the compute precision and an fp32 copy for the
//     loss: 6 x vocab bytes per token, 8 x vocab in fp32; not
//     checkpointed) and its gradient (as much again) are live, or one
//     layer's recomputed activations if those are larger. The fused loss
//     (training.fused_loss) keeps one buffer, the logits and then in place
//     their gradient: 2 x vocab bytes per token, 4 x vocab in fp32. Measured on an
//     H200 (bench/RESULTS.md): -1.6% on the allocated peak at two
//     micro-batches.
//   - DDP adds one copy of the gradients in its communication buckets
//     (gradient_as_bucket_view = false, the PyTorch default).
//   - sharded (FSDP-like, full sharding) divides parameters, gradients and
//     optimizer state by G and adds one gathered layer (parameters and
//     gradients of the largest block, ~params / layers).
//   - the allocator workspace of every prediction is the pilot's own steady
//     step's fraction (reserved / allocated - 1): the checks' steps run after
//     the reference in the same process and reserve more than a run does.
// Fit rule: predicted device bytes <= (1 - memory_headroom) x GPU memory.
//
// Thread-safety: pure functions over plain values.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/config/config.h"
#include "core/records/hardware.h"
#include "core/models/memory_replay.h"
#include "core/records/policy.h"
#include "core/records/results.h"

namespace pilot {

// Two allocator peaks measured at the same seq_len and different
// micro-batches: the runner's steady step and its memory calibration steps
// at a smaller micro-batch (stages.single.memory_calibration), or two pilots
// (`pilot plan --calibrate`).
struct MemoryCalibration {
  int micro_batch_a = 0;
  int64_t peak_a = 0;  // allocated peak bytes at micro_batch_a
  int micro_batch_b = 0;
  int64_t peak_b = 0;
};

// The calibration the runner measured: the steady step's allocated peak and
// memory_calibration's, when that ran ("ok") at another micro-batch of the
// same seq_len and checkpointing setting with allocator peaks (a GPU).
// nullopt otherwise, with the reason in `why_not` (may be null).
std::optional<MemoryCalibration> CalibrationFrom(const SingleStage& s,
                                                 std::string* why_not = nullptr);

// What the model needs about the workload besides the measurements.
struct Workload {
  int64_t params = 0;
  int layers = 1;
  int d_model = 0;
  int heads = 1;
  int vocab = 0;
  // A gpt model's MLP width over d_model (model.ffn_mult; other kinds keep
  // 4): the analytic activations count 18 + 4 ffn_mult values of d_model
  // per token and layer, 34 at the default.
  double ffn_mult = 4.0;
  // Parameters of one layer (block): the parameters less the embeddings and
  // the final norm (and an untied output layer), over the layers; 0 when
  // the model is not known (a user's program).
  int64_t layer_params = 0;
  std::string precision = "bf16";   // "fp32" | "bf16" | "fp16"
  std::string optimizer = "adamw";  // "adamw" | "sgd"
  bool fused_loss = false;          // output layer and loss as one function
};

// Bytes per token the output layer holds more with the unfused loss than
// this workload measured (0 unless it ran the fused loss).
double UnfusedLossExtraBytesPerToken(const Workload& w);

// The workload from the results' shape and (when present) the config's
// [model]. Without a config, layers/d_model/heads stay unknown (1/0/1).
// What the single stage ran: a sharded run's stage at reduced depth has
// reduced_depth.layers layers (FullDepth gives the run's).
Workload WorkloadFrom(const SingleStage& s, const Config* cfg);

// Parameters of a builtin model outside its blocks: the token embedding,
// a GPT's positions (up to model.max_seq_len, else `seq_len`) with its head
// tied and its final LayerNorm, a Llama's untied output layer and final
// RMSNorm (any kind but "gpt" counts as a Llama).
int64_t NonLayerParameters(const ModelConfig& m, int seq_len);

// The run's workload when the single stage ran fewer layers: the config's
// layers and reduced_depth.full_params (else measured + the missing
// layers' parameters).
Workload FullDepth(const Workload& measured, const ReducedDepth& r);

struct MemoryBreakdown {
  // The measured shape.
  int seq_len = 0;
  int micro_batch = 0;
  bool activation_checkpointing = false;
  std::string device;  // "cuda" | "cpu"
  // Parts, bytes per GPU at the measured shape (single process).
  int64_t params_bytes = 0;
  int64_t grads_bytes = 0;
  int64_t optimizer_bytes = 0;
  double activation_bytes_per_token = 0;  // linear part, at the measured
                                          // checkpointing setting
  int64_t attention_bytes = 0;            // the T^2 term at the measured shape (0 when
                                          // flash/memory-efficient attention applies)
  int64_t activation_bytes = 0;           // all activations at the measured shape
  double workspace_fraction = 0;          // (reserved - allocated) / allocated
  int64_t workspace_bytes = 0;
  int64_t runtime_bytes = 0;  // device - reserved (or assumed, see notes)
  // "calibrated" only: allocated peak - slope x tokens - the static parts.
  // Negative when part of the static state is not live at the peak (e.g.
  // gradients freed by zero_grad(set_to_none) before the forward pass).
  int64_t calibration_offset_bytes = 0;
  int64_t measured_peak_bytes = 0;  // the largest device figure measured (0 on CPU)
  // The other activation-checkpointing setting at the measured shape, as the
  // runner's recompute check measured it (its allocated and reserved peaks,
  // cached blocks released first); nullopt without allocator figures.
  struct OtherSetting {
    bool activation_checkpointing = false;
    int64_t allocated_bytes = 0;   // at the measured micro-batch
    double workspace_fraction = 0; // the check's own (not used: see above)
    // memory_calibration_other: the same setting at a smaller micro-batch.
    int second_micro_batch = 0;    // 0 = not measured
    int64_t second_allocated_bytes = 0;
  };
  std::optional<OtherSetting> other_setting;
  std::string source;               // "calibrated" | "residual" | "analytic"
  std::vector<std::string> notes;
  int64_t StaticBytes() const { return params_bytes + grads_bytes + optimizer_bytes; }
};

// The breakdown measured at `from`'s depth, extended per layer to `to`'s:
// parameters, gradients and optimizer state in proportion to the
// parameters; without checkpointing each layer's activations once more per
// added layer (the output layer's stay); with it the per-token working set
// stays (one layer is recomputed at a time) and the layer inputs come
// through the checkpointed term at `to`'s depth. The recompute check's
// other setting is dropped (predicted by rule at full depth).
MemoryBreakdown ExtendDepth(const MemoryBreakdown& b, const Workload& from, const Workload& to);

// Runtime/context bytes assumed when none were measured (CPU pilot).
inline constexpr int64_t kAssumedRuntimeBytes = int64_t{1} << 30;
// Allocator workspace fraction assumed when none was measured.
inline constexpr double kAssumedWorkspaceFraction = 0.05;

// Splits the measured step. `calibration` is used when present and valid
// (different micro-batches, positive slope); otherwise the residual rule,
// or the analytic one without device figures.
MemoryBreakdown SplitMemory(const SingleStage& s, const Workload& w,
                            const std::optional<MemoryCalibration>& calibration);

// A shape and layout to predict.
struct MemoryQuery {
  int seq_len = 0;
  int micro_batch = 0;
  bool activation_checkpointing = false;
  std::string mode = "single";  // "single" | "ddp" | "sharded"
  int gpus = 1;                 // G: processes sharing the state (sharded)
};

struct MemoryPrediction {
  int64_t static_bytes = 0;  // params + grads + optimizer (+ DDP buckets / gathered block)
  int64_t activation_bytes = 0;
  int64_t workspace_bytes = 0;
  int64_t runtime_bytes = 0;
  int64_t total_bytes = 0;  // predicted device bytes per GPU
  // The breakdown's source, plus ", activation checkpointing on|off by rule"
  // when the query's setting differs from the measured one (that part is
  // the model's rule), "... from the recompute check" when the runner
  // measured that setting at one micro-batch (the rule's activations
  // shifted to match its allocated peak at the measured shape), or
  // "..., calibrated by the recompute check and memory_calibration_other"
  // with two.
  std::string basis;
  // Set when total_bytes comes from replaying the pilot's own allocator
  // requests at the query's shape (core/models/memory_replay.h): total_bytes is
  // then runtime_bytes plus the most any replayed process needed at full
  // speed, workspace_bytes what that is above the model's static and
  // activation bytes, and basis the replay's.
  std::optional<ReplayPrediction> replay;
};

MemoryPrediction PredictPeak(const MemoryBreakdown& b, const Workload& w, const MemoryQuery& q);

// The checkpointed layout's term above its line (see the header):
// (layers - 1) x max(0, 4 d_model x tokens - one layer's gradient bytes in
// the query's layout), bytes; 0 without checkpointing or an unknown model.
double CheckpointStartExtraBytes(const MemoryBreakdown& b, const Workload& w, const MemoryQuery& q);

// Makes `r` the prediction's total (see MemoryPrediction::replay).
void ApplyReplay(MemoryPrediction* p, const ReplayPrediction& r);

// Does `p` fit on `gpu` with policy headroom? Fills a HardwareFit-like view.
struct FitResult {
  bool fits = false;
  double headroom = 0;      // 1 - predicted / memory
  int64_t limit_bytes = 0;  // (1 - memory_headroom) x memory
  std::string note;         // "needs ROCm qualification: ..." etc.
};
// On a ROCm type the note names what must be qualified there: the
// program's native extensions, else stock operators only.
FitResult FitOn(const MemoryPrediction& p, const GpuType& gpu, const Policy& policy,
                const std::vector<std::string>& native_extensions = {});

// What a workload needs on ROCm beyond stock PyTorch operators. The builtin
// models use only stock operators, so the list is empty; the note still
// says the application must be qualified on ROCm.
std::string RocmNote(const std::vector<std::string>& custom_ops);

}  // namespace pilot
