#include "core/models/step_time.h"

#include <algorithm>
#include <cmath>

#include "core/base/strings.h"

namespace pilot {
namespace {

std::string Ms(double v) { return FormatFixed(v, v >= 100 ? 0 : 1) + " ms"; }
std::string Times(double factor) { return "x" + FormatFixed(factor, 3); }  // "x1.350"
std::string Percent(double fraction) { return FormatFixed(100 * fraction, 0) + "%"; }

// A memory calibration that ran ("ok") and timed its forward and backward.
bool Timed(const std::optional<MemoryCalibrationCheck>& c) {
  return c && c->status == "ok" && c->micro_batch > 0 && c->forward_backward_ms &&
         std::isfinite(*c->forward_backward_ms) && *c->forward_backward_ms > 0;
}

}  // namespace

StepTimeBasis StepTimeBasisFrom(const SingleStage& s) {
  StepTimeBasis b;
  b.seq_len = s.shape.seq_len;
  b.micro_batch = s.shape.micro_batch;
  b.grad_accum = std::max(1, s.shape.grad_accum);
  b.activation_checkpointing = s.shape.activation_checkpointing;
  b.step_ms = s.timings.step_ms;
  b.data_wait_ms = std::clamp(s.timings.data_wait_ms, 0.0, std::max(0.0, s.timings.step_ms));
  b.forward_backward_ms = s.timings.forward_backward_ms;
  b.optimizer_ms = s.timings.optimizer_ms;
  // A calibration at the pilot's seq_len and setting that timed its steps.
  auto timed_here = [&b](const std::optional<MemoryCalibrationCheck>& c) {
    return Timed(c) && c->seq_len == b.seq_len && c->activation_checkpointing == b.activation_checkpointing;
  };
  if (const auto& c = s.memory_calibration; timed_here(c) && c->micro_batch != b.micro_batch) {
    b.second_micro_batch = c->micro_batch;
    b.second_forward_backward_ms = *c->forward_backward_ms;
    if (const auto& m = s.memory_calibration_smallest; timed_here(m) && m->micro_batch < c->micro_batch) {
      b.smallest_micro_batch = m->micro_batch;
      b.smallest_forward_backward_ms = *m->forward_backward_ms;
    }
  }
  const RecomputeCheck& r = s.recompute_check;
  if (r.ran && r.step_ms_with > 0 && r.step_ms_without > 0) {
    // Recomputing changes forward and backward only: the cost is the ratio
    // of the two steps less what they share (the pilot's step outside its
    // forward and backward), when the runner timed forward and backward.
    const double shared = b.forward_backward_ms > 0 && b.forward_backward_ms < b.step_ms
                              ? b.step_ms - b.forward_backward_ms
                              : 0;
    const double with = r.step_ms_with - shared, without = r.step_ms_without - shared;
    b.recompute_cost_fraction = with > 0 && without > 0 ? with / without - 1
                                                        : r.step_ms_with / r.step_ms_without - 1;
    b.recompute_step_ms_with = r.step_ms_with;
    b.recompute_step_ms_without = r.step_ms_without;
  }
  // Both calibrations timed at the same smaller micro-batch, one with and
  // one without checkpointing, the same way: their ratio is the cost of
  // recomputing, without the recompute check's steps (which run after a
  // release of cached memory and read a few percent slow).
  const auto& own = s.memory_calibration;
  const auto& other = s.memory_calibration_other;
  if (Timed(own) && Timed(other) && own->micro_batch == other->micro_batch && own->seq_len == other->seq_len &&
      own->activation_checkpointing != other->activation_checkpointing) {
    const double with = own->activation_checkpointing ? *own->forward_backward_ms : *other->forward_backward_ms;
    const double without = own->activation_checkpointing ? *other->forward_backward_ms : *own->forward_backward_ms;
    b.recompute_cost_fraction = with / without - 1;
    b.recompute_calibration_micro_batch = own->micro_batch;
    b.recompute_calibration_ms_with = with;
    b.recompute_calibration_ms_without = without;
  }
  return b;
}

StepTimeBasis ScaleBasisToDepth(const StepTimeBasis& b, const Workload& from, const Workload& to) {
  StepTimeBasis e = b;
  const double f_from = FlopsPerTokenAt(from, b.seq_len);
  if (f_from <= 0 || from.params <= 0) return e;
  const double f = FlopsPerTokenAt(to, b.seq_len) / f_from;
  const double p = static_cast<double>(to.params) / static_cast<double>(from.params);
  e.forward_backward_ms = b.forward_backward_ms * f;
  e.optimizer_ms = b.optimizer_ms * p;
  e.step_ms = b.step_ms + (e.forward_backward_ms - b.forward_backward_ms) + (e.optimizer_ms - b.optimizer_ms);
  if (b.second_forward_backward_ms) e.second_forward_backward_ms = *b.second_forward_backward_ms * f;
  if (b.smallest_forward_backward_ms) e.smallest_forward_backward_ms = *b.smallest_forward_backward_ms * f;
  const double shift = e.step_ms - b.step_ms;
  if (b.recompute_step_ms_with && b.recompute_step_ms_without) {
    // Forward and backward scale alike at both settings.
    e.recompute_step_ms_without = *b.recompute_step_ms_without + shift;
    e.recompute_step_ms_with = *b.recompute_step_ms_with + shift;
  }
  if (b.recompute_calibration_ms_with) e.recompute_calibration_ms_with = *b.recompute_calibration_ms_with * f;
  if (b.recompute_calibration_ms_without) e.recompute_calibration_ms_without = *b.recompute_calibration_ms_without * f;
  return e;
}

double FlopsPerTokenAt(const Workload& w, int seq_len) {
  return 6.0 * static_cast<double>(w.params) +
         6.0 * w.layers * static_cast<double>(w.d_model) * seq_len;
}

StepTimeEstimate EstimateStepTime(const StepTimeBasis& b, const Workload& w, const StepShape& q) {
  StepTimeEstimate e;
  const int accum_q = std::max(1, q.grad_accum);
  e.tokens_per_step = static_cast<double>(q.seq_len) * q.micro_batch * accum_q;
  // results.json is the job's file: a timing that is not a finite,
  // non-negative number (a "nan" string reads as NaN) gives no estimate.
  for (double v : {b.step_ms, b.data_wait_ms, b.forward_backward_ms, b.optimizer_ms}) {
    if (!std::isfinite(v) || v < 0) return e;
  }
  if (b.step_ms <= 0 || b.seq_len <= 0 || b.micro_batch <= 0) return e;

  // The pilot's step in parts that add up to its step time: data wait,
  // optimizer, forward and backward (the compute not in the optimizer when
  // the runner did not time it apart), and the rest.
  const double wait_p = std::clamp(b.data_wait_ms, 0.0, b.step_ms);
  const double compute_p = b.step_ms - wait_p;
  const double opt_p = std::clamp(b.optimizer_ms, 0.0, compute_p);
  const double fb_all_p = b.forward_backward_ms > 0 ? std::min(b.forward_backward_ms, compute_p - opt_p)
                                                    : compute_p - opt_p;
  const double rest = compute_p - opt_p - fb_all_p;
  // One micro-batch's forward and backward at the pilot's shape.
  const double n_p = static_cast<double>(b.seq_len) * b.micro_batch;
  const double fb_p = fb_all_p / std::max(1, b.grad_accum);

  e.assumptions.push_back("pilot's step: " + Ms(b.step_ms) + " at seq_len " +
                          std::to_string(b.seq_len) + " x micro_batch " +
                          std::to_string(b.micro_batch) + " x accumulation " +
                          std::to_string(std::max(1, b.grad_accum)) +
                          (b.activation_checkpointing ? ", activation checkpointing" : "") +
                          " (forward/backward " + Ms(fb_all_p) + ", optimizer " + Ms(opt_p) +
                          ", data wait " + Ms(wait_p) + ", rest " + Ms(rest) + ")");
  if (b.recompute_step_ms_with && b.recompute_step_ms_without) {
    e.assumptions.push_back("recompute check: " + Ms(*b.recompute_step_ms_with) +
                            " per step with activation checkpointing, " +
                            Ms(*b.recompute_step_ms_without) + " without");
  }

  // FLOPs per token at the query's sequence length against the pilot's.
  const double f_p = FlopsPerTokenAt(w, b.seq_len);
  const double f_q = FlopsPerTokenAt(w, q.seq_len);
  const double flops_ratio = f_p > 0 ? f_q / f_p : 1;
  const double n_q = static_cast<double>(q.seq_len) * q.micro_batch;

  // T(n) = alpha + beta n at the pilot's seq_len and setting, through the
  // timed micro-batches (largest first).
  struct Point {
    int micro_batch;
    double n, ms;
  };
  std::vector<Point> pts{{b.micro_batch, n_p, fb_p}};
  auto add = [&](const std::optional<int>& mb, const std::optional<double>& ms) {
    if (!mb || !ms || !std::isfinite(*ms) || *ms <= 0 || *mb <= 0) return;
    const double n = static_cast<double>(b.seq_len) * *mb;
    for (const Point& p : pts) {
      if (p.n == n) return;
    }
    pts.push_back({*mb, n, *ms});
  };
  add(b.second_micro_batch, b.second_forward_backward_ms);
  if (pts.size() == 2) add(b.smallest_micro_batch, b.smallest_forward_backward_ms);
  std::sort(pts.begin(), pts.end(), [](const Point& x, const Point& y) { return x.n > y.n; });
  // A line through points i and i+1; false when it says a micro-batch
  // costs less than nothing, or more than all of its time (noise).
  auto line = [&](size_t i, double* a, double* slope) {
    *slope = (pts[i].ms - pts[i + 1].ms) / (pts[i].n - pts[i + 1].n);
    *a = pts[i].ms - *slope * pts[i].n;
    return *slope > 0 && *a >= 0 && *a < pts[i + 1].ms;
  };
  double alpha = 0;
  double beta = n_p > 0 ? fb_p / n_p : 0;
  auto timed = [&] {
    std::string t;
    for (size_t i = 0; i < pts.size(); ++i) {
      t += (i == 0 ? "" : i + 1 == pts.size() ? " and " : ", ") + std::to_string(pts[i].micro_batch) +
           " (" + Ms(pts[i].ms) + ")";
    }
    return t;
  };
  if (pts.size() >= 2) {
    // The segment whose range holds the query's work; past the ends, the
    // nearest one. A lower segment that fails the check gives way to the
    // upper one.
    const double work = n_q * flops_ratio;
    size_t seg = pts.size() == 3 && work < pts[1].n ? 1 : 0;
    double a = 0, slope = 0;
    bool ok = line(seg, &a, &slope);
    if (!ok && seg == 1) ok = line(seg = 0, &a, &slope);
    if (ok) {
      alpha = a;
      beta = slope;
      e.assumptions.push_back("micro-batch efficiency from micro-batches " + timed() + ": " +
                              (pts.size() == 3 ? "between " + std::to_string(pts[seg + 1].micro_batch) +
                                                     " and " + std::to_string(pts[seg].micro_batch) + ", "
                                               : std::string()) +
                              Ms(alpha) + " fixed per micro-batch");
    } else {
      e.assumptions.push_back("micro-batch efficiency: the timed micro-batches (" + timed() +
                              ") give no consistent fixed cost; time taken as proportional to the work");
    }
  } else {
    e.assumptions.push_back(
        "micro-batch efficiency not measured (one micro-batch size timed): time taken as "
        "proportional to the work");
  }

  // Below every timed micro-batch the fit is an extrapolation: a GPU runs a
  // micro-batch too small to fill it at a higher cost per token.
  const Point& smallest = pts.back();
  if (n_q < smallest.n) {
    e.assumptions.push_back("micro_batch " + std::to_string(q.micro_batch) + " x seq_len " +
                            std::to_string(q.seq_len) + " has fewer tokens than any timed micro-batch (" +
                            std::to_string(smallest.micro_batch) + " x " + std::to_string(b.seq_len) +
                            "): below that, a micro-batch may not fill the GPU and run slower than projected");
  }

  if (q.seq_len != b.seq_len) {
    e.assumptions.push_back("seq_len " + std::to_string(b.seq_len) + " -> " +
                            std::to_string(q.seq_len) + ": FLOPs per token " + Times(flops_ratio) + " (6N + 6 L d S: causal attention grows with the sequence)");
  }

  // Recomputing activations.
  if (q.activation_checkpointing != b.activation_checkpointing) {
    double cost = 1.0 / 3.0;
    std::string source = "not measured: one more forward pass, 1/3 of forward and backward";
    if (b.recompute_cost_fraction && std::isfinite(*b.recompute_cost_fraction) &&
        *b.recompute_cost_fraction > -0.5) {
      cost = *b.recompute_cost_fraction;
      source = b.recompute_calibration_micro_batch
                   ? "measured " + Percent(cost) + " by the two memory calibrations at micro_batch " +
                         std::to_string(*b.recompute_calibration_micro_batch) + ": " +
                         Ms(*b.recompute_calibration_ms_with) + " with, " +
                         Ms(*b.recompute_calibration_ms_without) + " without"
                   : "the recompute check measured " + Percent(cost);
    }
    e.recompute_factor = q.activation_checkpointing ? 1 + cost : 1 / (1 + cost);
    e.assumptions.push_back(std::string("activation checkpointing ") +
                            (q.activation_checkpointing ? "on" : "off") + ": forward and backward " +
                            Times(e.recompute_factor) + " (" + source + ")");
  }

  const double t_q = (alpha + beta * n_q * flops_ratio) * e.recompute_factor;
  e.alpha_ms = alpha;
  e.forward_backward_ms = accum_q * t_q;
  const double tokens_p = n_p * std::max(1, b.grad_accum);
  e.data_wait_ms = tokens_p > 0 ? wait_p * e.tokens_per_step / tokens_p : 0;
  e.compute_ms = e.forward_backward_ms + opt_p + rest;
  e.step_ms = e.compute_ms + e.data_wait_ms;
  return e;
}

}  // namespace pilot
