// The node stage's distributed step: DDP buckets and sharded units.
#include "runner/node_engine.h"

#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <chrono>
#include <cmath>

namespace pilot::runner {
namespace {

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

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

// The (W, chunk) zero-padded view of a whole tensor's elements.
at::Tensor Padded(const at::Tensor& t, int world, int64_t chunk) {
  at::Tensor flat = t.detach().reshape({-1});
  const int64_t pad = world * chunk - flat.numel();
  if (pad > 0) flat = at::cat({flat, at::zeros({pad}, flat.options())});
  return flat.view({world, chunk});
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

NodeEngine::~NodeEngine() {
  if (s_ && sharded_) s_->model().SetBlockParams({});
  loaders_.clear();
}

Result<std::unique_ptr<NodeEngine>> NodeEngine::Create(Session* s, Comm* comm, const std::string& mode,
                                                       int data_ranks) {
  if (mode != "ddp" && mode != "sharded") {
    return Status::Invalid("parallel.mode", "unknown \"" + mode + "\" (ddp or sharded)");
  }
  if (s->compute_dtype() == at::kHalf) {
    return Status::Invalid("training.precision", "the node stage does not run fp16 (loss scaling)")
        .WithHint("use \"bf16\" or \"fp32\"");
  }
  if (data_ranks < comm->world() || data_ranks % comm->world() != 0) {
    return Status::Invalid("node stage", std::to_string(comm->world()) + " processes do not divide " +
                                             std::to_string(data_ranks) + " data ranks (parallel.nproc)");
  }
  std::unique_ptr<NodeEngine> e(new NodeEngine());
  e->s_ = s;
  e->comm_ = comm;
  e->mode_ = mode;
  e->sharded_ = mode == "sharded";
  e->data_ranks_ = data_ranks;
  e->world_ = comm->world();
  e->rank_ = comm->rank();
  for (int d = e->rank_; d < data_ranks; d += e->world_) e->mine_.push_back(d);
  const NamedTensors& params = s->model().Parameters();
  e->slots_.resize(params.size());
  const at::TensorOptions opts = params.empty() ? at::TensorOptions() : params[0].second.options();
  const int W = e->world_;
  if (e->sharded_) {
    std::map<std::string, int> unit_index;
    for (size_t i = 0; i < params.size(); ++i) {
      const std::string u = UnitOf(params[i].first);
      auto [it, added] = unit_index.emplace(u, static_cast<int>(e->groups_.size()));
      if (added) {
        e->groups_.emplace_back();
        e->groups_.back().block = BlockOf(u);
        e->units_.push_back(e->groups_.size() - 1);
      }
      Slot& sl = e->slots_[i];
      Group& g = e->groups_[it->second];
      sl.numel = params[i].second.numel();
      sl.chunk = (sl.numel + W - 1) / W;
      sl.off = g.size;
      sl.group = it->second;
      g.size += sl.chunk;
      g.params.push_back(i);
    }
    c10::NoGradGuard no_grad;
    for (Group& g : e->groups_) {
      g.shard = at::empty({g.size}, opts.requires_grad(false));
    }
    for (size_t i = 0; i < params.size(); ++i) {
      const Slot& sl = e->slots_[i];
      Group& g = e->groups_[sl.group];
      g.shard.narrow(0, sl.off, sl.chunk).copy_(Padded(params[i].second, W, sl.chunk)[e->rank_]);
      at::Tensor v = g.shard.narrow(0, sl.off, sl.chunk);
      if (params[i].second.dim() >= 2) v = v.view({1, sl.chunk});  // keeps weight decay
      e->shard_views_.emplace_back(params[i].first, v);
    }
    e->shard_optim_ = std::make_unique<Optimizer>(e->shard_views_, s->cfg().training);
    const int blocks = s->model().Blocks();
    e->block_group_.assign(blocks, -1);
    for (size_t u = 0; u < e->groups_.size(); ++u) {
      const int b = e->groups_[u].block;
      if (b >= 0 && b < blocks) e->block_group_[b] = static_cast<int>(u);
    }
    for (int b = 0; b < blocks; ++b) {
      if (e->block_group_[b] < 0) return Status::Internal("node stage", "block " + std::to_string(b) + " has no unit");
    }
    e->graph_anchor_ = at::empty({0}, opts.requires_grad(false)).requires_grad_(true);
    int64_t most = 0;
    for (const Group& g : e->groups_) {
      if (g.block >= 0) most = std::max(most, g.size);
    }
    e->gather_bufs_.resize(2);  // made by a step's first gather
    e->rs_bufs_.resize(3);      // made by a step's first reduction
    e->unit_numel_ = W * most;
    e->Release();
  } else {
    const int64_t cap = std::max<int64_t>(1, static_cast<int64_t>(s->cfg().parallel.bucket_mb) * 1024 * 1024 / 4);
    for (size_t k = params.size(); k-- > 0;) {
      Slot& sl = e->slots_[k];
      sl.numel = params[k].second.numel();
      sl.chunk = (sl.numel + W - 1) / W;
      if (e->groups_.empty() || e->groups_.back().size >= cap) {
        e->groups_.emplace_back();
        e->buckets_.push_back(e->groups_.size() - 1);
      }
      Group& g = e->groups_.back();
      sl.group = static_cast<int>(e->groups_.size() - 1);
      sl.off = g.size;
      g.size += sl.numel;
      g.params.push_back(k);
    }
  }
  NodeEngine* self = e.get();
  for (size_t i = 0; i < params.size(); ++i) {
    at::Tensor p = params[i].second;
    p.register_hook([self, i](const at::Tensor& grad) { self->OnGrad(i, grad); });
  }
  return e;
}

std::vector<int64_t> NodeEngine::Shape(size_t i) const {
  if (sharded_ && i < shapes_.size()) return shapes_[i];
  return s_->model().Parameters()[i].second.sizes().vec();
}

Optimizer& NodeEngine::optim() { return sharded_ ? *shard_optim_ : s_->optim(); }

int64_t NodeEngine::TokensPerRankStep() const {
  const Config& c = s_->cfg();
  return static_cast<int64_t>(c.training.seq_len) * c.training.micro_batch * std::max(1, c.run.grad_accum) *
         static_cast<int64_t>(mine_.size());
}

Status NodeEngine::OpenData(const Pins& pins, int64_t first, int64_t last) {
  loaders_.clear();
  sources_.clear();
  const Config& c = s_->cfg();
  const int64_t accum = std::max(1, c.run.grad_accum);
  for (int d : mine_) {
    PILOT_ASSIGN_OR_RETURN(std::shared_ptr<TokenSource> src,
                           TokenSource::Open(c.data, c.model.vocab, c.training.seq_len, c.training.micro_batch,
                                             s_->seed(), d, pins.train_sha256, pins.eval_sha256));
    sources_.push_back(src);
    loaders_.push_back(std::make_unique<Loader>(src, (first - 1) * accum, last * accum, c.data.loader_threads,
                                                c.data.prefetch, s_->device()));
  }
  return Status::Ok();
}

void NodeEngine::OnGrad(size_t i, const at::Tensor& grad) {
  if (!reduce_now_) return;
  c10::NoGradGuard no_grad;
  Slot& sl = slots_[i];
  Group& g = groups_[sl.group];
  const at::Tensor& p = s_->model().Parameters()[i].second;
  if (sharded_ && g.remaining > 1) {
    // The rest unit (a block's gradients come through OnBlockGrads): its
    // whole-gradient buffer is made when its last gradient arrives, at the
    // end of backward, instead of with its first (the final norm's, at the
    // start, where activations peak). Until then each gradient is the
    // parameter's own .grad, which autograd sets right after this hook.
    sl.deferred = true;
    --g.remaining;
    return;
  }
  Pack(g, sl, p.grad().defined() ? p.grad() + grad : grad);
  if (--g.remaining == 0) Launch(g);
}

void NodeEngine::Pack(Group& g, Slot& sl, const at::Tensor& total) {
  if (sharded_) {
    if (!g.flat.defined()) g.flat = at::empty({world_ * g.size}, total.options());
    g.flat.view({world_, g.size}).narrow(1, sl.off, sl.chunk).copy_(Padded(total, world_, sl.chunk));
  } else {
    g.flat.narrow(0, sl.off, sl.numel).copy_(total.reshape({-1}));
  }
  sl.filled = true;
}

void NodeEngine::Launch(Group& g) {
  if (g.launched) return;
  g.launched = true;
  const NamedTensors& params = s_->model().Parameters();
  for (size_t i : g.params) {
    Slot& sl = slots_[i];
    if (!sl.deferred) continue;
    const at::Tensor& p = params[i].second;
    Pack(g, sl, p.grad().defined() ? p.grad() : at::zeros(p.sizes(), p.options().requires_grad(false)));
    sl.deferred = false;
  }
  if (sharded_ && !g.grad_shard.defined()) {
    g.grad_shard = at::empty({g.size}, g.shard.options().requires_grad(false));
  }
  g.h = sharded_ ? comm_->ReduceScatterAsync(g.grad_shard, g.flat) : comm_->AllReduceAsync(g.flat);
}

// Launches what backward did not complete (parameters without gradients:
// zeros or what was accumulated) and waits for every reduction.
void NodeEngine::FinishReduction() {
  c10::NoGradGuard no_grad;
  while (!reductions_.empty()) DrainOneReduction();
  // Prefetches nobody used (the recomputation's last one): complete them so
  // every rank's collectives stay in step.
  for (auto& [group, f] : gathers_) comm_->Wait(f.h);
  gathers_.clear();
  for (Group& g : groups_) {
    if (sharded_ && g.block >= 0) {
      if (!g.grad_written) g.grad_shard = at::zeros({g.size}, g.shard.options().requires_grad(false));
      continue;
    }
    if (g.launched) continue;
    // Launch packs what backward left (the parameter's .grad, or zeros).
    for (size_t i : g.params) {
      if (!slots_[i].filled) slots_[i].deferred = true;
    }
    Launch(g);
  }
  comm_->WaitAll();
  // Out of the next forward pass and its peak (the allocator keeps the
  // blocks for the next backward).
  for (at::Tensor& b : rs_bufs_) b = at::Tensor();
  for (at::Tensor& b : gather_bufs_) b = at::Tensor();
}

void NodeEngine::Gather() {
  if (!sharded_ || gathered_) return;
  GatherUnits(/*blocks=*/true);
  gathered_ = true;
}

// All-gathers the rest unit (and the blocks' units when `blocks`) into the
// model's own tensors.
void NodeEngine::GatherUnits(bool blocks) {
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

void NodeEngine::LaunchGather(int group) {
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
                                                const at::Tensor& /*anchor*/, NodeEngine* engine,
                                                int64_t group, std::vector<at::Tensor>* whole) {
    ctx->saved_data["engine"] = static_cast<int64_t>(reinterpret_cast<intptr_t>(engine));
    ctx->saved_data["group"] = group;
    return std::move(*whole);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto* engine = reinterpret_cast<NodeEngine*>(static_cast<intptr_t>(ctx->saved_data["engine"].toInt()));
    engine->OnBlockGrads(static_cast<int>(ctx->saved_data["group"].toInt()), grads);
    return {at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

std::vector<at::Tensor> NodeEngine::BlockParams(int block) {
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

void NodeEngine::OnBlockGrads(int group, const std::vector<at::Tensor>& grads) {
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
    if (grads[k].defined()) rows.narrow(1, sl.off, sl.chunk).copy_(Padded(grads[k], world_, sl.chunk));
  }
  // The first reduction of a step becomes the unit's gradient shard: like
  // zero_grad(set_to_none), no gradient memory exists before backward
  // produces it.
  f.out = at::empty({g.size}, g.shard.options());
  f.h = comm_->ReduceScatterAsync(f.out, f.buf);
  reductions_.push_back(std::move(f));
  while (reductions_.size() > 2) DrainOneReduction();
}

void NodeEngine::DrainOneReduction() {
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

void NodeEngine::Release() {
  if (!sharded_ || !gathered_) return;
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

NodeStepOut NodeEngine::Step(int64_t step) {
  NodeStepOut out;
  const Config& c = s_->cfg();
  const NamedTensors& params = s_->model().Parameters();
  const int accum = std::max(1, c.run.grad_accum);
  const double divisor = static_cast<double>(accum) * data_ranks_;
  const at::Device dev = s_->device();
  s_->set_phase("forward");
  ZeroGrad(params);
  if (sharded_) {
    const auto t0 = Clock::now();
    Release();  // eval may have gathered everything
    GatherUnits(/*blocks=*/false);
    gathered_ = true;
    for (Group& g : groups_) g.grad_written = false;
    s_->model().SetBlockParams([this](int block) { return BlockParams(block); });
    out.comm_exposed_ms += MsSince(t0);
  }
  for (Group& g : groups_) {
    g.launched = false;
    g.remaining = static_cast<int>(g.params.size());
    if (!sharded_ && !g.flat.defined()) g.flat = at::empty({g.size}, params[0].second.options().requires_grad(false));
  }
  for (Slot& sl : slots_) sl.filled = sl.deferred = false;
  const auto tc = Clock::now();
  // Waits inside forward and backward (a block's gather, a reduction past
  // those allowed in flight) stall the compute stream, not the host: timed
  // on the device, they count as exposed communication, not compute.
  comm_->MeasureStreamStalls(true);
  double wait_total = 0;
  at::Tensor loss_sum;
  const int n_local = static_cast<int>(loaders_.size()) * accum;
  int k = 0;
  for (size_t d = 0; d < loaders_.size(); ++d) {
    for (int m = 0; m < accum; ++m, ++k) {
      double wait = 0;
      s_->set_phase("data");
      Result<Batch> b = loaders_[d]->Next(&wait);
      TORCH_CHECK(b.ok(), b.status().ToString());
      wait_total += wait;
      s_->set_phase("forward");
      last_block_ = -1;
      at::Tensor loss = s_->model().Loss(b->x, b->y);
      reduce_now_ = k == n_local - 1;
      if (reduce_now_) out.forward_peak_allocated_bytes = PeakAllocatedSoFar(dev);
      s_->set_phase("backward");
      (loss / divisor).backward();
      reduce_now_ = false;
      at::Tensor l = loss.detach();
      loss_sum = loss_sum.defined() ? loss_sum + l : l;
    }
  }
  Synchronize(dev);
  out.data_wait_ms = wait_total;
  const auto tw = Clock::now();
  comm_->MeasureStreamStalls(false);
  const double stalls = comm_->TakeStreamStallMs();
  out.compute_ms = std::chrono::duration<double, std::milli>(tw - tc).count() - wait_total - stalls;
  out.comm_exposed_ms += stalls;
  s_->set_phase("communication");
  FinishReduction();
  Synchronize(dev);
  out.comm_exposed_ms += MsSince(tw);
  const auto to = Clock::now();
  s_->set_phase("optimizer");
  at::Tensor norm;
  {
    c10::NoGradGuard no_grad;
    if (sharded_) {
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
      norm = sq.sqrt();
      for (Group& g : groups_) g.flat = at::Tensor();
    } else {
      for (size_t i = 0; i < params.size(); ++i) {
        const Slot& sl = slots_[i];
        at::Tensor p = params[i].second;
        p.mutable_grad() = groups_[sl.group].flat.narrow(0, sl.off, sl.numel).view(p.sizes());
      }
      norm = GradNorm(params);
    }
  }
  at::Tensor clip;
  if (c.training.grad_clip > 0) clip = ClipDivisor(norm, c.training.grad_clip);
  out.lr = LearningRate(c.training, step, s_->horizon());
  optim().Step(out.lr, clip);
  if (sharded_) {
    for (auto& [name, v] : shard_views_) v.mutable_grad() = at::Tensor();
    for (Group& g : groups_) g.grad_shard = at::Tensor();  // until the next backward
  }
  at::Tensor loss_all = (loss_sum / divisor).reshape({1}).to(at::kFloat).clone();
  comm_->AllReduce(loss_all);
  Synchronize(dev);
  out.optimizer_ms = MsSince(to);
  out.loss = loss_all.item<double>();
  out.grad_norm = norm.item<double>();
  return out;
}

NamedTensors NodeEngine::ParamShard() {
  NamedTensors out;
  const NamedTensors& params = s_->model().Parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    const Slot& sl = slots_[i];
    if (sharded_) {
      out.emplace_back(params[i].first, groups_[sl.group].shard.narrow(0, sl.off, sl.chunk).contiguous());
    } else {
      out.emplace_back(params[i].first, Padded(params[i].second, world_, sl.chunk)[rank_].contiguous());
    }
  }
  return out;
}

std::map<std::string, NamedTensors> NodeEngine::StateShard() {
  std::map<std::string, NamedTensors> out;
  Optimizer& o = optim();
  const NamedTensors& params = s_->model().Parameters();
  for (const std::string& st : o.StateNames()) {
    NamedTensors& v = out[st];
    for (size_t i = 0; i < params.size(); ++i) {
      const at::Tensor& t = o.State(i, st);
      if (sharded_) {
        v.emplace_back(params[i].first, t.reshape({-1}).contiguous());
      } else {
        v.emplace_back(params[i].first, Padded(t, world_, slots_[i].chunk)[rank_].contiguous());
      }
    }
  }
  return out;
}

Status NodeEngine::LoadFull(const std::map<std::string, at::Tensor>& full,
                            const std::map<std::string, std::map<std::string, at::Tensor>>& states,
                            int64_t optimizer_step) {
  c10::NoGradGuard no_grad;
  const NamedTensors& params = s_->model().Parameters();
  Optimizer& o = optim();
  for (size_t i = 0; i < params.size(); ++i) {
    const std::string& name = params[i].first;
    auto it = full.find(name);
    if (it == full.end()) return Status::Corrupt("checkpoint", "no parameter " + name);
    const Slot& sl = slots_[i];
    const at::Device dev = s_->device();
    if (it->second.numel() != sl.numel) return Status::Corrupt("checkpoint", "size of " + name + " differs");
    if (sharded_) {
      groups_[sl.group].shard.narrow(0, sl.off, sl.chunk).copy_(Padded(it->second.to(dev), world_, sl.chunk)[rank_]);
    } else {
      at::Tensor p = params[i].second;
      p.copy_(it->second.view(p.sizes()));
    }
    for (const std::string& st : o.StateNames()) {
      auto s = states.find(st);
      if (s == states.end() || !s->second.count(name)) {
        return Status::Corrupt("checkpoint", "no optimizer state " + st + " of " + name);
      }
      const at::Tensor& src = s->second.at(name).to(dev);
      at::Tensor& dst = o.State(i, st);
      if (sharded_) {
        dst.view({-1}).copy_(Padded(src, world_, sl.chunk)[rank_]);
      } else {
        dst.copy_(src.view(dst.sizes()));
      }
    }
  }
  o.SetStep(optimizer_step);
  return Status::Ok();
}

}  // namespace pilot::runner
