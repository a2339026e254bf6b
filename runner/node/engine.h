// The node stage's training step across ranks: data-parallel replicas
// (DDP) or sharded parameters, gradients and optimizer state.
//
// Global batch: the data is split into D "data ranks" (D = parallel.nproc,
// the world size the stage is configured for). A run with W processes
// (W divides D) gives process r the data ranks r, r + W, ...; each one's
// micro-batches are accumulated. The global batch of a step is therefore
// the same at every world size, which is what makes a single process with
// D data ranks the reference for the losses, and a checkpoint restorable at
// another world size with the same trajectory.
//
// Two engines share this base (NodeEngine::Create picks one from
// parallel.mode): the base owns the step (data, forward, backward, the
// reductions' bookkeeping, clipping, the optimizer step and the loss), and
// each engine the layout of the gradients and what differs around it.
//
// ddp      (ddp_engine.h) every rank holds the whole model and optimizer.
//          A hook on each parameter copies its gradient into a bucket
//          (parameters in reverse order, parallel.bucket_mb each) during
//          the last micro-batch's backward; a full bucket is all-reduced at once, so
//          communication overlaps the rest of the backward pass.
// sharded  (sharded_engine.h) parameters are grouped into units (one per
//          transformer block, one for the rest). Each unit is a flat
//          buffer of which rank r holds 1/W (its "shard"): master weights and optimizer state
//          exist only as shards; a unit's gradient shard exists from its
//          first reduction in a step until the optimizer step (as with
//          zero_grad(set_to_none), nothing before backward). The rest unit is
//          all-gathered into the model's tensors at the start of a step.
//          A block's unit is all-gathered just before the block runs (the
//          next block's gather is launched first, so it overlaps this
//          block's compute) into tensors that are freed once the block's
//          forward is done; what backward needs of them is what autograd
//          saved (the compute-dtype copies the matrix products use, the
//          norm weights). When backward reaches the block, its gradients
//          are packed and reduce-scattered asynchronously, and added to the
//          unit's gradient shard (at most two in flight). This is the
//          FSDP pattern with reshard-after-forward, fp32 gather and reduce,
//          no backward re-gather (the saved copies stand in for it), and
//          every micro-batch reduced (no local accumulation of full
//          gradients); with activation checkpointing the recomputation
//          gathers the block again.
//
// Thread-safety: one thread; gradient hooks run on autograd's thread while
// Step() waits in backward().
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/base/status.h"
#include "runner/node/comm.h"
#include "runner/train/data.h"
#include "runner/train/inputs.h"
#include "runner/train/model.h"
#include "runner/train/optim.h"
#include "runner/train/session.h"

namespace pilot::runner {

struct NodeStepOut {
  double loss = 0;          // mean over the global batch
  double grad_norm = 0;     // global, before clipping
  double lr = 0;
  double data_wait_ms = 0;
  double compute_ms = 0;    // forward + backward (host clock, synchronised)
  double comm_exposed_ms = 0;  // waiting for collectives with nothing else to do
  double optimizer_ms = 0;
  // The allocator's peak allocated bytes when the last micro-batch's
  // forward pass (loss included) had been issued: with the peak reset
  // before the step, where the step's peak lies. CUDA only.
  std::optional<int64_t> forward_peak_allocated_bytes;
};

class NodeEngine {
 public:
  // The engine of `mode` ("ddp" or "sharded"). `s` holds the model (built
  // from the seed: identical on every rank) and the config; `s` and `comm`
  // must outlive the engine. Errors: kInvalid (mode, D not a multiple of
  // the world size, fp16).
  static Result<std::unique_ptr<NodeEngine>> Create(Session* s, Comm* comm, const std::string& mode,
                                                    int data_ranks);
  virtual ~NodeEngine();

  // Loaders for this rank's data ranks over optimizer steps [first, last].
  Status OpenData(const Pins& pins, int64_t first, int64_t last);

  // One optimizer step (1-based). Collective: every rank calls it.
  // Throws c10::Error on a failed collective.
  NodeStepOut Step(int64_t step);

  // Makes the model's parameters whole (sharded: all-gather; ddp: no-op)
  // for eval or a comparison; Release() frees them again (sharded).
  virtual void Gather() {}
  virtual void Release() {}

