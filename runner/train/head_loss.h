// The output layer and its loss as one autograd function ("fused loss",
// training.fused_loss): logits = x W^T, mean cross entropy against the
// targets, and the gradient of the logits made in the forward pass, in
// the logits' own buffer. Backward is then two matrix products.
//
// Against the usual way (a float32 copy of the logits, log-softmax, and
// its backward), this keeps one (N, V) tensor in the compute dtype from
// forward to backward instead of a float32 one plus two float32 (N, V)
// transients in backward, and reads it three times instead of about ten.
// On CUDA a kernel (head_loss_kernel.cu) does the softmax part in one
// launch; elsewhere, or in a build without a CUDA compiler, the same is
// done with ATen operations a few rows at a time.
#pragma once

#include <ATen/ATen.h>

namespace pilot::runner {

// x (N, C) in the compute dtype (bfloat16 or float32), w (V, C) the float32
// weight, targets (N) int64. Returns the mean cross entropy as a float32
// scalar; the gradient flows to x (in its dtype) and to w (float32).
at::Tensor FusedHeadLoss(const at::Tensor& x, const at::Tensor& w, const at::Tensor& targets);

// Whether FusedHeadLoss handles this compute dtype (fp16 does not: its
// gradient would need the loss scale before rounding).
bool FusedHeadLossSupports(at::ScalarType compute);

}  // namespace pilot::runner
