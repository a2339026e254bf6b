// The node stage's data-parallel engine (parallel.mode = "ddp"): whole
// replicas, gradients all-reduced in buckets while backward runs (see
// runner/node/engine.h for the step they share).
//
// Thread-safety: as NodeEngine.
#pragma once

#include "runner/node/engine.h"

namespace pilot::runner {

class DdpEngine final : public NodeEngine {
 private:
  // Buckets of parallel.bucket_mb, parameters in reverse order (the order
  // backward produces their gradients).
  Status Layout() override;
  void BeginStep(NodeStepOut* out) override;
  void Pack(Group& g, Slot& sl, const at::Tensor& total) override;
  Comm::Handle Reduce(Group& g) override;
  at::Tensor PrepareOptimizer() override;
  at::Tensor ParamShardOf(size_t i) override;
  at::Tensor StateShardOf(size_t i, const at::Tensor& state) override;
  void LoadParam(size_t i, const at::Tensor& whole) override;
  void LoadState(size_t i, at::Tensor& dst, const at::Tensor& whole) override;
};

}  // namespace pilot::runner
