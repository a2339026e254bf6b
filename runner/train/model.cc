// Builtin decoders, written like llm.c: every tensor carries its shape.
// B = micro-batch, T = sequence length, C = d_model, H = heads, KV = kv
// heads, D = C / H (head size), V = vocabulary, F = MLP hidden size.
#include "runner/train/model.h"

#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/version.h>

#include <cmath>
#include <functional>

#include "core/models/memory_model.h"
#include "runner/train/head_loss.h"

namespace pilot::runner {
namespace {

// ---- shared pieces -----------------------------------------------------------

class Params {
 public:
  explicit Params(const at::Device& device) : device_(device) {}

  // A float32 parameter drawn from N(0, std) (std 0 = zeros, std < 0 = ones).
  at::Tensor Add(const std::string& name, at::IntArrayRef shape, double std) {
    at::Tensor t = at::empty(shape, at::TensorOptions().dtype(at::kFloat).device(device_));
    if (std > 0) {
      t.normal_(0.0, std);
    } else if (std == 0) {
      t.zero_();
    } else {
      t.fill_(1.0);
    }
    t.set_requires_grad(true);
    list_.emplace_back(name, t);
    return t;
  }
  const NamedTensors& list() const { return list_; }

 private:
  at::Device device_;
  NamedTensors list_;
};

// y = x W^T + b with the inputs cast to the compute dtype.
at::Tensor Linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b,
                  at::ScalarType dt) {
  if (b.defined()) return at::linear(x.to(dt), w.to(dt), b.to(dt));
  return at::linear(x.to(dt), w.to(dt));
}

// Causal self-attention over q (B, H, T, D), k/v (B, H, T, D).
at::Tensor CausalAttention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
#if TORCH_VERSION_MAJOR >= 2
  return at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, /*dropout_p=*/0.0,
                                          /*is_causal=*/true);
#else
  // No fused kernel in this libtorch: masked softmax, float32 probabilities.
  const int64_t T = q.size(2);
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(3)));
  at::Tensor att = at::matmul(q, k.transpose(-2, -1)).mul(scale);  // (B, H, T, T)
  at::Tensor mask = at::ones({T, T}, q.options().dtype(at::kBool)).triu(1);
  att = att.masked_fill(mask, -INFINITY);
  att = at::softmax(att.to(at::kFloat), -1).to(q.scalar_type());
  return at::matmul(att, v);  // (B, H, T, D)
#endif
}

// (B, KV, T, D) -> (B, H, T, D) by repeating each kv head H/KV times.
at::Tensor RepeatKv(const at::Tensor& x, int64_t rep) {
  if (rep == 1) return x;
  const auto B = x.size(0), KV = x.size(1), T = x.size(2), D = x.size(3);
  return x.unsqueeze(2).expand({B, KV, rep, T, D}).reshape({B, KV * rep, T, D});
}

// A block maps the residual stream (B, T, C) float32 to the same.
using BlockFn = std::function<at::Tensor(const at::Tensor&)>;

// Activation checkpointing: forward runs the block without keeping its
// activations (custom Functions run forward with grad disabled); backward
// runs it again with grad on and back-propagates through the recomputation.
// Parameter gradients accumulate through the inner backward. The blocks draw
// no random numbers, so the recomputation is exact.
struct CheckpointedBlock : public torch::autograd::Function<CheckpointedBlock> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                            const BlockFn* block) {
    ctx->save_for_backward({x});
    ctx->saved_data["block"] = static_cast<int64_t>(reinterpret_cast<intptr_t>(block));
    return (*block)(x);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_out) {
    const auto* block =
        reinterpret_cast<const BlockFn*>(static_cast<intptr_t>(ctx->saved_data["block"].toInt()));
    at::Tensor x = ctx->get_saved_variables()[0].detach().set_requires_grad(true);
    at::Tensor y;
    {
      c10::AutoGradMode grad_on(true);
      y = (*block)(x);
    }
    torch::autograd::backward({y}, {grad_out[0]});
    return {x.grad(), at::Tensor()};
  }
};

