// The model of the builtin workload (runner/workload/builtin.h): what one
// training step runs, as the builtin decoder families.
//
//   gpt    GPT-2 style: learned positions, LayerNorm, GELU(tanh) MLP, tied
//          input/output embedding, biases.
//   llama  Llama style: RMSNorm, rotary positions, SwiGLU MLP, grouped-query
//          attention (kv_heads), untied output, no biases.
//
// Parameters are kept in float32 ("master weights"). Mixed precision casts
// the inputs of every matrix product to the compute dtype (bf16 or fp16),
// keeps norms, the residual stream and the loss in float32: the same split
// as torch.autocast, made explicit so it does not depend on the libtorch
// version.
//
// Thread-safety: one thread drives a Model at a time.
#pragma once

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/config/config.h"
#include "core/base/status.h"

namespace pilot::runner {

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

class Model {
 public:
  virtual ~Model() = default;

  // Mean next-token cross-entropy (float32 scalar) of idx (B, T) against
  // targets (B, T), both int64 on the model's device. Builds the autograd
  // graph when grad mode is on.
  virtual at::Tensor Loss(const at::Tensor& idx, const at::Tensor& targets) = 0;

  // Every distinct trainable tensor once (a tied embedding appears once),
  // in a fixed order with stable names ("h.3.attn.qkv.weight").
  virtual const NamedTensors& Parameters() const = 0;

  // float32, bfloat16 or float16 for the matrix products.
  virtual void SetComputeDtype(at::ScalarType dtype) = 0;
  // Recompute each block's activations in backward instead of keeping them.
  virtual void SetActivationCheckpointing(bool on) = 0;
  virtual bool ActivationCheckpointing() const = 0;
  // The output layer and the loss as one function (head_loss.h) where the
  // compute dtype allows it; off: logits, then cross entropy on a float32
  // copy, as most training programs write it.
  virtual void SetFusedLoss(bool on) = 0;

  // The transformer blocks, 0..Blocks()-1; block l's parameters are the
  // ones named with the prefix "<family>.<l>." in Parameters() order.
  virtual int Blocks() const = 0;
  // When set, block l runs with the tensors provider(l) returns (its
  // parameters, in Parameters() order and shapes) instead of its own: the
  // sharded node stage gathers them just before use. Called again for the
  // recomputation when activation checkpointing is on. Empty: unset.
  using BlockParams = std::function<std::vector<at::Tensor>(int)>;
  virtual void SetBlockParams(BlockParams provider) = 0;

  // Training FLOPs per token: 6N + 12 L d T (attention included).
  virtual double FlopsPerToken(int seq_len) const = 0;
  virtual std::string Kind() const = 0;
};

// Builds the family named by cfg.kind on `device`, initialised from `seed`
// (torch's default generators are seeded, so the same seed on the same
// device gives the same weights). `seq_len` sizes learned positions and the
// rotary table when cfg.max_seq_len is 0.
// Errors: kInvalid (unknown kind, heads not dividing d_model, kv_heads not
// dividing heads, odd head size for RoPE).
Result<std::unique_ptr<Model>> BuildModel(const ModelConfig& cfg, int seq_len,
                                                uint64_t seed, const at::Device& device);

// Total elements of Parameters().
int64_t CountParameters(const Model& w);

// The parameters BuildModel makes for `cfg` at sequence length `seq_len`
// (positions up to model.max_seq_len or it), counted without building it:
// NonLayerParameters (core/models/memory_model.h) plus model.layers blocks. 0 for
// an unknown kind.
int64_t BuiltinParameters(const ModelConfig& cfg, int seq_len);

// GPT's MLP hidden size: round(ffn_mult * d_model) (4 * d_model at the
// default ffn_mult 4).
int64_t GptHidden(const ModelConfig& cfg);

// Llama's SwiGLU hidden size: 2/3 of ffn_mult * d_model, rounded up to a
// multiple of 256.
int64_t LlamaHidden(const ModelConfig& cfg);

}  // namespace pilot::runner
