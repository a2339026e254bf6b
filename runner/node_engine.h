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
// ddp      every rank holds the whole model and optimizer. A hook on each
//          parameter copies its gradient into a bucket (parameters in
//          reverse order, parallel.bucket_mb each) during the last
//          micro-batch's backward; a full bucket is all-reduced at once, so
//          communication overlaps the rest of the backward pass.
// sharded  parameters are grouped into units (one per transformer block,
//          one for the rest). Each unit is a flat buffer of which rank r
//          holds 1/W (its "shard"): master weights and optimizer state
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

#include "core/status.h"
#include "runner/data.h"
#include "runner/dist_comm.h"
#include "runner/optim.h"
#include "runner/session.h"

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
  // `s` holds the model (built from the seed: identical on every rank) and
  // the config. Errors: kInvalid (mode, D not a multiple of the world size,
  // fp16).
  static Result<std::unique_ptr<NodeEngine>> Create(Session* s, Comm* comm, const std::string& mode,
                                                    int data_ranks);
  ~NodeEngine();

  // Loaders for this rank's data ranks over optimizer steps [first, last].
  Status OpenData(const Pins& pins, int64_t first, int64_t last);

  // One optimizer step (1-based). Collective: every rank calls it.
  // Throws c10::Error on a failed collective.
  NodeStepOut Step(int64_t step);

  // Makes the model's parameters whole (sharded: all-gather; ddp: no-op)
  // for eval or a comparison; Release() frees them again (sharded).
  void Gather();
  void Release();

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
  std::vector<int64_t> Shape(size_t i) const;
  const NamedTensors& Parameters() const { return s_->model().Parameters(); }
  Optimizer& optim();
  int data_ranks() const { return data_ranks_; }
  int local_data_ranks() const { return static_cast<int>(mine_.size()); }
  // Tokens this rank processes per optimizer step.
  int64_t TokensPerRankStep() const;
  const std::string& mode() const { return mode_; }
  int units() const { return static_cast<int>(units_.size()); }
  int buckets() const { return static_cast<int>(buckets_.size()); }

 private:
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
  struct InFlight {
    int group = 0;
    Comm::Handle h;
    at::Tensor buf;   // all-gather: W * size; reduce-scatter: the packed gradients
    at::Tensor out;   // reduce-scatter: this rank's part
  };
  NodeEngine() = default;
  void OnGrad(size_t i, const at::Tensor& g);
  // Copies a parameter's whole gradient into its group's buffer (sharded:
  // its padded column block) and marks it filled.
  void Pack(Group& g, Slot& sl, const at::Tensor& total);
  void Launch(Group& g);
  void FinishReduction();
  // sharded, per block (see the file comment).
  void GatherUnits(bool blocks);
  void LaunchGather(int group);
  std::vector<at::Tensor> BlockParams(int block);
  friend struct GatherBlock;
  void OnBlockGrads(int group, const std::vector<at::Tensor>& grads);
  void DrainOneReduction();

  Session* s_ = nullptr;
  Comm* comm_ = nullptr;
  std::string mode_;
  bool sharded_ = false;
  int data_ranks_ = 1, world_ = 1, rank_ = 0;
  std::vector<int> mine_;
  std::vector<Slot> slots_;
  std::vector<Group> groups_;
  std::vector<size_t> units_, buckets_;  // indices into groups_ (for counts)
  std::vector<std::vector<int64_t>> shapes_;  // sharded: parameter shapes
  NamedTensors shard_views_;  // sharded: optimizer's tensors
  std::unique_ptr<Optimizer> shard_optim_;
  std::vector<std::shared_ptr<TokenSource>> sources_;
  std::vector<std::unique_ptr<Loader>> loaders_;
  bool reduce_now_ = false;
  bool gathered_ = true;
  std::vector<int> block_group_;          // sharded: block -> group
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
