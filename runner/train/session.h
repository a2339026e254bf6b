// One training session: the config, the device, the model, its optimizer
// and data, and the step that drives them. Shared by the reference run, the
// resumed process, the checks, `verify` and the node stage's ranks. The
// step loop over a session is in runner/train/loop.h.
//
// A step, as the seed describes it:
//   zero_grad(set_to_none); for each micro-batch: forward loss, backward;
//   [fp16: unscale, skip on inf/NaN]; clip; optimizer step; schedule.
//
// Thread-safety: one thread per Session.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/config/config.h"
#include "core/records/results.h"
#include "core/base/status.h"
#include "runner/train/data.h"
#include "runner/train/device.h"
#include "runner/train/inputs.h"
#include "runner/train/model.h"
#include "runner/train/optim.h"

namespace pilot::runner {

struct StepResult {
  at::Tensor loss;      // float32 scalar on the device (not synchronised)
  at::Tensor grad_norm; // before clipping
  double data_wait_ms = 0;
  double lr = 0;
};

class Session {
 public:
  // Builds the model and optimizer (seeded), opens the data.
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
  Model& model() { return *model_; }
  const Model& model() const { return *model_; }
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
  std::unique_ptr<Model> model_;
  std::unique_ptr<Optimizer> optim_;
  std::shared_ptr<TokenSource> data_;
  GradScaler scaler_;
  std::string phase_ = "build";
  int64_t current_step_ = 0;
  int64_t data_shift_ = 0;
  double build_seconds_ = 0;
};

}  // namespace pilot::runner
