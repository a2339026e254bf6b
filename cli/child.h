// Running another program from `pilot` (scontrol for grant, sbatch for
// run): without a shell, with the caller's standard output and error.
//
// Thread-safety: uses fork(); call from a single-threaded process.
#pragma once

#include <string>
#include <vector>

namespace pilot::cli {

// Runs argv (argv[0] looked up in PATH) and waits for it; `input`, when not
// null, is written to its standard input (else it inherits the caller's).
// Returns its exit status (127 when it could not be started, which the
// child says on stderr after "pilot: `who`: "), or -1 with *error set when
// it could not be forked or was killed by a signal.
int RunChild(const std::vector<std::string>& argv, const std::string* input, const std::string& who,
             std::string* error);

}  // namespace pilot::cli
