#include "runner/train/head_loss.h"

#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>

#ifdef PILOT_RUNNER_CUDA
#include <cuda_runtime_api.h>
#endif
#ifdef PILOT_RUNNER_CUDA_KERNELS
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "runner/train/head_loss_kernel.h"
#endif

namespace pilot::runner {
namespace {

// Rows of float32 log-probabilities the ATen path holds at a time.
constexpr int64_t kChunkBytes = int64_t{64} << 20;

// logits (N, V) -> per-row loss (N) float32; logits become, in place, the
// gradient of mean(loss) with respect to them.
at::Tensor SoftmaxGradInPlace(at::Tensor& logits, const at::Tensor& targets) {
  const int64_t n = logits.size(0), v = logits.size(1);
  const double scale = 1.0 / static_cast<double>(std::max<int64_t>(n, 1));
  at::Tensor row_loss = at::empty({n}, logits.options().dtype(at::kFloat));
#ifdef PILOT_RUNNER_CUDA_KERNELS
  if (logits.is_cuda()) {
    const c10::cuda::CUDAGuard guard(logits.device());
    const at::Tensor t = targets.to(at::kLong).contiguous();
    const int rc = LaunchHeadLossKernel(
        logits.scalar_type() == at::kBFloat16 ? HeadLossDtype::kBFloat16 : HeadLossDtype::kFloat32,
        logits.data_ptr(), t.data_ptr<int64_t>(), row_loss.data_ptr<float>(), n, v,
        static_cast<float>(scale), c10::cuda::getCurrentCUDAStream(logits.device().index()).stream());
    TORCH_CHECK(rc == 0, "fused loss kernel: ", HeadLossKernelError(rc));
    return row_loss;
  }
#endif
  const int64_t rows = std::max<int64_t>(1, kChunkBytes / std::max<int64_t>(1, v * 4));
  for (int64_t r0 = 0; r0 < n; r0 += rows) {
    const int64_t k = std::min(rows, n - r0);
    at::Tensor part = logits.narrow(0, r0, k);
    at::Tensor t = targets.narrow(0, r0, k).unsqueeze(1);
    at::Tensor lp = at::log_softmax(part, 1, at::kFloat);  // (k, V) float32
    row_loss.narrow(0, r0, k).copy_(lp.gather(1, t).squeeze(1).neg());
    lp.exp_().scatter_add_(1, t, at::full({k, 1}, -1.0, lp.options()));
    part.copy_(lp.mul_(scale));
  }
  return row_loss;
}

struct HeadLossFunction : public torch::autograd::Function<HeadLossFunction> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                            const at::Tensor& w, const at::Tensor& targets) {
    TORCH_CHECK(x.dim() == 2 && w.dim() == 2 && x.size(1) == w.size(1) && targets.dim() == 1 &&
                    targets.size(0) == x.size(0),
                "fused loss: shapes x ", x.sizes(), ", w ", w.sizes(), ", targets ", targets.sizes());
    TORCH_CHECK(FusedHeadLossSupports(x.scalar_type()), "fused loss: compute dtype ", x.scalar_type(),
                " (bfloat16 or float32 only)");
    at::Tensor wc = w.to(x.scalar_type());
    at::Tensor g = at::mm(x, wc.t());  // (N, V): logits, then their gradient
    at::Tensor loss = SoftmaxGradInPlace(g, targets).mean();
    ctx->save_for_backward({x});
    ctx->saved_data["wc"] = wc;
    ctx->saved_data["g"] = g;
    return loss;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_out) {
    const at::Tensor& go = grad_out[0];  // float32 scalar
    const at::Tensor x = ctx->get_saved_variables()[0];
    const at::Tensor wc = ctx->saved_data["wc"].toTensor();
    const at::Tensor g = ctx->saved_data["g"].toTensor();
    at::Tensor gx, gw;
#ifdef PILOT_RUNNER_CUDA
    // Autograd's device thread runs this first in backward, before any
    // kernel launch there has made the device's context current; cuBLAS
    // would warn and set it. Setting the device makes it current.
    if (g.is_cuda()) (void)cudaSetDevice(g.get_device());
#endif
    if (ctx->needs_input_grad(0)) gx = at::mm(g, wc).mul_(go);  // (N, C), x's dtype
    if (ctx->needs_input_grad(1)) gw = at::mm(g.t(), x).to(at::kFloat).mul_(go);  // (V, C)
    return {gx, gw, at::Tensor()};
  }
};

}  // namespace

at::Tensor FusedHeadLoss(const at::Tensor& x, const at::Tensor& w, const at::Tensor& targets) {
  return HeadLossFunction::apply(x, w, targets);
}

bool FusedHeadLossSupports(at::ScalarType compute) {
  return compute == at::kBFloat16 || compute == at::kFloat;
}

}  // namespace pilot::runner
