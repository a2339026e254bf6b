// Running a helper program from the prolog or epilog (both root): with a
// time limit, a cap on the output kept, a clean environment and, when asked,
// as another user (setgid, initgroups, setuid in the child, before exec).
//
// The child gets its own process group; on timeout the whole group receives
// SIGTERM, then SIGKILL after a grace period, so nothing it started
// outlives the call. The child also dies with its caller (parent-death
// signal SIGKILL): a prolog or epilog that slurmd kills at its time limit
// leaves no helper running.
//
// Thread-safety: uses fork(); call from a single-threaded process.
#pragma once

#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/base/status.h"

namespace pilot::job {

struct RunAs {
  uid_t uid = 0;
  gid_t gid = 0;
  std::string user;  // for initgroups()
};

struct CommandSpec {
  std::vector<std::string> argv;     // argv[0] must be an absolute path
  std::vector<std::string> env;      // complete environment, "NAME=value"
  std::optional<RunAs> run_as;       // drop to this user before exec
  std::string cwd = "/";             // working directory of the child
  double timeout_seconds = 30;       // wall clock, then TERM/KILL
  double kill_grace_seconds = 2;     // between TERM and KILL
  size_t max_output_bytes = 1 << 20; // per stream; the rest is discarded
};

struct CommandResult {
  int exit_code = -1;      // when the child exited; -1 when killed
  int signal = 0;          // the signal that ended it, else 0
  bool timed_out = false;  // the time limit was reached
  bool stopped = false;    // ended (or never started) because this process
                           // was asked to stop (StopCommandsOnTermination)
  std::string out;         // stdout (at most max_output_bytes)
  std::string err;         // stderr (at most max_output_bytes)
  bool Succeeded() const { return exit_code == 0 && !timed_out; }
  // "exit 3", "killed by signal 9", "timed out after 30 s", "stopped: the
  // caller received SIGTERM".
  std::string Describe(double timeout_seconds) const;
};

// For the prolog and epilog, which slurmd ends at PrologEpilogTimeout with
// SIGTERM and, 10 ms later, SIGKILL: from this call on, SIGTERM, SIGINT and
// SIGHUP kill the process group of the command RunCommand is running at
// once (from the handler), and RunCommand starts nothing more; its results
// say `stopped`. Under SIGKILL alone the command's own process dies with its
// caller (PR_SET_PDEATHSIG). Call once, early in main.
void StopCommandsOnTermination();
// The signal that asked this process to stop (0: none yet).
int StopSignal();

// Starts argv and waits for it. Errors: kIoError when it cannot be started
// (fork/pipe failure); an exec failure or a non-zero exit is a result with
// exit_code 127 / the code, not an error.
Result<CommandResult> RunCommand(const CommandSpec& spec);

// In a child after fork(): become `as` (setgid, initgroups, setuid) and
// check that root cannot be regained. False when a step failed.
bool BecomeUser(const RunAs& as);
// In a child after fork(): chdir to `cwd` (else "/"), then exec argv[0]
// with exactly `env`; _exit(126) / _exit(127) when that fails.
[[noreturn]] void ExecIn(const std::string& cwd, const std::vector<std::string>& argv,
                         const std::vector<std::string>& env);

using CommandRunner = std::function<Result<CommandResult>(const CommandSpec&)>;

// sha256 of `path` (64 hex digits) as sha256sum reads it, run through `run`
// (RunCommand, or a test's stand-in) with `spec`'s user, environment, time
// and output limits (its argv is set here): the one way root hashes a file
// with the permissions of the user it is read for. Errors: kUnavailable
// when sha256sum is not installed; kNotFound naming `path` with what
// sha256sum said (or how it ended) when it could not be read; run's own.
Result<std::string> HashFileAsUser(const CommandRunner& run, CommandSpec spec, const std::string& path);

// HashFileAsUser as `run_as` (nullopt: as the caller) with
// CleanEnvironment(user, home) and a time limit; "" when the file cannot be
// read (no sha256sum, no file, no permission, timed out).
std::string Sha256AsUser(const CommandRunner& run, const std::string& path,
                         const std::optional<RunAs>& run_as, const std::string& user,
                         const std::string& home, double timeout_seconds = 60);

// A minimal environment for helpers: PATH, LANG=C, and HOME/USER/LOGNAME
// when `user` is set.
std::vector<std::string> CleanEnvironment(const std::string& user = "",
                                          const std::string& home = "");

// The first absolute path in "/usr/local/sbin:...:/bin" naming an
// executable `name`; "" when there is none.
std::string FindExecutable(const std::string& name);

}  // namespace pilot::job
