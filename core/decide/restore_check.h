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

// Fills st->restore (and the resumed memory and load figures) from the
// fresh process's report `child` (its exit status `child_rc`), against the
// reference losses already in st->losses (steps 1..N). `cuda` selects the
// tolerance mode (eval.restore_tolerance) over bitwise equality. Returns
// whether the restore is equal.
bool JudgeRestore(const Config& cfg, bool cuda, int child_rc, const Result<Results>& child,
                  SingleStage* st);

}  // namespace pilot