  // This rank's part of every parameter and optimizer state for a
  // checkpoint at the current world size: names as in the model,
  // 1-D tensors of Chunk(i) elements (zero padded past the end).
  NamedTensors ParamShard();
  std::map<std::string, NamedTensors> StateShard();  // state name -> tensors
  // Loads whole parameters and states (name -> full tensor of the
  // parameter's shape) and the optimizer step counter.
  Status LoadFull(const std::map<std::string, at::Tensor>& params,
                  const std::map<std::string, std::map<std::string, at::Tensor>>& states,
                  int64_t optimizer_step);

  int64_t Chunk(size_t i) const { return slots_[i].chunk; }
  int64_t Numel(size_t i) const { return slots_[i].numel; }
  // The parameter's shape (also while a sharded parameter is released).
  virtual std::vector<int64_t> Shape(size_t i) const;
  const NamedTensors& Parameters() const { return s_->model().Parameters(); }
  // The optimizer over what this rank updates (ddp: the session's).
  virtual Optimizer& optim() { return s_->optim(); }
  int data_ranks() const { return data_ranks_; }
  int local_data_ranks() const { return static_cast<int>(mine_.size()); }
  // Tokens this rank processes per optimizer step.
  int64_t TokensPerRankStep() const;
  const std::string& mode() const { return mode_; }
  int units() const { return static_cast<int>(units_.size()); }
  int buckets() const { return static_cast<int>(buckets_.size()); }

 protected:
  struct Slot {
    int64_t numel = 0, chunk = 0, off = 0;  // off: in the unit's shard / the bucket
    int group = 0;                          // unit or bucket
    bool filled = false;
    bool deferred = false;  // packed from .grad (or zeros) at Launch
  };
  struct Group {
    std::vector<size_t> params;
    int64_t size = 0;       // ddp: bucket elements; sharded: shard elements
    at::Tensor shard;       // sharded: master weights (size)
    at::Tensor flat;        // ddp: bucket; sharded: full gradient (W * size)
    at::Tensor grad_shard;  // sharded: from the first reduction of a step to the optimizer
    int remaining = 0;
    bool launched = false;
    Comm::Handle h;
    int block = -1;           // sharded: the transformer block, -1 the rest
    bool grad_written = false;  // sharded block: grad_shard holds this step's sum
  };

  NodeEngine() = default;

  // The engine's layout of slots_ into groups_ (and its own state), once
  // after the common fields are set. Errors end Create().
  virtual Status Layout() = 0;
  // Before a step's first forward pass; may add to the exposed
  // communication.
  virtual void BeginStep(NodeStepOut* /*out*/) {}
  // Before each micro-batch's forward pass.
  virtual void BeginMicroBatch() {}
  // A gradient hook's turn, before the gradient is packed: true when the
  // engine takes it over (defers it).
  virtual bool TakeGrad(Group& /*g*/, Slot& /*sl*/) { return false; }
  // Copies a parameter's whole gradient into its group's buffer and marks
  // it filled.
  virtual void Pack(Group& g, Slot& sl, const at::Tensor& total) = 0;
  // Starts the group's reduction once its gradients are packed.
  virtual Comm::Handle Reduce(Group& g) = 0;
  // Completes the step's reductions: launches what backward did not
  // (parameters without gradients) and waits for all.
  virtual void FinishReduction();
  // Points the optimizer's tensors at the reduced gradients; returns the
  // global gradient norm (before clipping).
  virtual at::Tensor PrepareOptimizer() = 0;
  virtual void AfterOptimizer() {}
  // This rank's part of parameter i / of one of its optimizer states, and
  // the reverse for a restore from whole tensors (on the device).
  virtual at::Tensor ParamShardOf(size_t i) = 0;
  virtual at::Tensor StateShardOf(size_t i, const at::Tensor& state) = 0;
  virtual void LoadParam(size_t i, const at::Tensor& whole) = 0;
  virtual void LoadState(size_t i, at::Tensor& dst, const at::Tensor& whole) = 0;

  void OnGrad(size_t i, const at::Tensor& g);
  void Launch(Group& g);

  Session* s_ = nullptr;
  Comm* comm_ = nullptr;
  std::string mode_;
  int data_ranks_ = 1, world_ = 1, rank_ = 0;
  std::vector<int> mine_;
  std::vector<Slot> slots_;
  std::vector<Group> groups_;
  std::vector<size_t> units_, buckets_;  // indices into groups_ (for counts)
  std::vector<std::shared_ptr<TokenSource>> sources_;
  std::vector<std::unique_ptr<Loader>> loaders_;
  bool reduce_now_ = false;
};

// The (W, chunk) zero-padded view of a whole tensor's elements.
at::Tensor PaddedRows(const at::Tensor& t, int world, int64_t chunk);

}  // namespace pilot::runner
