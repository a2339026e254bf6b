// One rank of the node stage for the builtin workload: builds the model
// from the seed, joins the group (runner/node/comm.h), runs one phase with
// the engine of parallel.mode (train: steps 1..N and the sharded
// checkpoint after step K, then the final parameters; resume, when
// opts.resume_checkpoint is set: restore, steps K+1..N, compare with
// opts.reference_params) and writes its report,
// <phase dir>/rank-NNNNN.json, which the launching process folds into
// stages.node (runner/node/stage.h).
//
// Thread-safety: a process-level entry point.
#pragma once

#include "runner/run_options.h"

namespace pilot::runner {

// Exit status as pilot-runner(1).
int RunNodeRank(const RunOptions& opts);

}  // namespace pilot::runner
