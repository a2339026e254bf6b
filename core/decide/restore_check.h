// The restore test's verdict on numbers: a resumed trajectory against the
// reference run's, from the reports of two processes. The runner uses it
// when it starts the fresh process itself; pilot-supervisor uses it when it
// started both processes and holds both reports. No torch here: parameter
// differences are measured by the resumed process (runner/ckpt/compare.h)
// and arrive in its report.
//
// Thread-safety: pure functions.
#pragma once

#include <vector>

#include "core/config/config.h"
#include "core/records/results.h"
#include "core/base/status.h"

namespace pilot {

struct LossDiff {
  double max_abs = 0;     // max |a - b| (infinite where a difference is NaN)
  double max_rel = 0;     // max |a - b| / max(|b|, 1e-12), likewise
  bool bitwise = true;    // every a == b
};

// resumed[i] against reference[i] for i below both sizes.
LossDiff CompareLosses(const std::vector<double>& resumed, const std::vector<double>& reference);

// Where kernels are not deterministic, a resumed trajectory cannot equal
// the reference's: reductions in another order round differently, and the
// difference grows from step to step. What a restore owes is judged in two
// parts. The first step after the resume is a forward of the restored state
// on the same batch: within `first` (relative) of the reference's. A later
// step passes within `floor` (relative); past it, only within `margin`
// times the spread between the resumed process and a second one resumed
// from the same checkpoint (`repeat`), the largest |repeat - resumed| up to
// kNoiseLookahead steps later: noise measured on this program and this
// machine, where a state that was not restored moves both resumed
// processes away from the reference alike.
inline constexpr int kNoiseLookahead = 2;

struct NoiseRule {
  double floor = 1e-3;
  double first = 1e-4;
  double margin = 10;
};

struct NoiseJudgement {
  bool pass = true;
  bool needs_repeat = false;  // a step is past `floor` and no repeat was given (pass
                              // false; bad_index -1 when nothing else failed)
  double first_rel = 0;       // the first step's relative difference
  int beyond_floor = 0;       // steps past `floor`, judged against the spread
  double max_ratio = 0;       // the largest |reference - resumed| / spread among them
  int bad_index = -1;         // the first step that fails (0: the first after the resume)
  double bad_spread = 0;      // the spread at bad_index (0 when the first step failed)
};

// reference[i], resumed[i] and repeat[i] are one step's losses, i = 0 for
// the first step after the resume; `first_is_forward` says whether index 0
// is that step (false for a series of eval losses). An empty `repeat`
// judges without noise: a step past `floor` then sets needs_repeat. A NaN
// or a missing value fails.
NoiseJudgement JudgeNoise(const std::vector<double>& reference, const std::vector<double>& resumed,
                          const std::vector<double>& repeat, const NoiseRule& rule,
                          bool first_is_forward = true);

// Fills st->restore (and the resumed memory and load figures) from the
// fresh process's report `child` (its exit status `child_rc`), against the
// reference losses already in st->losses (steps 1..N). `cuda` selects the
// tolerance mode (eval.restore_tolerance) over bitwise equality. Returns
// whether the restore is equal.
bool JudgeRestore(const Config& cfg, bool cuda, int child_rc, const Result<Results>& child,
                  SingleStage* st);

}  // namespace pilot
