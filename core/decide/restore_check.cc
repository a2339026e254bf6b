#include "core/decide/restore_check.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace pilot {

LossDiff CompareLosses(const std::vector<double>& resumed, const std::vector<double>& reference) {
  LossDiff r;
  for (size_t i = 0; i < resumed.size() && i < reference.size(); ++i) {
    const double a = resumed[i], b = reference[i];
    const double d = std::fabs(a - b);
    r.max_abs = std::max(r.max_abs, std::isnan(d) ? INFINITY : d);
    r.max_rel = std::max(r.max_rel, std::isnan(d) ? INFINITY : d / std::max(std::fabs(b), 1e-12));
    r.bitwise = r.bitwise && a == b;
  }
  return r;
}

NoiseJudgement JudgeNoise(const std::vector<double>& reference, const std::vector<double>& resumed,
                          const std::vector<double>& repeat, const NoiseRule& rule,
                          bool first_is_forward) {
  NoiseJudgement j;
  const size_t n = std::min(reference.size(), resumed.size());
  auto fail = [&](size_t i, double spread) {
    if (j.pass) {
      j.pass = false;
      j.bad_index = static_cast<int>(i);
      j.bad_spread = spread;
    }
  };
  if (reference.size() != resumed.size()) fail(n, 0);
  const bool have_repeat = repeat.size() >= n && n > 0;
  // spread[i]: the largest |repeat - resumed| over steps 0..i+lookahead.
  std::vector<double> spread(n, 0.0);
  if (have_repeat) {
    std::vector<double> gap(n);
    for (size_t i = 0; i < n; ++i) {
      const double g = std::fabs(repeat[i] - resumed[i]);
      gap[i] = std::isfinite(g) ? g : INFINITY;
    }
    double run = 0;
    for (size_t i = 0; i < n; ++i) {
      run = std::max(run, gap[i]);
      double ahead = run;
      for (size_t a = i + 1; a < n && a <= i + kNoiseLookahead; ++a) ahead = std::max(ahead, gap[a]);
      spread[i] = ahead;
    }
  }
  for (size_t i = 0; i < n; ++i) {
    const double a = reference[i], b = resumed[i];
    const double d = std::fabs(a - b);
    const double rel = std::isfinite(d) ? d / std::max(std::fabs(a), 1e-12) : INFINITY;
    if (!std::isfinite(a) || !std::isfinite(b)) {
      fail(i, 0);
      continue;
    }
    if (i == 0 && first_is_forward) {
      j.first_rel = rel;
      if (!(rel <= rule.first)) fail(i, 0);
      continue;
    }
    if (rel <= rule.floor) continue;
    ++j.beyond_floor;
    if (!have_repeat) {
      j.needs_repeat = true;
      continue;
    }
    const double ratio = spread[i] > 0 ? d / spread[i] : INFINITY;
    j.max_ratio = std::max(j.max_ratio, ratio);
    if (!(ratio <= rule.margin)) fail(i, spread[i]);
  }
  // Undecided without the repeat: pass false, bad_index -1.
  if (j.needs_repeat) j.pass = false;
  return j;
}

bool JudgeRestore(const Config& cfg, bool cuda, int child_rc, const Result<Results>& child,
                  SingleStage* st) {
  RestoreInfo& r = st->restore;
  auto frame = [&] {
    r.from_step = cfg.checkpoint.at_step;
    r.to_step = cfg.training.steps;
    r.mode = cuda ? "tolerance" : "bitwise";
    r.tolerance = cuda ? cfg.eval.restore_tolerance : 0.0;
  };
  frame();
  if (!child.ok() || !child->single) {
    r.ran = false;
    r.equal = false;
    r.detail = "the fresh process (exit " + std::to_string(child_rc) + ") left no report" +
               (child.ok() ? "" : ": " + child.status().Message());
    return false;
  }
  const SingleStage& c = *child->single;
  st->memory_resumed = c.memory_resumed;
  st->checkpoint.load_seconds = c.checkpoint.load_seconds;
  if (c.checkpoint.load_seconds > 0) {
    st->checkpoint.load_gb_per_s = c.checkpoint.bytes / c.checkpoint.load_seconds / 1e9;
  }
  r = c.restore;
  frame();
  if (c.failure) {
    r.ran = false;
    r.equal = false;
    r.detail = "the fresh process failed: " + c.failure->kind + " at step " +
               std::to_string(c.failure->step) + " (" + c.failure->phase + "): " +
               c.failure->message.substr(0, 300);
    if (c.failure->kind == "oom") st->memory_resumed = c.failure->memory;
    return false;
  }
  r.ran = true;
  const size_t n = r.resumed_losses.size();
  const size_t expect = r.to_step > r.from_step ? static_cast<size_t>(r.to_step - r.from_step) : 0;
  bool losses_equal = n == expect;
  std::vector<double> reference;
  for (size_t i = static_cast<size_t>(std::max<int64_t>(0, r.from_step)); i < st->losses.size(); ++i) {
    reference.push_back(st->losses[i]);
  }
  if (reference.size() != expect) losses_equal = false;
  const LossDiff diff = CompareLosses(r.resumed_losses, reference);
  r.max_abs_loss_diff = diff.max_abs;
  r.max_rel_loss_diff = diff.max_rel;
  if (cuda ? !(diff.max_rel <= r.tolerance) : !diff.bitwise) losses_equal = false;
  const bool params_equal = cuda ? r.max_rel_param_diff <= r.tolerance : r.max_abs_param_diff == 0.0;
  r.equal = losses_equal && params_equal && r.params_compared > 0;
  if (!r.equal) {
    r.detail = !losses_equal ? "losses of the resumed steps differ from the reference"
                             : "final parameters differ from the reference";
  } else {
    r.detail = "";
  }
  return r.equal;
}

}  // namespace pilot
