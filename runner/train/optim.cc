// AdamW / SGD with named state, clipping, schedule, loss scaler.
#include "runner/train/optim.h"

#include <torch/version.h>

#include <cmath>
#include <optional>

namespace pilot::runner {
namespace {

#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1)
constexpr bool kHasFusedAdamW = true;
#else
constexpr bool kHasFusedAdamW = false;
#endif

bool Decayed(const at::Tensor& p) { return p.dim() >= 2; }

}  // namespace

Optimizer::Optimizer(const NamedTensors& params, const TrainingConfig& cfg, bool allow_fused)
    : params_(params), cfg_(cfg), kind_(cfg.optimizer) {
  fused_ = allow_fused && kHasFusedAdamW && kind_ == "adamw" && !params.empty() &&
           params[0].second.is_cuda();
}

std::vector<std::string> Optimizer::StateNames() const {
  if (kind_ == "sgd") return {"momentum"};
  return {"exp_avg", "exp_avg_sq"};
}

void Optimizer::EnsureState() {
  if (has_state()) return;
  slots_.assign(params_.size(), Slot{});
  for (size_t i = 0; i < params_.size(); ++i) {
    const at::Tensor& p = params_[i].second;
    slots_[i].a = at::zeros_like(p, at::MemoryFormat::Contiguous);
    if (kind_ == "adamw") slots_[i].b = at::zeros_like(p, at::MemoryFormat::Contiguous);
    if (fused_) {
      slots_[i].step_t = at::full({}, static_cast<double>(step_), p.options().dtype(at::kFloat));
    }
  }
}

at::Tensor& Optimizer::State(size_t i, const std::string& state) {
  EnsureState();
  if (state == "exp_avg" || state == "momentum") return slots_[i].a;
  return slots_[i].b;
}

void Optimizer::SetStep(int64_t step) {
  step_ = step;
  if (fused_ && has_state()) {
    for (auto& s : slots_) s.step_t.fill_(static_cast<double>(step));
  }
}

void Optimizer::Reset() {
  slots_.clear();
  step_ = 0;
}

void Optimizer::Step(double lr, const at::Tensor& grad_divisor) {
  c10::NoGradGuard no_grad;
  EnsureState();
  ++step_;
  if (grad_divisor.defined() && !fused_) {
    for (const auto& [name, p] : params_) {
      if (p.grad().defined()) p.grad().div_(grad_divisor);
    }
  }
  if (kind_ == "sgd") {
    for (size_t i = 0; i < params_.size(); ++i) {
      at::Tensor p = params_[i].second;
      at::Tensor g = p.grad();
      if (!g.defined()) continue;
      if (Decayed(p) && cfg_.weight_decay > 0) p.mul_(1.0 - lr * cfg_.weight_decay);
      at::Tensor& m = slots_[i].a;
      m.mul_(cfg_.momentum).add_(g);
      p.add_(m, -lr);
    }
    return;
  }
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1)
  if (fused_) {
    // Two launches (decayed and not decayed) over all tensors.
    for (int decay = 0; decay < 2; ++decay) {
      std::vector<at::Tensor> p, g, m, v, s;
      for (size_t i = 0; i < params_.size(); ++i) {
        const at::Tensor& t = params_[i].second;
        if (Decayed(t) != (decay == 1) || !t.grad().defined()) continue;
        p.push_back(t);
        g.push_back(t.grad());
        m.push_back(slots_[i].a);
        v.push_back(slots_[i].b);
        s.push_back(slots_[i].step_t);
      }
      if (p.empty()) continue;
      // The kernel reads the step counters; advancing them is the caller's
      // job (bias correction would divide by zero at step 0).
      at::_foreach_add_(s, 1.0);
      at::_fused_adamw_(p, g, m, v, /*max_exp_avg_sqs=*/{}, s, lr, cfg_.beta1, cfg_.beta2,
                        decay ? cfg_.weight_decay : 0.0, cfg_.eps, /*amsgrad=*/false,
                        /*maximize=*/false,
                        grad_divisor.defined() ? std::optional<at::Tensor>(grad_divisor)
                                               : std::nullopt);
    }
    return;
  }
#endif
  const double bc1 = 1.0 - std::pow(cfg_.beta1, static_cast<double>(step_));
  const double bc2 = 1.0 - std::pow(cfg_.beta2, static_cast<double>(step_));
  const double step_size = lr / bc1;
  const double bc2_sqrt = std::sqrt(bc2);
  for (size_t i = 0; i < params_.size(); ++i) {
    at::Tensor p = params_[i].second;
    at::Tensor g = p.grad();
    if (!g.defined()) continue;
    if (Decayed(p) && cfg_.weight_decay > 0) p.mul_(1.0 - lr * cfg_.weight_decay);
    at::Tensor& m = slots_[i].a;
    at::Tensor& v = slots_[i].b;
    m.lerp_(g, 1.0 - cfg_.beta1);
    v.mul_(cfg_.beta2).addcmul_(g, g, 1.0 - cfg_.beta2);
    at::Tensor denom = (v.sqrt() / bc2_sqrt).add_(cfg_.eps);
    p.addcdiv_(m, denom, -step_size);
  }
}

