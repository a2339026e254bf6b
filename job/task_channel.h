// The channel between a pilot job's task and its supervisor: one end of a
// Unix socket pair each (the plugin makes the pair in the task, as root,
// and forks pilot-supervisor with the other end).
//
//   task (as the user, stdio ready) --SendStdio-->      supervisor
//   task (waits)                    <--SendExitStatus-- supervisor (done)
//
// The task hands over its standard input, output and error (so the
// supervisor and the workload write where the job's output goes) and waits;
// the supervisor's exit status becomes the task's, so Slurm records the
// pilot's status as the step's.
//
// Thread-safety: plain functions over a descriptor; one caller per end.
#pragma once

#include <array>
#include <optional>

#include "core/base/status.h"

namespace pilot::job {

// Sends descriptors 0, 1 and 2 of this process. Errors: kIoError.
Status SendStdio(int socket_fd);
// Waits for them; the received descriptors are new ones of this process.
// Errors: kIoError (the peer went away or sent no descriptors).
Result<std::array<int, 3>> ReceiveStdio(int socket_fd);

// A task run in a container on its node (spank_pilot(8), CONTAINERS) sends
// its stdio and, fourth, a descriptor holding its environment as
// slurmstepd made it for the task (NUL-separated NAME=value entries): the
// ranks' variables are set after the privileged hook. Errors as above.
Status SendStdioAndEnv(int socket_fd, int env_fd);
Result<std::array<int, 4>> ReceiveStdioAndEnv(int socket_fd);

// The supervisor's status, 0-255.
Status SendExitStatus(int socket_fd, int status);
// Waits for it; nullopt when the peer closed its end without one.
std::optional<int> ReceiveExitStatus(int socket_fd);

}  // namespace pilot::job
