// `pilot-runner verify`: what the epilog re-checks in a fresh process, from
// a single-stage checkpoint's files alone (plus the config and, with
// --expect, the run's results.json): the manifest's hashes and sizes,
// completeness (every parameter has its optimizer state) and the eval loss
// recomputed from the restored weights.
//
// Thread-safety: a process-level entry point.
#pragma once

#include "runner/run_options.h"

namespace pilot::runner {

// Prints the report (text, or JSON with opts.json); returns kExitOk when
// every check passed, kExitFailed when one failed, kExitUsage for bad
// input.
int RunVerify(const VerifyOptions& opts);

}  // namespace pilot::runner
