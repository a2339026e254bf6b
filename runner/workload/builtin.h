// The builtin workload: the model families of runner/train/model.h trained
// by this process (single stage: runner/single/; node stage ranks:
// runner/node/rank.h over the DDP and sharded engines).
//
// Thread-safety: as Workload.
#pragma once

#include "runner/workload/workload.h"

namespace pilot::runner {

class BuiltinWorkload final : public Workload {
 public:
  int RunSingle(const RunOptions& opts, const Config& cfg, const Pins& pins, SingleStage* st,
                FILE* metrics) override;
  int RunResumed(const RunOptions& opts) override;
  int RunNodeRank(const RunOptions& opts) override;
};

}  // namespace pilot::runner
