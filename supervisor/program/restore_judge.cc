#include "supervisor/program/restore_judge.h"

#include <algorithm>

#include "supervisor/program/observe.h"

namespace pilot::supervisor {

RestoreRule RestoreRuleFor(const Config& cfg, const Thresholds& site, bool bitwise) {
  RestoreRule r;
  r.bitwise = bitwise;
  r.noise.floor = std::min(cfg.eval.restore_tolerance, site.restore_tolerance);
  r.noise.first = site.restore_first_tolerance;
  r.noise.margin = site.restore_noise_margin;
  return r;
}

std::string StateDiffers(const std::vector<StateComponentDiff>& state, int64_t k) {
  for (const StateComponentDiff& d : state) {
    if (d.equal || d.saved.empty() || d.restored.empty()) continue;
    return "the resumed process started step " + std::to_string(k + 1) +
           " from another state than the one saved at step " + std::to_string(k);
  }
  return "";
}

void RequireState(const std::vector<StateComponentDiff>& state, int64_t k, const RestoreComparison& c,
                  bool* equal, std::string* detail) {
  const std::string why = StateDiffers(state, k);
  if (why.empty()) return;
  if (*equal || c.needs_repeat || detail->empty()) *detail = why;
  *equal = false;
}

std::vector<StateComponentDiff> JudgeState(const GroupResult& ref, const GroupResult& res,
                                           const RestoreComparison& c, const RestoreHints& hints,
                                           bool* equal, std::string* detail) {
  std::vector<StateComponentDiff> state = CompareState(ref, res, hints.at_step);
  RequireState(state, hints.at_step, c, equal, detail);
  if (!*equal) *detail += RestoreDiagnosis(state, res, hints);
  return state;
}

std::optional<RestoreComparison> CompareWithNoise(
    const GroupResult& ref, const GroupResult& res, int64_t k, int64_t n, int world,
    const RestoreRule& rule, const PhaseExpect& expect,
    const std::function<std::optional<GroupResult>()>& run_repeat) {
  RestoreComparison c = CompareResumed(ref, res, nullptr, k, n, world, rule);
  if (!c.needs_repeat) return c;
  if (!StateDiffers(CompareState(ref, res, k), k).empty()) return c;  // decided without noise
  std::optional<GroupResult> rep = run_repeat();
  if (!rep) return std::nullopt;
  if (std::optional<PhaseProblem> bad = CheckPhase(*rep, expect)) {
    c.needs_repeat = false;
    c.info.detail = "the second resumed process, which measures the kernels' noise, failed: " + bad->message;
    return c;
  }
  return CompareResumed(ref, res, &*rep, k, n, world, rule);
}

RestoreInfo UnequalRestore(bool bitwise, int64_t k, int64_t n, const std::string& why) {
  RestoreInfo r;
  r.ran = true;
  r.equal = false;
  r.mode = bitwise ? "bitwise" : "tolerance";
  r.from_step = k;
  r.to_step = n;
  r.detail = why;
  return r;
}

void NoteNodeComparison(const RestoreComparison& c, NodeRestore* nr) {
  nr->equal = c.info.equal;
  nr->mode = c.info.mode;
  nr->tolerance = c.info.tolerance;
  nr->first_rel_loss_diff = c.info.first_rel_loss_diff;
  nr->first_tolerance = c.info.first_tolerance;
  nr->noise_margin = c.info.noise_margin;
  nr->noise_max_ratio = c.info.noise_max_ratio;
  nr->noise_steps = c.info.noise_steps;
  nr->max_abs_loss_diff = c.info.max_abs_loss_diff;
  nr->max_rel_loss_diff = c.info.max_rel_loss_diff;
  nr->detail = c.info.detail;
}

}  // namespace pilot::supervisor
