// How a workload process hands over its report (a results.json record):
// into OUT/NAME (atomically) when run by hand, or, under pilot-supervisor,
// into the pipe the supervisor gave it (--report-fd), which the supervisor
// alone reads: what it saw cannot be changed by rewriting a file later.
//
// Thread-safety: process-level; call once per process.
#pragma once

#include <string>

#include "core/records/results.h"
#include "core/base/status.h"
#include "runner/run_options.h"

namespace pilot::runner {

// Errors: those of the file write, or kIoError when the pipe is closed.
Status WriteReport(const RunOptions& opts, const std::string& name, const Results& r);

}  // namespace pilot::runner
