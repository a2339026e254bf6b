// The node stage's DDP engine: buckets all-reduced during backward.
#include "runner/node/ddp_engine.h"

#include <algorithm>

namespace pilot::runner {

Status DdpEngine::Layout() {
  const NamedTensors& params = s_->model().Parameters();
  const int W = world_;
  const int64_t cap = std::max<int64_t>(1, static_cast<int64_t>(s_->cfg().parallel.bucket_mb) * 1024 * 1024 / 4);
  for (size_t k = params.size(); k-- > 0;) {
    Slot& sl = slots_[k];
    sl.numel = params[k].second.numel();
    sl.chunk = (sl.numel + W - 1) / W;
    if (groups_.empty() || groups_.back().size >= cap) {
      groups_.emplace_back();
      buckets_.push_back(groups_.size() - 1);
    }
    Group& g = groups_.back();
    sl.group = static_cast<int>(groups_.size() - 1);
    sl.off = g.size;
    g.size += sl.numel;
    g.params.push_back(k);
  }
  return Status::Ok();
}

void DdpEngine::BeginStep(NodeStepOut* /*out*/) {
  const NamedTensors& params = s_->model().Parameters();
  for (Group& g : groups_) {
    if (!g.flat.defined()) g.flat = at::empty({g.size}, params[0].second.options().requires_grad(false));
  }
}

void DdpEngine::Pack(Group& g, Slot& sl, const at::Tensor& total) {
  g.flat.narrow(0, sl.off, sl.numel).copy_(total.reshape({-1}));
  sl.filled = true;
}

Comm::Handle DdpEngine::Reduce(Group& g) { return comm_->AllReduceAsync(g.flat); }

at::Tensor DdpEngine::PrepareOptimizer() {
  const NamedTensors& params = s_->model().Parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    const Slot& sl = slots_[i];
    at::Tensor p = params[i].second;
    p.mutable_grad() = groups_[sl.group].flat.narrow(0, sl.off, sl.numel).view(p.sizes());
  }
  return GradNorm(params);
}

at::Tensor DdpEngine::ParamShardOf(size_t i) {
  return PaddedRows(s_->model().Parameters()[i].second, world_, slots_[i].chunk)[rank_].contiguous();
}

at::Tensor DdpEngine::StateShardOf(size_t i, const at::Tensor& state) {
  return PaddedRows(state, world_, slots_[i].chunk)[rank_].contiguous();
}

void DdpEngine::LoadParam(size_t i, const at::Tensor& whole) {
  at::Tensor p = s_->model().Parameters()[i].second;
  p.copy_(whole.view(p.sizes()));
}

void DdpEngine::LoadState(size_t /*i*/, at::Tensor& dst, const at::Tensor& whole) {
  dst.copy_(whole.view(dst.sizes()));
}

}  // namespace pilot::runner
