// Optimizer, gradient clipping, learning-rate schedule and fp16 loss scaler.
//
// The optimizer is written here rather than taken from torch::optim so that
// its state has stable names for the checkpoint ("<param>.exp_avg") and so
// the fused AdamW kernel can be used where the libtorch version has it
// (torch >= 2.1 on CUDA). Both paths implement decoupled weight decay
// (AdamW) on parameters of two or more dimensions; norms and biases are not
// decayed.
//
// Thread-safety: single-threaded.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/config/config.h"
#include "runner/train/model.h"

namespace pilot::runner {

class Optimizer {
 public:
  // `params` must outlive the optimizer. `allow_fused` = false forces the
  // per-tensor path (used for the fp32 precision check and by tests).
  Optimizer(const NamedTensors& params, const TrainingConfig& cfg, bool allow_fused = true);

  // One update with learning rate `lr` from the parameters' .grad() divided
  // by `grad_divisor` (a float32 scalar on the device, e.g. the clipping
  // factor; undefined = 1). The fused kernel applies the division as it
  // reads the gradients, saving a pass over them. Creates the state tensors
  // on the first call (the lazily created state the first-step memory
  // measurement must include).
  void Step(double lr, const at::Tensor& grad_divisor = {});

  int64_t step() const { return step_; }
  bool fused() const { return fused_; }
  const std::string& kind() const { return kind_; }
  // State names per parameter: {"exp_avg", "exp_avg_sq"} or {"momentum"}.
  std::vector<std::string> StateNames() const;
  // The state tensor `state` of parameter i (created if missing).
  at::Tensor& State(size_t i, const std::string& state);
  bool has_state() const { return !slots_.empty() && slots_[0].a.defined(); }
  // Restores the step counter (after the state tensors were loaded).
  void SetStep(int64_t step);
  // Drops the state (as if never stepped); for the restore test switch.
  void Reset();

 private:
  struct Slot {
    at::Tensor a, b;      // exp_avg / exp_avg_sq, or momentum / unused
    at::Tensor step_t;    // fused kernel's float step counter (device)
  };
  void EnsureState();

  const NamedTensors& params_;
  TrainingConfig cfg_;
  std::string kind_;
  bool fused_ = false;
  int64_t step_ = 0;
  std::vector<Slot> slots_;
};

// Zeroes gradients the cheap way: sets them to undefined.
void ZeroGrad(const NamedTensors& params);

// Global L2 norm of the gradients (float32 scalar tensor, not synchronised).
at::Tensor GradNorm(const NamedTensors& params);
// The divisor that clips gradients of norm `norm` to at most `max_norm`:
// max(1, (norm + 1e-6) / max_norm), computed on the device.
at::Tensor ClipDivisor(const at::Tensor& norm, double max_norm);

// Learning rate at optimizer step `step` (1-based): linear warm-up over
// lr_warmup steps, then constant, cosine or linear decay to min_lr at
// `horizon` steps.
double LearningRate(const TrainingConfig& cfg, int64_t step, int64_t horizon);

// Dynamic loss scaling for fp16: multiply the loss by scale(), call
// Unscale() before clipping; a step whose gradients hold inf/NaN is skipped
// and the scale halves; after `interval` good steps it doubles.
struct GradScaler {
  double scale = 65536.0;
  int64_t growth_tracker = 0;
  int64_t interval = 2000;
  int64_t skipped = 0;
  // Divides the gradients by scale; returns true when all are finite.
  bool Unscale(const NamedTensors& params);
  void Update(bool finite);
};

}  // namespace pilot::runner
