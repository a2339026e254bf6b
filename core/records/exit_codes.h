// Exit statuses of pilot-runner, as pilot-runner(1) documents them under
// EXIT STATUS. Every entry point of the runner returns one of these; the
// supervisor returns them for the phases it runs (a user's program's too)
// and reads them from the runner's processes, and the epilog reads them from
// `pilot-runner verify`.
//
// Thread-safety: constants and a pure function.
#pragma once

#include "core/base/status.h"

namespace pilot {

enum ExitCode : int {
  kExitOk = 0,           // run: pilot complete, restore equal; verify: verified
  kExitFailed = 1,       // run: a check failed (restore unequal...); verify: failed
  kExitUsage = 2,        // bad flags, config, lock or input files
  kExitOutOfMemory = 3,  // run: out of memory at the real shape (recorded)
  kExitError = 4,        // run: a runtime error (recorded when possible)
};

// The exit status of a failed Status: a usage error for what the input
// can fix (invalid, missing or corrupt input, permission), else a runtime
// error.
inline int ExitFor(const Status& s) {
  switch (s.code()) {
    case Code::kInvalid:
    case Code::kNotFound:
    case Code::kCorrupt:
    case Code::kPermission:
      return kExitUsage;
    default:
      return kExitError;
  }
}

}  // namespace pilot