class Decoder : public Model {
 public:
  Decoder(const ModelConfig& cfg, const at::Device& device) : cfg_(cfg), params_(device) {}

  const NamedTensors& Parameters() const override { return params_.list(); }
  void SetComputeDtype(at::ScalarType dtype) override { dt_ = dtype; }
  void SetActivationCheckpointing(bool on) override { ckpt_ = on; }
  void SetFusedLoss(bool on) override { fused_loss_ = on; }
  bool ActivationCheckpointing() const override { return ckpt_; }
  int Blocks() const override { return static_cast<int>(blocks_.size()); }
  void SetBlockParams(BlockParams provider) override { block_params_ = std::move(provider); }

  double FlopsPerToken(int seq_len) const override {
    return 6.0 * static_cast<double>(CountParameters(*this)) +
           12.0 * cfg_.layers * cfg_.d_model * static_cast<double>(seq_len);
  }

 protected:
  // Runs the blocks over x (B, T, C), checkpointed when asked.
  at::Tensor RunBlocks(at::Tensor x) {
    for (const BlockFn& block : blocks_) {
      if (ckpt_ && c10::GradMode::is_enabled()) {
        x = CheckpointedBlock::apply(x, &block);
      } else {
        x = block(x);
      }
    }
    return x;
  }

  // The output layer w (V, C) over x (B, T, C) float32 and the mean
  // cross-entropy against targets (B, T), in float32: fused where it can
  // be (head_loss.h), else logits in the compute dtype and a float32 copy.
  at::Tensor HeadLoss(const at::Tensor& x, const at::Tensor& w, const at::Tensor& targets) const {
    if (fused_loss_ && FusedHeadLossSupports(dt_)) {
      return FusedHeadLoss(x.to(dt_).reshape({-1, x.size(-1)}), w, targets.reshape({-1}));
    }
    at::Tensor logits = Linear(x, w, {}, dt_);  // (B, T, V)
    const int64_t V = logits.size(-1);
    return at::cross_entropy_loss(logits.to(at::kFloat).view({-1, V}), targets.reshape({-1}));
  }

  ModelConfig cfg_;
  Params params_;
  std::vector<BlockFn> blocks_;
  BlockParams block_params_;
  at::ScalarType dt_ = at::kFloat;
  bool ckpt_ = false;
  bool fused_loss_ = false;
};

// ---- GPT-2 style ---------------------------------------------------------------

