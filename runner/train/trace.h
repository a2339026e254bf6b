// `pilot-runner run --trace FILE`: a Chrome trace (Kineto) of a few steady
// steps after the checks, for reading where a step's time goes (open it in
// Perfetto or chrome://tracing). The steps run from the state the checks
// left, without the per-step measurements, and are not part of any figure.
#pragma once

#include <string>

#include "core/base/status.h"
#include "runner/train/session.h"

namespace pilot::runner {

// Runs `steps` steps after a warm-up step under the profiler and writes the
// trace to `path`. kUnavailable when this libtorch has no Kineto.
Status TraceSteps(Session& s, const std::string& path, int steps);

}  // namespace pilot::runner
