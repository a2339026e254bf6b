// The node stage's sharded engine (parallel.mode = "sharded"): units of
// parameters of which each rank holds 1/W, gathered around their use and
// reduce-scattered in backward (runner/node/engine.h describes the scheme
// and the step both engines share).
//
// Thread-safety: as NodeEngine.
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "runner/node/engine.h"

namespace pilot::runner {

class ShardedEngine final : public NodeEngine {
 public:
  ~ShardedEngine() override;

  void Gather() override;
  void Release() override;
  std::vector<int64_t> Shape(size_t i) const override;
  Optimizer& optim() override { return *shard_optim_; }

 private:
  struct InFlight {
    int group = 0;
    Comm::Handle h;
    at::Tensor buf;   // all-gather: W * size; reduce-scatter: the packed gradients
    at::Tensor out;   // reduce-scatter: this rank's part
  };
  friend struct GatherBlock;

  // One unit per transformer block and one for the rest, each rank's
  // master weights and optimizer over its shards.
  Status Layout() override;
  void BeginStep(NodeStepOut* out) override;
  void BeginMicroBatch() override { last_block_ = -1; }
  bool TakeGrad(Group& g, Slot& sl) override;
  void Pack(Group& g, Slot& sl, const at::Tensor& total) override;
  Comm::Handle Reduce(Group& g) override;
  void FinishReduction() override;
  at::Tensor PrepareOptimizer() override;
  void AfterOptimizer() override;
  at::Tensor ParamShardOf(size_t i) override;
  at::Tensor StateShardOf(size_t i, const at::Tensor& state) override;
  void LoadParam(size_t i, const at::Tensor& whole) override;
  void LoadState(size_t i, at::Tensor& dst, const at::Tensor& whole) override;

  // All-gathers the rest unit (and the blocks' units when `blocks`) into
  // the model's own tensors.
  void GatherUnits(bool blocks);
  void LaunchGather(int group);
  // The model's provider of a block's parameters (Model::SetBlockParams).
  std::vector<at::Tensor> BlockParams(int block);
  void OnBlockGrads(int group, const std::vector<at::Tensor>& grads);
  void DrainOneReduction();

  std::vector<std::vector<int64_t>> shapes_;  // parameter shapes
  NamedTensors shard_views_;  // the optimizer's tensors
  std::unique_ptr<Optimizer> shard_optim_;
  bool gathered_ = true;
  std::vector<int> block_group_;          // block -> group
  std::map<int, InFlight> gathers_;       // group -> all-gather in flight
  std::vector<InFlight> reductions_;      // block reduce-scatters in flight
  int last_block_ = -1;                   // direction of travel for prefetch
  // Reused buffers (sized for the largest block unit): two for all-gathers
  // (the one in use and the prefetch), three for reduce-scatters (two in
  // flight and the one being packed). A collective holds its tensors until
  // it is waited for (Comm keeps only its timing after that). Each kind
  // exists only while the step uses it: the gather buffers from the first
  // block's gather to the last block's forward (to the end of backward with
  // activation checkpointing, whose recomputation gathers again), the
  // reduce-scatter ones from the first reduction to the end of backward. So
  // the loss and the start of backward, where the activations peak, hold
  // neither.
  std::vector<at::Tensor> gather_bufs_, rs_bufs_;
  int64_t gather_next_ = 0, rs_next_ = 0;
  int64_t unit_numel_ = 0;  // W * the largest block unit's shard
  at::Tensor graph_anchor_;               // puts gathered blocks in the graph
};

}  // namespace pilot::runner