class Gpt : public Decoder {
 public:
  Gpt(const ModelConfig& cfg, int max_t, const at::Device& device) : Decoder(cfg, device) {
    const int64_t C = cfg.d_model, V = cfg.vocab, L = cfg.layers, F = GptHidden(cfg);
    const double std = 0.02, proj_std = 0.02 / std::sqrt(2.0 * L);
    wte_ = params_.Add("wte.weight", {V, C}, std);       // (V, C), tied with the head
    wpe_ = params_.Add("wpe.weight", {max_t, C}, std);   // (maxT, C)
    for (int64_t l = 0; l < L; ++l) {
      const std::string p = "h." + std::to_string(l) + ".";
      Layer y;
      y.ln1_w = params_.Add(p + "ln_1.weight", {C}, -1);          // (C)
      y.ln1_b = params_.Add(p + "ln_1.bias", {C}, 0);             // (C)
      y.qkv_w = params_.Add(p + "attn.qkv.weight", {3 * C, C}, std);  // (3C, C)
      y.qkv_b = params_.Add(p + "attn.qkv.bias", {3 * C}, 0);     // (3C)
      y.proj_w = params_.Add(p + "attn.proj.weight", {C, C}, proj_std);  // (C, C)
      y.proj_b = params_.Add(p + "attn.proj.bias", {C}, 0);       // (C)
      y.ln2_w = params_.Add(p + "ln_2.weight", {C}, -1);
      y.ln2_b = params_.Add(p + "ln_2.bias", {C}, 0);
      y.fc_w = params_.Add(p + "mlp.fc.weight", {F, C}, std);      // (F, C), F = ffn_mult C
      y.fc_b = params_.Add(p + "mlp.fc.bias", {F}, 0);             // (F)
      y.out_w = params_.Add(p + "mlp.proj.weight", {C, F}, proj_std);  // (C, F)
      y.out_b = params_.Add(p + "mlp.proj.bias", {C}, 0);
      layers_.push_back(y);
    }
    lnf_w_ = params_.Add("ln_f.weight", {C}, -1);
    lnf_b_ = params_.Add("ln_f.bias", {C}, 0);
    for (size_t l = 0; l < layers_.size(); ++l) {
      blocks_.push_back([this, l](const at::Tensor& x) {
        if (!block_params_) return Block(layers_[l], x);
        const std::vector<at::Tensor> t = block_params_(static_cast<int>(l));
        TORCH_CHECK(t.size() == 12, "block parameters: 12 expected");
        return Block(Layer{t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], t[8], t[9], t[10], t[11]}, x);
      });
    }
  }

  std::string Kind() const override { return "gpt"; }

  at::Tensor Loss(const at::Tensor& idx, const at::Tensor& targets) override {
    const int64_t T = idx.size(1);
    at::Tensor pos = at::arange(T, idx.options());
    at::Tensor x = at::embedding(wte_, idx) + at::embedding(wpe_, pos);  // (B, T, C)
    x = RunBlocks(x);
    x = at::layer_norm(x, {cfg_.d_model}, lnf_w_, lnf_b_, 1e-5);
    return HeadLoss(x, wte_, targets);
  }

 private:
  struct Layer {
    at::Tensor ln1_w, ln1_b, qkv_w, qkv_b, proj_w, proj_b, ln2_w, ln2_b, fc_w, fc_b, out_w, out_b;
  };

  at::Tensor Block(const Layer& y, const at::Tensor& x) const {
    const int64_t B = x.size(0), T = x.size(1), C = cfg_.d_model, H = cfg_.heads, D = C / H;
    at::Tensor h = at::layer_norm(x, {C}, y.ln1_w, y.ln1_b, 1e-5);  // (B, T, C) fp32
    at::Tensor qkv = Linear(h, y.qkv_w, y.qkv_b, dt_);               // (B, T, 3C)
    auto parts = qkv.split(C, 2);
    at::Tensor q = parts[0].view({B, T, H, D}).transpose(1, 2);  // (B, H, T, D)
    at::Tensor k = parts[1].view({B, T, H, D}).transpose(1, 2);
    at::Tensor v = parts[2].view({B, T, H, D}).transpose(1, 2);
    at::Tensor a = CausalAttention(q, k, v).transpose(1, 2).contiguous().view({B, T, C});
    at::Tensor r = x + Linear(a, y.proj_w, y.proj_b, dt_);  // (B, T, C) fp32
    h = at::layer_norm(r, {C}, y.ln2_w, y.ln2_b, 1e-5);
    at::Tensor m = at::gelu(Linear(h, y.fc_w, y.fc_b, dt_), "tanh");  // (B, T, F)
    return r + Linear(m, y.out_w, y.out_b, dt_);
  }

  at::Tensor wte_, wpe_, lnf_w_, lnf_b_;
  std::vector<Layer> layers_;
};

// ---- Llama style -------------------------------------------------------------

