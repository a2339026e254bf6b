// Starting the processes of ranks, for both launchers of the launch layer's
// callers: pilot-runner's node stage (posix_spawn from its one thread) and
// the supervisor's program phases (fork, then exec in the child).
//
// Thread-safety: SpawnProcess and FreePort from any thread (SpawnProcess
// flushes stdio); ExecSearchingPath is for a forked child before exec.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace pilot::launch {

// posix_spawn(p) of `exe` (a name without '/' is looked up in our PATH)
// with `args` (argv, argv[0] included) and `env`, its stderr on
// `stderr_fd` when that is >= 0 (ours otherwise). -1 when it cannot start,
// after "pilot: node: cannot start EXE: why" on our stderr.
pid_t SpawnProcess(const std::string& exe, const std::vector<std::string>& args,
                   const std::vector<std::string>& env, int stderr_fd = -1);

// execve of argv[0] with `argv` and `env`: by its path when it has a '/',
// else in each directory of env's PATH (its first entry) in turn. Returns
// only when nothing could be run, with why ("cannot run /x: No such file
// or directory", "name: not found in PATH /usr/bin:/bin").
std::string ExecSearchingPath(const std::vector<std::string>& argv,
                              const std::vector<std::string>& env);

// A free TCP port on the loopback interface (the kernel's choice), for a
// rendezvous on this node; kPortBase (core/records/hostlist.h) when the
// kernel gives none.
int FreePort();

// "exit 3", "killed by signal 9 (Killed)".
std::string DescribeWaitStatus(int status);

}  // namespace pilot::launch
