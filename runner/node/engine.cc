// The node stage's distributed step, common to both engines.
#include "runner/node/engine.h"

#include <c10/core/GradMode.h>

#include <algorithm>
#include <chrono>

#include "runner/node/ddp_engine.h"
#include "runner/node/sharded_engine.h"
#include "runner/train/device.h"

namespace pilot::runner {
namespace {

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

}  // namespace

at::Tensor PaddedRows(const at::Tensor& t, int world, int64_t chunk) {
  at::Tensor flat = t.detach().reshape({-1});
  const int64_t pad = world * chunk - flat.numel();
  if (pad > 0) flat = at::cat({flat, at::zeros({pad}, flat.options())});
  return flat.view({world, chunk});
}

NodeEngine::~NodeEngine() { loaders_.clear(); }

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
  std::unique_ptr<NodeEngine> e;
  if (mode == "sharded") {
    e = std::make_unique<ShardedEngine>();
  } else {
    e = std::make_unique<DdpEngine>();
  }
  e->s_ = s;
  e->comm_ = comm;
  e->mode_ = mode;
  e->data_ranks_ = data_ranks;
  e->world_ = comm->world();
  e->rank_ = comm->rank();
  for (int d = e->rank_; d < data_ranks; d += e->world_) e->mine_.push_back(d);
  const NamedTensors& params = s->model().Parameters();
  e->slots_.resize(params.size());
  PILOT_RETURN_IF_ERROR(e->Layout());
  NodeEngine* self = e.get();
  for (size_t i = 0; i < params.size(); ++i) {
    at::Tensor p = params[i].second;
    p.register_hook([self, i](const at::Tensor& grad) { self->OnGrad(i, grad); });
  }
  return e;
}

std::vector<int64_t> NodeEngine::Shape(size_t i) const { return s_->model().Parameters()[i].second.sizes().vec(); }

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
  if (TakeGrad(g, sl)) return;
  const at::Tensor& p = s_->model().Parameters()[i].second;
  Pack(g, sl, p.grad().defined() ? p.grad() + grad : grad);
  if (--g.remaining == 0) Launch(g);
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
  g.h = Reduce(g);
}

// Launches what backward did not complete (parameters without gradients:
// zeros or what was accumulated) and waits for every reduction. A block
// unit's reductions (sharded) come from its own backward, not from here.
void NodeEngine::FinishReduction() {
  c10::NoGradGuard no_grad;
  for (Group& g : groups_) {
    if (g.block >= 0 || g.launched) continue;
    // Launch packs what backward left (the parameter's .grad, or zeros).
    for (size_t i : g.params) {
      if (!slots_[i].filled) slots_[i].deferred = true;
    }
    Launch(g);
  }
  comm_->WaitAll();
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
  BeginStep(&out);
  for (Group& g : groups_) {
    g.launched = false;
    g.remaining = static_cast<int>(g.params.size());
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
      BeginMicroBatch();
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
    norm = PrepareOptimizer();
  }
  at::Tensor clip;
  if (c.training.grad_clip > 0) clip = ClipDivisor(norm, c.training.grad_clip);
  out.lr = LearningRate(c.training, step, s_->horizon());
  optim().Step(out.lr, clip);
  AfterOptimizer();
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
  for (size_t i = 0; i < params.size(); ++i) out.emplace_back(params[i].first, ParamShardOf(i));
  return out;
}

std::map<std::string, NamedTensors> NodeEngine::StateShard() {
  std::map<std::string, NamedTensors> out;
  Optimizer& o = optim();
  const NamedTensors& params = s_->model().Parameters();
  for (const std::string& st : o.StateNames()) {
    NamedTensors& v = out[st];
    for (size_t i = 0; i < params.size(); ++i) v.emplace_back(params[i].first, StateShardOf(i, o.State(i, st)));
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
    LoadParam(i, it->second);
    for (const std::string& st : o.StateNames()) {
      auto s = states.find(st);
      if (s == states.end() || !s->second.count(name)) {
        return Status::Corrupt("checkpoint", "no optimizer state " + st + " of " + name);
      }
      const at::Tensor& src = s->second.at(name).to(dev);
      LoadState(i, o.State(i, st), src);
    }
  }
  o.SetStep(optimizer_step);
  return Status::Ok();
}

}  // namespace pilot::runner
