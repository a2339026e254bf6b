// `pilot-runner verify --program-checkpoint DIR`: a checkpoint a training
// program saved in its own format, read without the program and without
// Python. Walks DIR without following links (every component opened with
// O_NOFOLLOW beneath its parent; at most kMaxProgramFiles files, depth
// kMaxProgramDepth), records each file's path, size and sha256, reads each
// by its contents (runner/ckpt/program_files.h), and with --expect-manifest
// compares the directory with an earlier report of this mode.
//
// Thread-safety: a process-level entry point.
#pragma once

#include "runner/run_options.h"

namespace pilot::runner {

inline constexpr int kMaxProgramFiles = 100000;
inline constexpr int kMaxProgramDepth = 16;

// Prints the report (text, or JSON with opts.json; to opts.out as JSON
// too); returns kExitOk when every check passed, kExitFailed when one
// failed, kExitUsage for bad input.
int RunProgramVerify(const VerifyOptions& opts);

}  // namespace pilot::runner
