// The CUDA kernel behind the fused output-layer loss (head_loss.h), built
// when the toolchain has a CUDA compiler. Plain pointers and no torch
// headers, so the .cu file compiles quickly and stays independent of the
// libtorch version.
#pragma once

#include <cstdint>

namespace pilot::runner {

enum class HeadLossDtype { kFloat32, kBFloat16 };

// For each of `rows` rows of `logits` (rows x vocab, contiguous, row-major):
//   row_loss[r] = logsumexp(logits[r]) - logits[r][targets[r]]   (float32)
// and, in place, logits[r][j] = (softmax(logits[r])[j] - [j == targets[r]])
// * scale: the gradient of scale * sum(row_loss) with respect to the logits.
// Sums run in float32 whatever the element type. A target outside
// [0, vocab) gives a NaN loss for its row. `stream` is a cudaStream_t.
// Returns 0, or a CUDA error code (HeadLossKernelError names it).
int LaunchHeadLossKernel(HeadLossDtype dtype, void* logits, const int64_t* targets,
                         float* row_loss, int64_t rows, int64_t vocab, float scale, void* stream);

const char* HeadLossKernelError(int code);

}  // namespace pilot::runner
