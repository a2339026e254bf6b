// The measured choices (seed: "validate numerical behaviour for lower
// precision; measure the compute cost of recomputing activations"), a
// second micro-batch for the memory model and the cost of the runner's own
// measurements. Each check starts from the saved
// checkpoint (so it sees the state the reference saw after step K) and runs
// a few steps in the same process after the reference trajectory is done.
#include "runner/single/checks.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <vector>

#include "core/base/strings.h"
#include "runner/ckpt/checkpoint.h"
#include "runner/train/alloc_trace.h"
#include "runner/train/device.h"
#include "runner/train/format.h"
#include "runner/train/session.h"

namespace pilot::runner {
namespace {

constexpr double kPrecisionThreshold = 0.05;  // relative loss divergence

// Restores the checkpoint into the live session (weights, optimizer, RNG).
Status Reload(Session& s, const std::string& ckpt) {
  Result<TrainState> ts = LoadCheckpoint(ckpt, &s.model(), &s.optim(), RestoreSkips{}, nullptr);
  if (!ts.ok()) return ts.status();
  if (s.compute_dtype() == at::kHalf) {
    s.scaler().scale = ts->scaler.scale;
    s.scaler().growth_tracker = ts->scaler.growth_tracker;
  }
  return Status::Ok();
}

// After an out-of-memory inside a check: drop what the failed step held.
void Recover(Session& s) {
  ZeroGrad(s.model().Parameters());
  ReleaseCachedMemory(s.device());
}

std::optional<int64_t> PeakOf(const MemoryStats& m) {
  return m.peak_allocated_bytes ? m.peak_allocated_bytes : m.process_peak_rss_bytes;
}

void PrecisionCheckRun(Session& s, const std::string& ckpt, const std::vector<StepRecord>& ref,
                       SingleStage* st, FILE* metrics) {
  const Config& c = s.cfg();
  PrecisionCheck& p = st->precision_check;
  p.precision = c.training.precision;
  p.threshold = kPrecisionThreshold;
  const int64_t at = c.checkpoint.at_step;
  const int64_t k = std::min<int64_t>(c.training.precision_check_steps, c.training.steps - at);
  if (c.training.precision == "fp32" || k <= 0) {
    p.detail = c.training.precision == "fp32" ? "fp32 run: nothing to compare" : "no steps asked for";
    return;
  }
  const at::ScalarType saved = s.compute_dtype();
  try {
    Status r = Reload(s, ckpt);
    if (!r.ok()) {
      p.detail = r.Message();
      return;
    }
    s.SetComputeDtype(at::kFloat);
    LoopHooks hooks;
    hooks.process = "precision_check";
    hooks.warmup = 0;
    std::vector<StepRecord> recs;
    r = RunSteps(s, at + 1, at + k, hooks, &recs, metrics);
    s.SetComputeDtype(saved);
    if (!r.ok()) {
      p.detail = r.Message();
      return;
    }
    p.ran = true;
    p.steps = static_cast<int>(recs.size());
    for (const auto& rec : recs) {
      const double low = ref[rec.step - 1].loss;
      p.max_abs_loss_diff = std::max(p.max_abs_loss_diff, std::fabs(low - rec.loss));
      p.max_rel_loss_diff = std::max(p.max_rel_loss_diff, RelDiff(low, rec.loss));
    }
    p.within = p.max_rel_loss_diff <= p.threshold;
    std::fprintf(stderr, "pilot: single: precision check: %s vs fp32 over %d steps: max rel loss diff %.3g (%s %.3g)\n",
                 p.precision.c_str(), p.steps, p.max_rel_loss_diff, p.within ? "within" : "OVER",
                 p.threshold);
  } catch (const std::exception& e) {
    s.SetComputeDtype(saved);
    Recover(s);
    p.ran = true;
    p.within = false;
    p.detail = IsOutOfMemory(e) ? "fp32 steps do not fit in device memory" : std::string(e.what()).substr(0, 300);
  }
}

// Activation checkpointing, the other way: k steps from the checkpoint at
// the setting the pilot did not use, so both are measured at the run's
// shape. With it on in the pilot, the steps run without it (when they fit):
// the recompute cost and the memory it saves. With it off, they run with
// it: what it would save and cost, and the memory model's point for
// predicting the checkpointed layout. The allocator's cached blocks are
// released first so the reserved peak belongs to the check's setting; the
// last step is measured (the ones before it are timed).
void RecomputeCheckRun(Session& s, const std::string& ckpt, SingleStage* st, FILE* metrics) {
  const Config& c = s.cfg();
  RecomputeCheck& rc = st->recompute_check;
  const int64_t at = c.checkpoint.at_step;
  const int64_t k = std::min<int64_t>(c.training.recompute_check_steps, c.training.steps - at);
  const bool on = c.training.activation_checkpointing;  // the pilot's setting
  if (k <= 0) {
    rc.detail = "no steps asked for";
    return;
  }
  rc.ran = true;
  rc.steps = static_cast<int>(k);
  rc.measured = on ? "without" : "with";
  (on ? rc.step_ms_with : rc.step_ms_without) = st->timings.step_ms;
  (on ? rc.peak_bytes_with : rc.peak_bytes_without) = PeakOf(st->memory);
  std::optional<int64_t>& check_peak = on ? rc.peak_bytes_without : rc.peak_bytes_with;
  try {
    Status r = Reload(s, ckpt);
    if (!r.ok()) {
      rc.detail = r.Message();
      return;
    }
    ReleaseCachedMemory(s.device());
    s.model().SetActivationCheckpointing(!on);
    NoteAllocTrace("recompute_check");
    const bool recording = StartAllocRecording(s.device());
    LoopHooks hooks;
    hooks.process = "recompute_check";
    // The steps after a cached-memory release map device memory again:
    // two warm-up steps when there are enough left to time one.
    hooks.warmup = k >= 4 ? 2 : 1;
    hooks.measure = {at + k};
    hooks.on_memory = [&](int64_t, const MemoryStats& m) {
      check_peak = PeakOf(m);
      rc.peak_reserved_bytes = m.peak_reserved_bytes;
    };
    std::vector<StepRecord> recs;
    r = RunSteps(s, at + 1, at + k, hooks, &recs, metrics);
    s.model().SetActivationCheckpointing(on);
    if (!r.ok()) {
      StopAllocRecording();
      rc.detail = r.Message();
      return;
    }
    if (recording) {
      KeepAllocRecording("recompute_check", c.training.micro_batch, c.training.seq_len, c.run.grad_accum, !on,
                         false, &st->allocator_requests);
    }
    rc.fits_without = true;
    double sum = 0;
    int n = 0;
    for (const auto& rec : recs) {
      if (rec.timed) {
        sum += rec.step_ms;
        ++n;
      }
    }
    (on ? rc.step_ms_without : rc.step_ms_with) = n ? sum / n : recs.back().step_ms;
    rc.cost_fraction = rc.step_ms_without > 0 ? rc.step_ms_with / rc.step_ms_without - 1.0 : 0.0;
    if (rc.peak_bytes_with && rc.peak_bytes_without) {
      rc.memory_saved_bytes = *rc.peak_bytes_without - *rc.peak_bytes_with;
    }
    std::fprintf(stderr,
                 "pilot: single: recompute check: %.0f ms with activation checkpointing, %.0f ms without "
                 "(%+.1f%%); peak %s with, %s without\n",
                 rc.step_ms_with, rc.step_ms_without, 100.0 * rc.cost_fraction,
                 rc.peak_bytes_with ? FormatBytes(static_cast<double>(*rc.peak_bytes_with)).c_str() : "n/a",
                 rc.peak_bytes_without ? FormatBytes(static_cast<double>(*rc.peak_bytes_without)).c_str()
                                       : "n/a");
  } catch (const std::exception& e) {
    StopAllocRecording();
    s.model().SetActivationCheckpointing(on);
    Recover(s);
    const bool oom = IsOutOfMemory(e);
    rc.fits_without = !on;
    rc.detail = oom ? std::string("steps ") + (on ? "without" : "with") +
                          " activation checkpointing do not fit in device memory"
                    : std::string(e.what()).substr(0, 300);
  }
}

// The memory model's second point (core/models/memory_model.h, "calibrated"): a
// few steps at `micro_batch` (about half the run's), with the run's seq_len, precision
// and activation checkpointing, from the checkpoint state. The last step is
// measured like the steady step (synchronise, reset the peak, step,
// synchronise, read); cached blocks are released first so that the reserved
// and device figures belong to the smaller shape. Batches come from the
// session's data viewed at the smaller micro-batch, still a pure function of
// (seed, step, rank). A micro-batch of 1 has no smaller one at the same
// seq_len (the calibration varies the micro-batch only): skipped. On a CPU
// the allocator figures do not exist; the process's peak resident set is
// recorded as such. The forward and backward of the steps after the first
// are timed (the step-time model's second point, core/models/step_time.h). The
// session keeps its dtype; `checkpointing` is the setting the steps run
// at (the pilot's, or for memory_calibration_other the one its recompute
// check measured), restored afterwards; its weights are whatever the steps
// left (the checks after this one either reload the checkpoint or do not
// depend on them). The same steps at micro-batch 1 give the step-time model
// its point where a micro-batch is too small to fill the device.
void MemoryCalibrationRun(Session& s, const std::string& ckpt, int micro_batch, bool checkpointing,
                          const std::optional<int64_t>& peak, MemoryCalibrationCheck& mc,
                          const char* record_as = nullptr, std::vector<AllocRecording>* recordings = nullptr) {
  const Config& c = s.cfg();
  mc.seq_len = c.training.seq_len;
  mc.activation_checkpointing = checkpointing;
  // The session's setting comes back on every way out of this function.
  struct RestoreCheckpointing {
    Model& model;
    bool saved;
    ~RestoreCheckpointing() { model.SetActivationCheckpointing(saved); }
  } restore{s.model(), s.model().ActivationCheckpointing()};
  const int k = c.training.memory_calibration_steps;
  if (k <= 0 || c.training.micro_batch <= 1) {
    mc.status = "skipped";
    mc.detail = k <= 0 ? "no steps asked for"
                       : "micro_batch is 1: no smaller micro-batch at the same seq_len";
    return;
  }
  mc.micro_batch = micro_batch;
  const at::Device& dev = s.device();
  const int64_t at = c.checkpoint.at_step;
  const int64_t accum = std::max(1, c.run.grad_accum);
  try {
    Status r = Reload(s, ckpt);
    if (!r.ok()) {
      mc.status = "error";
      mc.detail = r.Message();
      return;
    }
    Synchronize(dev);
    ReleaseCachedMemory(dev);
    s.model().SetActivationCheckpointing(checkpointing);
    NoteAllocTrace("memory_calibration micro_batch " + std::to_string(mc.micro_batch));
    const bool recording = record_as != nullptr && StartAllocRecording(dev);
    Loader loader(TokenSource::WithMicroBatch(s.data(), mc.micro_batch), at * accum,
                  (at + k) * accum, c.data.loader_threads, c.data.prefetch, dev);
    // Forward and backward of the steps after the first (which meets cold
    // caches at the new shape), for the step-time model's second point.
    // Read after the loop, so that the host keeps its lead meanwhile.
    std::vector<std::unique_ptr<StepTimer>> timers;
    for (int64_t step = at + 1; step <= at + k; ++step) {
      const bool measure = step == at + k;
      StepTimer* timer = nullptr;
      if (step > at + 1) timer = timers.emplace_back(std::make_unique<StepTimer>(dev, 3)).get();
      if (measure) {
        Synchronize(dev);
        ResetPeak(dev);
      }
      Result<StepResult> sr = s.Step(loader, step, timer);
      if (!sr.ok()) {
        StopAllocRecording();
        mc.status = "error";
        mc.detail = sr.status().Message();
        return;
      }
      ++mc.steps;
      if (measure) {
        Synchronize(dev);
        mc.SetFigures(Snapshot(dev, step));
      }
    }
    mc.status = "ok";
    if (recording) {
      KeepAllocRecording(record_as, mc.micro_batch, c.training.seq_len, static_cast<int>(accum), checkpointing,
                         false, recordings);
    }
    if (!timers.empty()) {
      double fb_ms = 0;
      for (auto& t : timers) fb_ms += t->ElapsedMs(0, 1);
      mc.forward_backward_ms =
          fb_ms / static_cast<double>(timers.size()) / static_cast<double>(accum);
    }
    const char* setting = checkpointing ? "with activation checkpointing" : "without activation checkpointing";
    if (mc.peak_allocated_bytes) {
      std::fprintf(
          stderr,
          "pilot: single: memory calibration: micro_batch %d %s: peak allocated %s "
          "(micro_batch %d: %s)\n",
          mc.micro_batch, setting, FormatBytes(static_cast<double>(*mc.peak_allocated_bytes)).c_str(),
          c.training.micro_batch, peak ? FormatBytes(static_cast<double>(*peak)).c_str() : "n/a");
    } else {
      mc.detail = "no allocator peaks on " + std::string(dev.is_cuda() ? "this device" : "a CPU") +
                  ": process_peak_rss_bytes is the process's peak resident set, which the memory "
                  "model does not use";
      std::fprintf(stderr,
                   "pilot: single: memory calibration: micro_batch %d: process peak RSS %s "
                   "(not used by the memory model)\n",
                   mc.micro_batch,
                   mc.process_peak_rss_bytes
                       ? FormatBytes(static_cast<double>(*mc.process_peak_rss_bytes)).c_str()
                       : "n/a");
    }
  } catch (const std::exception& e) {
    StopAllocRecording();
    Recover(s);
    mc.status = IsOutOfMemory(e) ? "oom" : "error";
    mc.detail = IsOutOfMemory(e) ? "the smaller micro-batch does not fit in device memory"
                                 : std::string(e.what()).substr(0, 300);
  }
}

// Steps with and without the per-step measurements (events, loss reads,
// progress, metrics), alternated twice so drift affects both alike.
void InstrumentationCheckRun(Session& s, int steps, SingleStage* st, FILE* metrics) {
  InstrumentationCheck& ic = st->instrumentation;
  if (steps <= 0) return;
  const int64_t first = s.cfg().training.steps + 1;
  double with_s = 0, without_s = 0;
  for (int round = 0; round < 4; ++round) {
    const bool instrument = round % 2 == 1;
    LoopHooks hooks;
    hooks.process = "overhead_check";
    hooks.instrument = instrument;
    std::vector<StepRecord> recs;
    Synchronize(s.device());
    const auto t0 = std::chrono::steady_clock::now();
    Status r = RunSteps(s, first, first + steps - 1, hooks, &recs, metrics);
    const double secs = SecondsSince(t0);
    if (!r.ok()) return;
    (instrument ? with_s : without_s) += secs;
  }
  ic.ran = true;
  ic.steps = 2 * steps;
  ic.step_ms_instrumented = with_s * 1000.0 / ic.steps;
  ic.step_ms_plain = without_s * 1000.0 / ic.steps;
  ic.overhead_fraction = ic.step_ms_instrumented / ic.step_ms_plain - 1.0;
  std::fprintf(stderr, "pilot: single: instrumentation: %.2f ms/step measured, %.2f ms/step plain (%+.2f%%)\n",
               ic.step_ms_instrumented, ic.step_ms_plain, 100.0 * ic.overhead_fraction);
}

}  // namespace

void RunChecks(Session& s, const RunOptions& opts, const std::string& checkpoint,
               const std::vector<StepRecord>& reference, SingleStage* st, FILE* metrics) {
  PrecisionCheckRun(s, checkpoint, reference, st, metrics);
  RecomputeCheckRun(s, checkpoint, st, metrics);
  const bool on = s.cfg().training.activation_checkpointing;
  const int half = std::max(1, s.cfg().training.micro_batch / 2);
  MemoryCalibrationRun(s, checkpoint, half, on, PeakOf(st->memory), st->memory_calibration.emplace(),
                       "memory_calibration", &st->allocator_requests);
  // Micro-batch 1, when the calibration ran above it: the step-time model's
  // third point, below which no micro-batch exists (core/models/step_time.h).
  if (st->memory_calibration->status == "ok" && half > 1) {
    MemoryCalibrationRun(s, checkpoint, 1, on, PeakOf(st->memory), st->memory_calibration_smallest.emplace());
  }
  // The other setting's second point, when its recompute check measured the
  // first: the memory model's line for that layout (core/models/memory_model.h).
  const RecomputeCheck& rc = st->recompute_check;
  const std::optional<int64_t>& other = on ? rc.peak_bytes_without : rc.peak_bytes_with;
  if (rc.ran && other && rc.detail.empty()) {
    MemoryCalibrationRun(s, checkpoint, half, !on, other, st->memory_calibration_other.emplace(),
                         "memory_calibration_other", &st->allocator_requests);
  }
  InstrumentationCheckRun(s, opts.overhead_steps, st, metrics);
}

}  // namespace pilot::runner
