// pilot-runner's command line (Boost.Program_options), one table per
// subcommand. Every flag is documented in pilot-runner(1).
//
//   pilot-runner run --config FILE --out DIR [--lock FILE]
//                    [--stage single|node|all] [--set section.key=value]...
//                    [--overhead-steps N] [--keep-reference] [--nproc N]
//   pilot-runner verify --checkpoint DIR --config FILE [--expect RESULTS]
//                    [--set section.key=value]... [--json] [--out FILE]
//   pilot-runner verify --program-checkpoint DIR [--expect-manifest FILE]
//                    [--json] [--out FILE]
//   pilot-runner --versions [--json]
//   pilot-runner --help | --version
#pragma once

#include <string>
#include <vector>

#include "core/base/status.h"
#include "runner/run_options.h"

namespace pilot::runner {

struct Command {
  enum Kind { kRun, kVerify, kVersions, kHelp, kVersion } kind = kHelp;
  RunOptions run;
  VerifyOptions verify;
  bool json = false;
  std::string help;  // usage text for kHelp
};

// Errors: kInvalid (unknown subcommand or flag, with a "did you mean"
// hint; missing required flag; bad value).
Result<Command> ParseCommandLine(const std::vector<std::string>& args);

}  // namespace pilot::runner