class Llama : public Decoder {
 public:
  Llama(const ModelConfig& cfg, int max_t, const at::Device& device) : Decoder(cfg, device) {
    const int64_t C = cfg.d_model, V = cfg.vocab, L = cfg.layers, H = cfg.heads;
    const int64_t KV = cfg.kv_heads > 0 ? cfg.kv_heads : H, D = C / H, F = LlamaHidden(cfg);
    const double std = 0.02, proj_std = 0.02 / std::sqrt(2.0 * L);
    tok_ = params_.Add("tok_embeddings.weight", {V, C}, std);  // (V, C)
    for (int64_t l = 0; l < L; ++l) {
      const std::string p = "layers." + std::to_string(l) + ".";
      Layer y;
      y.attn_norm = params_.Add(p + "attention_norm.weight", {C}, -1);  // (C)
      y.wq = params_.Add(p + "attention.wq.weight", {H * D, C}, std);    // (H*D, C)
      y.wk = params_.Add(p + "attention.wk.weight", {KV * D, C}, std);   // (KV*D, C)
      y.wv = params_.Add(p + "attention.wv.weight", {KV * D, C}, std);   // (KV*D, C)
      y.wo = params_.Add(p + "attention.wo.weight", {C, H * D}, proj_std);  // (C, H*D)
      y.ffn_norm = params_.Add(p + "ffn_norm.weight", {C}, -1);
      y.w1 = params_.Add(p + "feed_forward.w1.weight", {F, C}, std);       // (F, C) gate
      y.w3 = params_.Add(p + "feed_forward.w3.weight", {F, C}, std);       // (F, C) up
      y.w2 = params_.Add(p + "feed_forward.w2.weight", {C, F}, proj_std);  // (C, F) down
      layers_.push_back(y);
    }
    norm_ = params_.Add("norm.weight", {C}, -1);
    out_ = params_.Add("output.weight", {V, C}, std);  // (V, C), untied
    // Rotary table for positions 0..maxT-1 (not trainable).
    at::TensorOptions f32 = at::TensorOptions().dtype(at::kFloat).device(device);
    at::Tensor inv = at::pow(10000.0, -at::arange(0, D, 2, f32) / static_cast<double>(D));
    at::Tensor ang = at::outer(at::arange(max_t, f32), inv);  // (maxT, D/2)
    cos_ = ang.cos();
    sin_ = ang.sin();
    kv_rep_ = H / KV;
    for (size_t l = 0; l < layers_.size(); ++l) {
      blocks_.push_back([this, l](const at::Tensor& x) {
        if (!block_params_) return Block(layers_[l], x);
        const std::vector<at::Tensor> t = block_params_(static_cast<int>(l));
        TORCH_CHECK(t.size() == 9, "block parameters: 9 expected");
        return Block(Layer{t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], t[8]}, x);
      });
    }
  }

  std::string Kind() const override { return "llama"; }

  at::Tensor Loss(const at::Tensor& idx, const at::Tensor& targets) override {
    at::Tensor x = at::embedding(tok_, idx);  // (B, T, C)
    x = RunBlocks(x);
    return HeadLoss(RmsNorm(x, norm_), out_, targets);
  }

 private:
  struct Layer {
    at::Tensor attn_norm, wq, wk, wv, wo, ffn_norm, w1, w3, w2;
  };

  static at::Tensor RmsNorm(const at::Tensor& x, const at::Tensor& w) {
    return x * at::rsqrt(x.pow(2).mean(-1, /*keepdim=*/true) + 1e-5) * w;
  }

  // Rotates pairs (even, odd) of x (B, N, T, D) by the position angles.
  at::Tensor Rope(const at::Tensor& x) const {
    const int64_t T = x.size(2), D = x.size(3);
    at::Tensor c = cos_.narrow(0, 0, T).to(x.scalar_type());  // (T, D/2)
    at::Tensor s = sin_.narrow(0, 0, T).to(x.scalar_type());
    at::Tensor xr = x.reshape({x.size(0), x.size(1), T, D / 2, 2});
    at::Tensor a = xr.select(-1, 0), b = xr.select(-1, 1);  // (B, N, T, D/2)
    return at::stack({a * c - b * s, a * s + b * c}, -1).flatten(-2);
  }

  at::Tensor Block(const Layer& y, const at::Tensor& x) const {
    const int64_t B = x.size(0), T = x.size(1), C = cfg_.d_model, H = cfg_.heads;
    const int64_t D = C / H, KV = H / kv_rep_;
    at::Tensor h = RmsNorm(x, y.attn_norm);  // (B, T, C) fp32
    at::Tensor q = Linear(h, y.wq, {}, dt_).view({B, T, H, D}).transpose(1, 2);   // (B, H, T, D)
    at::Tensor k = Linear(h, y.wk, {}, dt_).view({B, T, KV, D}).transpose(1, 2);  // (B, KV, T, D)
    at::Tensor v = Linear(h, y.wv, {}, dt_).view({B, T, KV, D}).transpose(1, 2);
    q = Rope(q);
    k = RepeatKv(Rope(k), kv_rep_);  // (B, H, T, D)
    v = RepeatKv(v, kv_rep_);
    at::Tensor a = CausalAttention(q, k, v).transpose(1, 2).contiguous().view({B, T, C});
    at::Tensor r = x + Linear(a, y.wo, {}, dt_);  // (B, T, C) fp32
    h = RmsNorm(r, y.ffn_norm);
    at::Tensor g = Linear(h, y.w1, {}, dt_);  // (B, T, F)
    at::Tensor u = Linear(h, y.w3, {}, dt_);
    return r + Linear(at::silu(g) * u, y.w2, {}, dt_);
  }

  at::Tensor tok_, norm_, out_, cos_, sin_;
  int64_t kv_rep_ = 1;
  std::vector<Layer> layers_;
};

}  // namespace

