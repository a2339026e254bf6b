// One thread block per row of logits: a first pass reads the row once and
// keeps a running maximum and sum of exponentials (float32), which give the
// row's log-sum-exp and loss; a second pass reads the row again (from the
// L2 cache: a block of 1024 threads, two per SM, keeps about 26 MB of rows
// in flight for a 50k vocabulary) and overwrites it with the gradient. The
// logits are read twice and written once, against about ten passes over
// a float32 copy for cross entropy taken the usual way.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "runner/train/head_loss_kernel.h"

namespace pilot::runner {
namespace {

constexpr int kThreads = 1024;

struct MaxSum {
  float m;  // running maximum
  float s;  // sum of exp(x - m)
};

__device__ __forceinline__ void Add(MaxSum& a, float x) {
  if (x > a.m) {
    a.s = a.s * expf(a.m - x) + 1.0f;
    a.m = x;
  } else {
    a.s += expf(x - a.m);  // NaN stays NaN
  }
}

__device__ __forceinline__ MaxSum Combine(MaxSum a, MaxSum b) {
  if (b.m > a.m) {
    const MaxSum t = a;
    a = b;
    b = t;
  }
  if (b.s == 0.0f) return a;  // b saw nothing
  a.s += b.s * expf(b.m - a.m);
  return a;
}

// Every thread gets the block's combined pair.
__device__ MaxSum BlockReduce(MaxSum a) {
  __shared__ MaxSum part[kThreads / 32];
  for (int o = 16; o > 0; o >>= 1) {
    a = Combine(a, MaxSum{__shfl_xor_sync(0xffffffffu, a.m, o), __shfl_xor_sync(0xffffffffu, a.s, o)});
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) part[warp] = a;
  __syncthreads();
  if (warp == 0) {
    a = lane < kThreads / 32 ? part[lane] : MaxSum{-INFINITY, 0.0f};
    for (int o = 16; o > 0; o >>= 1) {
      a = Combine(a, MaxSum{__shfl_xor_sync(0xffffffffu, a.m, o), __shfl_xor_sync(0xffffffffu, a.s, o)});
    }
    if (lane == 0) part[0] = a;
  }
  __syncthreads();
  return part[0];
}

template <typename T>
__device__ __forceinline__ float ToFloat(T v);
template <>
__device__ __forceinline__ float ToFloat<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ float ToFloat<__nv_bfloat16>(__nv_bfloat16 v) {
  return __bfloat162float(v);
}

template <typename T>
__device__ __forceinline__ T FromFloat(float v);
template <>
__device__ __forceinline__ float FromFloat<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __nv_bfloat16 FromFloat<__nv_bfloat16>(float v) {
  return __float2bfloat16(v);
}

// kVector: the row is read and written 16 bytes at a time (vocab a multiple
// of 16 / sizeof(T), logits 16-byte aligned).
template <typename T, bool kVector>
__global__ void __launch_bounds__(kThreads)
    HeadLossKernel(T* logits, const int64_t* targets, float* row_loss, int64_t vocab, float scale) {
  constexpr int kVec = 16 / sizeof(T);
  __shared__ float target_logit;
  const int64_t r = blockIdx.x;
  T* row = logits + r * vocab;
  const int64_t t = targets[r];
  const bool valid = t >= 0 && t < vocab;
  // Read before any thread overwrites it; BlockReduce's barriers order it.
  if (threadIdx.x == 0) target_logit = valid ? ToFloat(row[t]) : NAN;

  MaxSum acc{-INFINITY, 0.0f};
  if (kVector) {
    const uint4* v = reinterpret_cast<const uint4*>(row);
    for (int64_t i = threadIdx.x; i < vocab / kVec; i += kThreads) {
      const uint4 raw = v[i];
      const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
      for (int k = 0; k < kVec; ++k) Add(acc, ToFloat(e[k]));
    }
  } else {
    for (int64_t j = threadIdx.x; j < vocab; j += kThreads) Add(acc, ToFloat(row[j]));
  }
  acc = BlockReduce(acc);
  const float lse = acc.m + logf(acc.s);
  if (threadIdx.x == 0) row_loss[r] = valid ? lse - target_logit : NAN;

  if (kVector) {
    uint4* v = reinterpret_cast<uint4*>(row);
    for (int64_t i = threadIdx.x; i < vocab / kVec; i += kThreads) {
      uint4 raw = v[i];
      T* e = reinterpret_cast<T*>(&raw);
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        float p = __expf(ToFloat(e[k]) - lse);
        if (i * kVec + k == t) p -= 1.0f;
        e[k] = FromFloat<T>(p * scale);
      }
      v[i] = raw;
    }
  } else {
    for (int64_t j = threadIdx.x; j < vocab; j += kThreads) {
      float p = __expf(ToFloat(row[j]) - lse);
      if (j == t) p -= 1.0f;
      row[j] = FromFloat<T>(p * scale);
    }
  }
}

template <typename T>
int Launch(void* logits, const int64_t* targets, float* row_loss, int64_t rows, int64_t vocab,
           float scale, cudaStream_t stream) {
  T* p = static_cast<T*>(logits);
  const bool vector = reinterpret_cast<uintptr_t>(logits) % 16 == 0 &&
                      vocab % static_cast<int64_t>(16 / sizeof(T)) == 0;
  const dim3 grid(static_cast<unsigned>(rows));
  if (vector) {
    HeadLossKernel<T, true><<<grid, kThreads, 0, stream>>>(p, targets, row_loss, vocab, scale);
  } else {
    HeadLossKernel<T, false><<<grid, kThreads, 0, stream>>>(p, targets, row_loss, vocab, scale);
  }
  return static_cast<int>(cudaGetLastError());
}

}  // namespace

int LaunchHeadLossKernel(HeadLossDtype dtype, void* logits, const int64_t* targets,
                         float* row_loss, int64_t rows, int64_t vocab, float scale, void* stream) {
  if (rows <= 0) return 0;
  if (rows > 0x7fffffff) return static_cast<int>(cudaErrorInvalidConfiguration);
  const auto s = static_cast<cudaStream_t>(stream);
  if (dtype == HeadLossDtype::kBFloat16) {
    return Launch<__nv_bfloat16>(logits, targets, row_loss, rows, vocab, scale, s);
  }
  return Launch<float>(logits, targets, row_loss, rows, vocab, scale, s);
}

const char* HeadLossKernelError(int code) {
  return cudaGetErrorString(static_cast<cudaError_t>(code));
}

}  // namespace pilot::runner
