// The node stage's sharded engine: units gathered around their use and
// reduce-scattered in backward.
#include "runner/node/sharded_engine.h"

#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <chrono>

namespace pilot::runner {
namespace {

using Clock = std::chrono::steady_clock;

// "h.3.attn.qkv.weight" -> "h.3"; names without a numbered block -> "".
std::string UnitOf(const std::string& name) {
  const size_t a = name.find('.');
  if (a == std::string::npos) return "";
  const size_t b = name.find('.', a + 1);
  if (b == std::string::npos || b == a + 1) return "";
  for (size_t k = a + 1; k < b; ++k) {
    if (name[k] < '0' || name[k] > '9') return "";
  }
  return name.substr(0, b);
}

// "h.3" -> 3; "" -> -1.
int BlockOf(const std::string& unit) {
  const size_t dot = unit.find('.');
  return dot == std::string::npos ? -1 : std::stoi(unit.substr(dot + 1));
}

// The whole parameter held in columns [off, off + chunk) of a unit's
// gathered rows (W, size): `numel` elements as a tensor of its own of
// `shape` (one copy when the chunks are not padded).
at::Tensor WholeOf(const at::Tensor& rows, int64_t off, int64_t chunk, int64_t numel,
                   at::IntArrayRef shape) {
  const int64_t world = rows.size(0);
  at::Tensor w = at::empty(shape, rows.options());
  if (chunk * world == numel) {
    w.view({world, chunk}).copy_(rows.narrow(1, off, chunk));
  } else {
    w.view({-1}).copy_(rows.narrow(1, off, chunk).reshape({-1}).narrow(0, 0, numel));
  }
  return w;
}

}  // namespace

ShardedEngine::~ShardedEngine() {
  if (s_) s_->model().SetBlockParams({});
}

Status ShardedEngine::Layout() {
  const NamedTensors& params = s_->model().Parameters();
  const at::TensorOptions opts = params.empty() ? at::TensorOptions() : params[0].second.options();
  const int W = world_;
  std::map<std::string, int> unit_index;
  for (size_t i = 0; i < params.size(); ++i) {
    const std::string u = UnitOf(params[i].first);
    auto [it, added] = unit_index.emplace(u, static_cast<int>(groups_.size()));
    if (added) {
      groups_.emplace_back();
      groups_.back().block = BlockOf(u);
      units_.push_back(groups_.size() - 1);
    }
    Slot& sl = slots_[i];
    Group& g = groups_[it->second];
    sl.numel = params[i].second.numel();
    sl.chunk = (sl.numel + W - 1) / W;
    sl.off = g.size;
    sl.group = it->second;
    g.size += sl.chunk;
    g.params.push_back(i);
  }
  c10::NoGradGuard no_grad;
  for (Group& g : groups_) {
    g.shard = at::empty({g.size}, opts.requires_grad(false));
  }
  for (size_t i = 0; i < params.size(); ++i) {
    const Slot& sl = slots_[i];
    Group& g = groups_[sl.group];
    g.shard.narrow(0, sl.off, sl.chunk).copy_(PaddedRows(params[i].second, W, sl.chunk)[rank_]);
    at::Tensor v = g.shard.narrow(0, sl.off, sl.chunk);
    if (params[i].second.dim() >= 2) v = v.view({1, sl.chunk});  // keeps weight decay
    shard_views_.emplace_back(params[i].first, v);
  }
  shard_optim_ = std::make_unique<Optimizer>(shard_views_, s_->cfg().training);
  const int blocks = s_->model().Blocks();
  block_group_.assign(blocks, -1);
  for (size_t u = 0; u < groups_.size(); ++u) {
    const int b = groups_[u].block;
    if (b >= 0 && b < blocks) block_group_[b] = static_cast<int>(u);
  }
  for (int b = 0; b < blocks; ++b) {
    if (block_group_[b] < 0) return Status::Internal("node stage", "block " + std::to_string(b) + " has no unit");
  }
  graph_anchor_ = at::empty({0}, opts.requires_grad(false)).requires_grad_(true);
  int64_t most = 0;
  for (const Group& g : groups_) {
    if (g.block >= 0) most = std::max(most, g.size);
  }
  gather_bufs_.resize(2);  // made by a step's first gather
  rs_bufs_.resize(3);      // made by a step's first reduction
  unit_numel_ = W * most;
  Release();
  return Status::Ok();
}

std::vector<int64_t> ShardedEngine::Shape(size_t i) const {
  if (i < shapes_.size()) return shapes_[i];
  return NodeEngine::Shape(i);
}

void ShardedEngine::BeginStep(NodeStepOut* out) {
  const auto t0 = Clock::now();
  Release();  // eval may have gathered everything
  GatherUnits(/*blocks=*/false);
  gathered_ = true;
  for (Group& g : groups_) g.grad_written = false;
  s_->model().SetBlockParams([this](int block) { return BlockParams(block); });
  out->comm_exposed_ms += std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

bool ShardedEngine::TakeGrad(Group& g, Slot& sl) {
  if (g.remaining <= 1) return false;
  // The rest unit (a block's gradients come through OnBlockGrads): its
  // whole-gradient buffer is made when its last gradient arrives, at the
  // end of backward, instead of with its first (the final norm's, at the
  // start, where activations peak). Until then each gradient is the
  // parameter's own .grad, which autograd sets right after this hook.
  sl.deferred = true;
  --g.remaining;
  return true;
}

void ShardedEngine::Pack(Group& g, Slot& sl, const at::Tensor& total) {
  if (!g.flat.defined()) g.flat = at::empty({world_ * g.size}, total.options());
  g.flat.view({world_, g.size}).narrow(1, sl.off, sl.chunk).copy_(PaddedRows(total, world_, sl.chunk));
  sl.filled = true;
}

Comm::Handle ShardedEngine::Reduce(Group& g) {
  if (!g.grad_shard.defined()) g.grad_shard = at::empty({g.size}, g.shard.options().requires_grad(false));
  return comm_->ReduceScatterAsync(g.grad_shard, g.flat);
}

void ShardedEngine::FinishReduction() {
  c10::NoGradGuard no_grad;
  while (!reductions_.empty()) DrainOneReduction();
  // Prefetches nobody used (the recomputation's last one): complete them so
  // every rank's collectives stay in step.
  for (auto& [group, f] : gathers_) comm_->Wait(f.h);
  gathers_.clear();
  for (Group& g : groups_) {
    if (g.block >= 0 && !g.grad_written) g.grad_shard = at::zeros({g.size}, g.shard.options().requires_grad(false));
  }
  NodeEngine::FinishReduction();
  // Out of the next forward pass and its peak (the allocator keeps the
  // blocks for the next backward).
  for (at::Tensor& b : rs_bufs_) b = at::Tensor();
  for (at::Tensor& b : gather_bufs_) b = at::Tensor();
}

void ShardedEngine::Gather() {
  if (gathered_) return;
  GatherUnits(/*blocks=*/true);
  gathered_ = true;
}

void ShardedEngine::GatherUnits(bool blocks) {
  c10::NoGradGuard no_grad;
  const NamedTensors& params = s_->model().Parameters();
  std::vector<at::Tensor> full(groups_.size());
  std::vector<Comm::Handle> hs(groups_.size());
  for (size_t u = 0; u < groups_.size(); ++u) {
    if (!blocks && groups_[u].block >= 0) continue;
    full[u] = at::empty({world_ * groups_[u].size}, groups_[u].shard.options());
    hs[u] = comm_->AllGatherAsync(full[u], groups_[u].shard);
  }
  for (size_t u = 0; u < groups_.size(); ++u) {
    if (!full[u].defined()) continue;
    comm_->Wait(hs[u]);
    at::Tensor rows = full[u].view({world_, groups_[u].size});
    for (size_t i : groups_[u].params) {
      const Slot& sl = slots_[i];
      at::Tensor p = params[i].second;
      p.set_(WholeOf(rows, sl.off, sl.chunk, sl.numel, shapes_[i]));
    }
    full[u] = at::Tensor();
  }
}

void ShardedEngine::LaunchGather(int group) {
  if (gathers_.count(group)) return;
  c10::NoGradGuard no_grad;
  InFlight f;
  f.group = group;
  // The buffer's previous gather was copied out by work already queued on
  // this stream, which the collective waits for.
  at::Tensor& buf = gather_bufs_[gather_next_++ % 2];
  if (!buf.defined()) buf = at::empty({unit_numel_}, groups_[group].shard.options());
  f.buf = buf.narrow(0, 0, world_ * groups_[group].size);
  f.h = comm_->AllGatherAsync(f.buf, groups_[group].shard);
  gathers_.emplace(group, std::move(f));
}

// The gathered parameters of a block enter the graph through this node:
// its backward hands their gradients to the engine (which reduce-scatters
// them into the shards) and gives the anchor no gradient.
struct GatherBlock : public torch::autograd::Function<GatherBlock> {
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx,
                                                const at::Tensor& /*anchor*/, ShardedEngine* engine,
                                                int64_t group, std::vector<at::Tensor>* whole) {
    ctx->saved_data["engine"] = static_cast<int64_t>(reinterpret_cast<intptr_t>(engine));
    ctx->saved_data["group"] = group;
    return std::move(*whole);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto* engine = reinterpret_cast<ShardedEngine*>(static_cast<intptr_t>(ctx->saved_data["engine"].toInt()));
    engine->OnBlockGrads(static_cast<int>(ctx->saved_data["group"].toInt()), grads);
    return {at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

std::vector<at::Tensor> ShardedEngine::BlockParams(int block) {
  const int dir = block > last_block_ ? 1 : -1;
  last_block_ = block;
  const int group = block_group_[block];
  LaunchGather(group);
  const int next = block + dir;
  if (next >= 0 && next < static_cast<int>(block_group_.size())) LaunchGather(block_group_[next]);
  InFlight f = std::move(gathers_.at(group));
  gathers_.erase(group);
  std::vector<at::Tensor> whole;
  {
    c10::NoGradGuard no_grad;
    comm_->Wait(f.h);
    at::Tensor rows = f.buf.view({world_, groups_[group].size});
    for (size_t i : groups_[group].params) {
      const Slot& sl = slots_[i];
      // A tensor of its own per parameter (not a view: it is a Function's
      // output), so what autograd saves of one (a norm weight) keeps only
      // that tensor alive, not the whole unit.
      whole.push_back(WholeOf(rows, sl.off, sl.chunk, sl.numel, shapes_[i]));
    }
  }
  f.buf = at::Tensor();
  // The last block's forward without recomputation: no more gathers this
  // step (the copies above are queued before any reuse of the memory).
  if (dir > 0 && next == static_cast<int>(block_group_.size()) && !s_->model().ActivationCheckpointing()) {
    for (at::Tensor& b : gather_bufs_) b = at::Tensor();
  }
  return GatherBlock::apply(graph_anchor_, this, static_cast<int64_t>(group), &whole);
}

void ShardedEngine::OnBlockGrads(int group, const std::vector<at::Tensor>& grads) {
  c10::NoGradGuard no_grad;
  Group& g = groups_[group];
  InFlight f;
  f.group = group;
  // Three launches ago: drained (waited for) by now, see below.
  const int64_t slot = rs_next_++ % 3;
  if (!rs_bufs_[slot].defined()) rs_bufs_[slot] = at::empty({unit_numel_}, g.shard.options().requires_grad(false));
  f.buf = rs_bufs_[slot].narrow(0, 0, world_ * g.size);
  f.buf.zero_();
  at::Tensor rows = f.buf.view({world_, g.size});
  for (size_t k = 0; k < g.params.size() && k < grads.size(); ++k) {
    const Slot& sl = slots_[g.params[k]];
    if (grads[k].defined()) rows.narrow(1, sl.off, sl.chunk).copy_(PaddedRows(grads[k], world_, sl.chunk));
  }
  // The first reduction of a step becomes the unit's gradient shard: like
  // zero_grad(set_to_none), no gradient memory exists before backward
  // produces it.
  f.out = at::empty({g.size}, g.shard.options());
  f.h = comm_->ReduceScatterAsync(f.out, f.buf);
  reductions_.push_back(std::move(f));
  while (reductions_.size() > 2) DrainOneReduction();
}

void ShardedEngine::DrainOneReduction() {
  InFlight f = std::move(reductions_.front());
  reductions_.erase(reductions_.begin());
  comm_->Wait(f.h);
  Group& g = groups_[f.group];
  if (g.grad_written) {
    g.grad_shard.add_(f.out);
  } else {
    g.grad_shard = f.out;
    g.grad_written = true;
  }
}

void ShardedEngine::Release() {
  if (!gathered_) return;
  c10::NoGradGuard no_grad;
  const NamedTensors& params = s_->model().Parameters();
  if (shapes_.empty()) {
    for (const auto& [name, p] : params) shapes_.push_back(p.sizes().vec());
  }
  for (const auto& [name, p] : params) {
    at::Tensor t = p;
    t.mutable_grad() = at::Tensor();
    t.set_(at::empty({0}, t.options().requires_grad(false)));
  }
  gathered_ = false;
}

at::Tensor ShardedEngine::PrepareOptimizer() {
  const NamedTensors& params = s_->model().Parameters();
  s_->model().SetBlockParams({});
  Release();
  for (size_t i = 0; i < params.size(); ++i) {
    const Slot& sl = slots_[i];
    at::Tensor v = shard_views_[i].second;
    v.mutable_grad() = groups_[sl.group].grad_shard.narrow(0, sl.off, sl.chunk).view(v.sizes());
  }
  at::Tensor sq = at::zeros({1}, params[0].second.options().requires_grad(false));
  for (const Group& g : groups_) sq += g.grad_shard.pow(2).sum();
  comm_->AllReduce(sq);
  for (Group& g : groups_) g.flat = at::Tensor();
  return sq.sqrt();
}

void ShardedEngine::AfterOptimizer() {
  for (auto& [name, v] : shard_views_) v.mutable_grad() = at::Tensor();
  for (Group& g : groups_) g.grad_shard = at::Tensor();  // until the next backward
}

at::Tensor ShardedEngine::ParamShardOf(size_t i) {
  const Slot& sl = slots_[i];
  return groups_[sl.group].shard.narrow(0, sl.off, sl.chunk).contiguous();
}

at::Tensor ShardedEngine::StateShardOf(size_t /*i*/, const at::Tensor& state) {
  return state.reshape({-1}).contiguous();
}

void ShardedEngine::LoadParam(size_t i, const at::Tensor& whole) {
  const Slot& sl = slots_[i];
  groups_[sl.group].shard.narrow(0, sl.off, sl.chunk).copy_(PaddedRows(whole.to(s_->device()), world_, sl.chunk)[rank_]);
}

void ShardedEngine::LoadState(size_t i, at::Tensor& dst, const at::Tensor& whole) {
  dst.view({-1}).copy_(PaddedRows(whole, world_, slots_[i].chunk)[rank_]);
}

}  // namespace pilot::runner
