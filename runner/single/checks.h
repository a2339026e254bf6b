// The single stage's checks after the reference trajectory: precision,
// recompute (activation checkpointing), memory calibration and the
// instrumentation overhead. Each restores the checkpoint of step K (so it
// sees the state the reference saw) and records its outcome in `st`.
//
// Thread-safety: the thread that drives the Session.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "core/records/results.h"
#include "runner/run_options.h"
#include "runner/train/loop.h"
#include "runner/train/session.h"

namespace pilot::runner {

void RunChecks(Session& s, const RunOptions& opts, const std::string& checkpoint,
               const std::vector<StepRecord>& reference, SingleStage* st, FILE* metrics);

}  // namespace pilot::runner
