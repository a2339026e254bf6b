// Session: the training step and eval.
#include "runner/train/session.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "runner/train/alloc_trace.h"
#include "runner/train/head_loss.h"

namespace pilot::runner {
namespace {

at::ScalarType ComputeDtype(const std::string& precision) {
  return precision == "bf16" ? at::kBFloat16 : precision == "fp16" ? at::kHalf : at::kFloat;
}

}  // namespace

Result<std::unique_ptr<Session>> Session::Create(const Config& cfg, const Pins& pins) {
  const auto t0 = std::chrono::steady_clock::now();
  std::unique_ptr<Session> s(new Session());
  s->cfg_ = cfg;
  TrainingConfig& t = s->cfg_.training;
  if (t.seq_len == 0) t.seq_len = cfg.run.seq_len;
  if (t.micro_batch == 0) t.micro_batch = cfg.run.micro_batch;
  PILOT_ASSIGN_OR_RETURN(s->dev_, ResolveDevice(t.device));
  StartAllocTrace(s->dev_);
  if (t.memory_cap_mb > 0) PILOT_RETURN_IF_ERROR(LimitDeviceMemory(s->dev_, int64_t{t.memory_cap_mb} << 20));
  if (t.precision == "fp16" && !s->dev_.is_cuda()) {
    return Status::Invalid("training.precision", "fp16 needs a CUDA device")
        .WithHint("use \"bf16\" or \"fp32\" on the CPU");
  }
  if (t.deterministic) at::globalContext().setDeterministicAlgorithms(true, /*warn_only=*/true);
  s->seed_ = pins.seed;
  s->horizon_ = t.schedule_steps > 0 ? t.schedule_steps : std::max<int64_t>(t.steps, 1);
  s->dtype_ = ComputeDtype(t.precision);
  PILOT_ASSIGN_OR_RETURN(s->model_, BuildModel(cfg.model, t.seq_len, s->seed_, s->dev_));
  s->model_->SetComputeDtype(s->dtype_);
  s->model_->SetActivationCheckpointing(t.activation_checkpointing);
  s->model_->SetFusedLoss(t.fused_loss);
  s->optim_ = std::make_unique<Optimizer>(s->model_->Parameters(), t);
  PILOT_ASSIGN_OR_RETURN(s->data_, TokenSource::Open(cfg.data, cfg.model.vocab, t.seq_len, t.micro_batch,
                                                     s->seed_, /*rank=*/0, pins.train_sha256,
                                                     pins.eval_sha256));
  Synchronize(s->dev_);
  s->build_seconds_ = SecondsSince(t0);
  s->phase_ = "forward";
  return s;
}

void Session::SetComputeDtype(at::ScalarType t) {
  dtype_ = t;
  model_->SetComputeDtype(t);
}

int64_t Session::tokens_per_step() const {
  return static_cast<int64_t>(cfg_.training.seq_len) * cfg_.training.micro_batch *
         std::max(1, cfg_.run.grad_accum);
}

ShapeInfo Session::Shape() const {
  ShapeInfo sh;
  sh.model_kind = model_->Kind();
  sh.params = CountParameters(*model_);
  sh.seq_len = cfg_.training.seq_len;
  sh.micro_batch = cfg_.training.micro_batch;
  sh.grad_accum = std::max(1, cfg_.run.grad_accum);
  sh.binding = cfg_.training.seq_len == cfg_.run.seq_len && cfg_.training.micro_batch == cfg_.run.micro_batch;
  sh.tokens_per_step = tokens_per_step();
  sh.precision = cfg_.training.precision;
  sh.activation_checkpointing = cfg_.training.activation_checkpointing;
  sh.fused_loss =
      cfg_.training.fused_loss && FusedHeadLossSupports(ComputeDtype(cfg_.training.precision));
  sh.optimizer = optim_->kind();
  sh.fused_optimizer = optim_->fused();
  sh.optimizer_state_included = true;
  return sh;
}

std::unique_ptr<Loader> Session::MakeLoader(int64_t first_step, int64_t last_step) {
  const int64_t accum = std::max(1, cfg_.run.grad_accum);
  return std::make_unique<Loader>(data_, (first_step - 1) * accum + data_shift_,
                                  last_step * accum + data_shift_,
                                  cfg_.data.loader_threads, cfg_.data.prefetch, dev_);
}

Result<StepResult> Session::Step(Loader& loader, int64_t step, StepTimer* timer) {
  const NamedTensors& params = model_->Parameters();
  const int accum = std::max(1, cfg_.run.grad_accum);
  const bool fp16 = dtype_ == at::kHalf;
  StepResult out;
  current_step_ = step;
  phase_ = "forward";
  NoteAllocTrace("step " + std::to_string(step) + " checkpointing " +
                 std::to_string(model_->ActivationCheckpointing() ? 1 : 0));
  MarkAllocRecording(AllocOp::kStep);
  ZeroGrad(params);
  if (timer) timer->Mark(0);
  at::Tensor loss_sum;
  for (int m = 0; m < accum; ++m) {
    double wait = 0;
    phase_ = "data";
    PILOT_ASSIGN_OR_RETURN(Batch b, loader.Next(&wait));
    out.data_wait_ms += wait;
    phase_ = "forward";
    MarkAllocRecording(AllocOp::kForward);
    at::Tensor loss = model_->Loss(b.x, b.y);  // () float32
    at::Tensor scaled = accum > 1 ? loss / static_cast<double>(accum) : loss;
    if (fp16) scaled = scaled * scaler_.scale;
    phase_ = "backward";
    MarkAllocRecording(AllocOp::kBackward);
    scaled.backward();
    at::Tensor l = loss.detach();
    loss_sum = loss_sum.defined() ? loss_sum + l : l;
  }
  if (timer) timer->Mark(1);
  phase_ = "optimizer";
  MarkAllocRecording(AllocOp::kOptimizer);
  bool finite = true;
  if (fp16) finite = scaler_.Unscale(params);
  out.grad_norm = GradNorm(params);
  at::Tensor divisor;
  if (cfg_.training.grad_clip > 0) divisor = ClipDivisor(out.grad_norm, cfg_.training.grad_clip);
  out.lr = LearningRate(cfg_.training, step, horizon_);
  if (finite) optim_->Step(out.lr, divisor);
  if (fp16) scaler_.Update(finite);
  if (timer) timer->Mark(2);
  out.loss = accum > 1 ? loss_sum / static_cast<double>(accum) : loss_sum;
  return out;
}

Result<double> Session::Eval() {
  c10::NoGradGuard no_grad;
  phase_ = "eval";
  double sum = 0;
  const int n = std::max(1, cfg_.eval.batches);
  for (int i = 0; i < n; ++i) {
    PILOT_ASSIGN_OR_RETURN(Batch b, data_->Eval(i, dev_.is_cuda()));
    at::Tensor x = b.x.to(dev_), y = b.y.to(dev_);
    sum += model_->Loss(x, y).item<double>();
  }
  return sum / n;
}
}  // namespace pilot::runner
