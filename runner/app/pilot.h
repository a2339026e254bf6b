// `pilot-runner run`: the pilot's driver. In the process the user (or the
// SPANK plugin) starts: the single stage, then the node stage
// (opts.stage "single", "node" or "all"), and results.json. The same
// executable is also the single stage's fresh restore process
// (--resume-from) and each rank of the node stage; the driver hands those
// to the workload (runner/workload/workload.h).
//
// Thread-safety: a process-level entry point.
#pragma once

#include "runner/run_options.h"

namespace pilot::runner {

// Returns the exit status (pilot-runner(1)).
int RunPilot(const RunOptions& opts);

}  // namespace pilot::runner
