// The `pilot` command: a table of subcommands and the dispatcher over it.
//
// Adding a subcommand `foo`:
//   1. write cli/foo.cc defining `int RunFoo(const Invocation& inv)` in
//      namespace pilot::cli (parse inv.args with ParseCommandArgs from
//      cli/options.h, so --help and errors behave like every other command);
//   2. add one line X("foo", RunFoo, "one-line summary") to PILOT_COMMANDS in
//      cli/commands.cc;
//   3. document it in its own .SS section of man/pilot.1 (the man-page test
//      fails otherwise).
//
// Thread-safety: single-threaded by design (a command-line program).
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace pilot::cli {

// Exit codes of `pilot`, documented in pilot(1) under EXIT STATUS.
inline constexpr int kExitOk = 0;        // success
inline constexpr int kExitNo = 1;        // the answer is negative or the operation failed
inline constexpr int kExitUsage = 2;     // bad arguments or bad input (e.g. a config)
inline constexpr int kExitInternal = 3;  // unexpected error (a bug)

// What a subcommand receives.
struct Invocation {
  std::string name;               // the subcommand, e.g. "check"
  std::vector<std::string> args;  // the arguments after it
  std::ostream& out;              // results
  std::ostream& err;              // messages ("pilot: ...", "HINT: ...")
};

// A subcommand: returns the process exit code. It may throw; Main catches.
using CommandFn = int (*)(const Invocation&);

struct Command {
  const char* name;
  const char* summary;  // one line, lower case, no final period
  CommandFn run;
};

// The subcommands in the order `pilot --help` lists them.
const std::vector<Command>& Commands();

// Runs `pilot` with argv[1..]: global options, `help`, subcommand dispatch.
// What it writes to `out` and `err` passes through VisibleStreamBuf
// (cli/visible_output.h): no control character but '\n' reaches them.
// Never throws; unexpected exceptions become kExitInternal.
int Main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace pilot::cli
