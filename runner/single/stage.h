// The single stage of the builtin workload: one process, one device.
//
//   RunSingle    build -> steps 1..N (eval and checkpoint after step K) ->
//                final eval -> reference parameters -> checks -> a fresh
//                process (this executable with --resume-from) restores K,
//                resumes to N and is compared with the reference.
//   RunResumed   that fresh process: restore, resume, compare the final
//                parameters, write <out>/resume.json.
//
// Thread-safety: process-level entry points (RunSingle spawns a process).
#pragma once

#include <cstdio>

#include "core/config/config.h"
#include "core/records/results.h"
#include "runner/run_options.h"
#include "runner/train/inputs.h"

namespace pilot::runner {

// Fills `st` (stages.single) and appends metrics lines to `metrics` (may be
// null). Returns the exit status (pilot-runner(1)); never throws.
int RunSingle(const RunOptions& opts, const Config& cfg, const Pins& pins, SingleStage* st, FILE* metrics);

// Returns the exit status; the report goes to <out>/resume.json.
int RunResumed(const RunOptions& opts);

}  // namespace pilot::runner
