// Step time at another shape: how long one optimizer step of the pilot's
// workload takes, on the GPU type it ran on, at a sequence length,
// micro-batch, accumulation and activation-checkpointing setting it may
// not have run. ProjectThroughput (core/models/throughput.h) then moves the result
// to other GPU types; MakePlan (core/models/plan.h) uses both for what-ifs.
//
// The model, per optimizer step (every term from the pilot's results.json):
//   step(q)  = data wait(q) + A_q x T(q) + optimizer + rest
//   T(q)     = alpha + beta x n_q x f(S_q) / f(S_p) x R(q)
//              one micro-batch's forward and backward, n = micro_batch x
//              seq_len tokens in it;
//   f(S)     = 6 N + 6 L d S    FLOPs per trained token: the matrix products
//              (6 N) and causal attention's score and value products, which
//              grow with the sequence: a token attends to S/2 positions on
//              average, 2 d FLOPs each for scores and values, x3 with the
//              backward pass. (The MFU convention, 12 L d S in results'
//              flops_per_token, counts the masked half too; measured on an
//              H200, step time follows the causal count);
//   alpha, beta  a line through two micro-batches the pilot timed at its
//              own seq_len and checkpointing setting (the steady steps, the
//              memory calibration's half micro-batch and its steps at
//              micro-batch 1): alpha is what a micro-batch costs whatever
//              its size (launches, small-matrix inefficiency), beta the cost
//              of a token's FLOPs. With three points, the line is the
//              segment whose range holds the query's work (n x f(S_q) /
//              f(S_p)), extended past the ends: a micro-batch too small to
//              fill the device costs more per token than one that does, so
//              one line through the two largest misses the small ones. With
//              one point, alpha = 0 (time proportional to the work) and the
//              estimate says so;
//   R(q)     = 1 at the pilot's checkpointing setting; turning it on
//              multiplies by (1 + the measured cost of recomputing),
//              turning it off divides by it. The cost: the ratio of the two
//              memory calibrations' forward and backward (same smaller
//              micro-batch, one per setting), else the recompute check's
//              two step times less what they share; without either the
//              cost of one more forward pass, 1/3 of forward + backward;
//   optimizer  the pilot's optimizer time (per step, shape-independent);
//   rest       step time not in data wait, forward/backward or optimizer;
//   data wait  the pilot's wait per token times the query's tokens per step.
// The pilot's own shape reproduces its measured step time exactly.
//
// Thread-safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/models/memory_model.h"
#include "core/records/results.h"

namespace pilot {

// The step-time measurements of one pilot (its single stage).
struct StepTimeBasis {
  int seq_len = 0;
  int micro_batch = 0;
  int grad_accum = 1;
  bool activation_checkpointing = false;
  double step_ms = 0;              // whole optimizer step
  double data_wait_ms = 0;         // per optimizer step
  double forward_backward_ms = 0;  // all micro-batches of one step
  double optimizer_ms = 0;
  // A second micro-batch size timed at the same seq_len and checkpointing
  // setting: forward and backward of one micro-batch, milliseconds.
  std::optional<int> second_micro_batch;
  std::optional<double> second_forward_backward_ms;
  // Micro-batch 1 timed the same way (memory_calibration_smallest).
  std::optional<int> smallest_micro_batch;
  std::optional<double> smallest_forward_backward_ms;
  // The recompute check: forward and backward with / without activation
  // checkpointing - 1 (0.35 = recomputing costs 35% more), from the check's
  // two step times less the part of the step they share.
  std::optional<double> recompute_cost_fraction;
  // The recompute check's two step times (ms), for the assumptions.
  std::optional<double> recompute_step_ms_with;
  std::optional<double> recompute_step_ms_without;
  // When memory_calibration and memory_calibration_other both timed one
  // micro-batch (the same size, one setting each), the cost comes from
  // them instead: their micro-batch and forward/backward times (ms).
  std::optional<int> recompute_calibration_micro_batch;
  std::optional<double> recompute_calibration_ms_with;
  std::optional<double> recompute_calibration_ms_without;
};

// The basis of a finished single stage. The second micro-batch comes from
// the memory calibration when it ran ("ok") and timed its step, the
// smallest from memory_calibration_smallest likewise; the
// recompute cost from the two memory calibrations (one per checkpointing
// setting, the same micro-batch) when both timed theirs, else from the
// recompute check when it ran with both timings.
StepTimeBasis StepTimeBasisFrom(const SingleStage& s);

// The shape to estimate.
struct StepShape {
  int seq_len = 0;
  int micro_batch = 0;
  int grad_accum = 1;
  bool activation_checkpointing = false;
};

struct StepTimeEstimate {
  double step_ms = 0;              // compute_ms + data_wait_ms
  double compute_ms = 0;           // step without data wait
  double data_wait_ms = 0;
  double forward_backward_ms = 0;  // all micro-batches
  double alpha_ms = 0;             // per micro-batch, whatever its size
  double recompute_factor = 1;     // R(q)
  double tokens_per_step = 0;
  // The measurements and assumptions this estimate rests on, for people
  // ("pilot's step: 297 ms at ...", "micro-batch efficiency from
  // micro-batches 8 (250.0 ms) and 4 (130.0 ms): 10.0 ms fixed per
  // micro-batch").
  std::vector<std::string> assumptions;
};

// The basis measured at `from`'s depth moved to `to`'s (a sharded run's
// single stage at reduced depth): forward and backward (both timed
// micro-batches) in proportion to the FLOPs per token at the pilot's
// seq_len, the optimizer to the parameters; data wait and the rest stay.
// The recompute check's step times move with forward and backward.
StepTimeBasis ScaleBasisToDepth(const StepTimeBasis& b, const Workload& from, const Workload& to);

// f(S) above: FLOPs of one trained token at sequence length `seq_len`
// (causal attention).
double FlopsPerTokenAt(const Workload& w, int seq_len);

// REQUIRES: b.seq_len, b.micro_batch > 0 and q.seq_len, q.micro_batch > 0.
// A basis without timings (step_ms <= 0), or with one that is not a finite,
// non-negative number, gives an estimate of zeros (callers then keep the
// pilot's own per-token rate); a second point or recompute cost that is not
// finite is left out, as if not measured.
StepTimeEstimate EstimateStepTime(const StepTimeBasis& b, const Workload& w, const StepShape& q);

}  // namespace pilot
