// The builtin workload: forwards to the stages' builtin implementations.
#include "runner/workload/builtin.h"

#include <memory>

#include "runner/node/rank.h"
#include "runner/single/stage.h"

namespace pilot::runner {

int BuiltinWorkload::RunSingle(const RunOptions& opts, const Config& cfg, const Pins& pins, SingleStage* st,
                               FILE* metrics) {
  return pilot::runner::RunSingle(opts, cfg, pins, st, metrics);
}

int BuiltinWorkload::RunResumed(const RunOptions& opts) { return pilot::runner::RunResumed(opts); }

int BuiltinWorkload::RunNodeRank(const RunOptions& opts) { return pilot::runner::RunNodeRank(opts); }

std::unique_ptr<Workload> SelectWorkload() { return std::make_unique<BuiltinWorkload>(); }

}  // namespace pilot::runner