void ZeroGrad(const NamedTensors& params) {
  for (const auto& [name, p] : params) {
    // mutable_grad() on a const Tensor handle is how libtorch exposes it.
    const_cast<at::Tensor&>(p).mutable_grad().reset();
  }
}

at::Tensor GradNorm(const NamedTensors& params) {
  c10::NoGradGuard no_grad;
  std::vector<at::Tensor> grads;
  for (const auto& [name, p] : params) {
    if (p.grad().defined()) grads.push_back(p.grad());
  }
  if (grads.empty()) return at::zeros({}, at::kFloat);
  std::vector<at::Tensor> norms = at::_foreach_norm(grads, 2);
  return at::stack(norms).to(at::kFloat).norm(2);  // scalar, on the device
}

at::Tensor ClipDivisor(const at::Tensor& norm, double max_norm) {
  // No host round trip: the factor stays on the device.
  return ((norm + 1e-6) / max_norm).clamp_min(1.0);
}

double LearningRate(const TrainingConfig& cfg, int64_t step, int64_t horizon) {
  if (cfg.lr_warmup > 0 && step <= cfg.lr_warmup) {
    return cfg.lr * static_cast<double>(step) / cfg.lr_warmup;
  }
  if (cfg.lr_schedule == "constant" || horizon <= cfg.lr_warmup) return cfg.lr;
  double frac = static_cast<double>(step - cfg.lr_warmup) / static_cast<double>(horizon - cfg.lr_warmup);
  frac = std::min(1.0, std::max(0.0, frac));
  double mult = cfg.lr_schedule == "linear" ? 1.0 - frac : 0.5 * (1.0 + std::cos(M_PI * frac));
  return cfg.min_lr + (cfg.lr - cfg.min_lr) * mult;
}

bool GradScaler::Unscale(const NamedTensors& params) {
  c10::NoGradGuard no_grad;
  const double inv = 1.0 / scale;
  std::vector<at::Tensor> finite;
  for (const auto& [name, p] : params) {
    at::Tensor g = p.grad();
    if (!g.defined()) continue;
    g.mul_(inv);
    finite.push_back(at::isfinite(g).all());
  }
  if (finite.empty()) return true;
  return at::stack(finite).all().item<bool>();
}

void GradScaler::Update(bool finite) {
  if (!finite) {
    scale *= 0.5;
    growth_tracker = 0;
    ++skipped;
    return;
  }
  if (++growth_tracker >= interval) {
    scale *= 2.0;
    growth_tracker = 0;
  }
}

}  // namespace pilot::runner