int64_t GptHidden(const ModelConfig& cfg) { return std::llround(cfg.ffn_mult * cfg.d_model); }

int64_t LlamaHidden(const ModelConfig& cfg) {
  const int64_t h = static_cast<int64_t>(2.0 * cfg.ffn_mult * cfg.d_model / 3.0);
  return (h + 255) / 256 * 256;
}

int64_t BuiltinParameters(const ModelConfig& cfg, int seq_len) {
  const int64_t C = cfg.d_model, L = cfg.layers;
  if (cfg.kind == "gpt") {
    const int64_t F = GptHidden(cfg);
    // ln_1, qkv, proj, ln_2, fc, mlp.proj (weights and biases).
    const int64_t block = 2 * C + (3 * C * C + 3 * C) + (C * C + C) + 2 * C + (F * C + F) + (C * F + C);
    return NonLayerParameters(cfg, seq_len) + L * block;
  }
  if (cfg.kind == "llama") {
    const int64_t H = cfg.heads, KV = cfg.kv_heads > 0 ? cfg.kv_heads : H, D = H > 0 ? C / H : 0;
    const int64_t F = LlamaHidden(cfg);
    const int64_t block = C + H * D * C + 2 * KV * D * C + C * H * D + C + 3 * F * C;
    return NonLayerParameters(cfg, seq_len) + L * block;
  }
  return 0;
}

int64_t CountParameters(const Model& w) {
  int64_t n = 0;
  for (const auto& [name, t] : w.Parameters()) n += t.numel();
  return n;
}

Result<std::unique_ptr<Model>> BuildModel(const ModelConfig& cfg, int seq_len,
                                                uint64_t seed, const at::Device& device) {
  if (cfg.heads <= 0 || cfg.d_model % cfg.heads != 0) {
    return Status::Invalid("model.heads", "must divide model.d_model (" +
                                              std::to_string(cfg.d_model) + ")");
  }
  const int kv = cfg.kv_heads > 0 ? cfg.kv_heads : cfg.heads;
  if (cfg.heads % kv != 0) return Status::Invalid("model.kv_heads", "must divide model.heads");
  const int max_t = cfg.max_seq_len > 0 ? cfg.max_seq_len : seq_len;
  if (max_t < seq_len) {
    return Status::Invalid("model.max_seq_len", "smaller than the sequence length " +
                                                    std::to_string(seq_len));
  }
  at::manual_seed(seed);  // CPU and every CUDA device: init is reproducible
  c10::NoGradGuard no_grad;
  if (cfg.kind == "gpt") {
    if (cfg.kv_heads > 0 && cfg.kv_heads != cfg.heads) {
      return Status::Invalid("model.kv_heads", "grouped-query attention needs kind = \"llama\"");
    }
    return std::unique_ptr<Model>(new Gpt(cfg, max_t, device));
  }
  if (cfg.kind == "llama") {
    if ((cfg.d_model / cfg.heads) % 2 != 0) {
      return Status::Invalid("model.heads", "rotary positions need an even head size");
    }
    return std::unique_ptr<Model>(new Llama(cfg, max_t, device));
  }
  return Status::Invalid("model.kind", "unknown \"" + cfg.kind + "\" (expected gpt or llama)");
}

}  // namespace pilot::runner
