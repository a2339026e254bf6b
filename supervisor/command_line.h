// pilot-supervisor's command line (pilot-supervisor(8)) and what it turns
// into: the policy, the job's user, the job's environment.
//
//   pilot-supervisor --job ID --uid UID --gid GID [--policy FILE]
//                    [--state-dir DIR] [--runner PATH] [--stage STAGE]
//                    [--out DIR] [--cwd DIR] [--channel FD] [--job-env FD]
//                    [--bound-run PILOT]
//   pilot-supervisor --container-task --job ID --uid UID --gid GID
//                    [--policy FILE] [--state-dir DIR] [--node NAME]
//                    [--step N] [--task N] [--channel FD] -- COMMAND...
//
// --container-task: one task of a program's srun step across nodes, run in
// the pinned image (supervisor/program/container_task.h); its stdio and
// environment come over --channel.
//
// --bound-run: the job is the run bound to pilot job PILOT's grant: run the
// pilot's program.command in place of its batch script
// (supervisor/program/bound_run.h), not a pilot.
//
// --channel: the task's end of the socket pair (job/task_channel.h); -1 =
// none (stdio as inherited). --job-env: a descriptor holding the job's
// environment as NUL-separated "NAME=value" entries; -1 = this process's
// own environment (a supervisor started by hand).
//
// Thread-safety: pure parsing; Prepare reads files and the password database.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/base/status.h"
#include "supervisor/supervise.h"

namespace pilot::supervisor {

extern const char kUsage[];

struct CommandLine {
  int64_t job_id = -1;
  int64_t uid = -1;
  int64_t gid = -1;
  std::string policy;
  std::string state_dir;
  std::string runner;
  std::string stage = "all";
  std::string out;
  std::string cwd = "/";
  int channel = -1;
  int job_env = -1;
  bool container_task = false;
  int64_t bound_run = 0;  // --bound-run: the pilot job; 0 = not a bound run
  std::string node;
  int64_t step_id = -1;
  int64_t task_id = -1;
  std::vector<std::string> command;  // --container-task: after --
  bool help = false;
  bool version = false;
};

// Errors (kInvalid): unknown flag, missing value, a number that is not
// one, a relative path, an unknown stage, --job/--uid/--gid missing, a
// container task without its command, a command without --container-task.
Result<CommandLine> ParseCommandLine(int argc, char** argv);

// The entries of an environment held in `fd` (NUL-separated NAME=value,
// read from its start). Errors: kIoError, kInvalid past 64 MiB.
Result<std::vector<std::string>> ReadEnvEntries(int fd);

// Policy (the named file, else the build's default), the user from the
// password database, the job's environment. Errors: the policy's, kInvalid
// for an unknown uid or a uid the caller cannot become.
Status Prepare(const CommandLine& cl, char** own_env, SuperviseOptions* out);

}  // namespace pilot::supervisor
