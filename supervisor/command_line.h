// pilot-supervisor's command line (pilot-supervisor(8)) and what it turns
// into: the policy, the job's user, the job's environment.
//
//   pilot-supervisor --job ID --uid UID --gid GID [--policy FILE]
//                    [--state-dir DIR] [--runner PATH] [--stage STAGE]
//                    [--out DIR] [--cwd DIR] [--channel FD] [--job-env FD]
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
  bool help = false;
  bool version = false;
};

// Errors (kInvalid): unknown flag, missing value, a number that is not
// one, a relative path, an unknown stage, --job/--uid/--gid missing.
Result<CommandLine> ParseCommandLine(int argc, char** argv);

// Policy (the named file, else the build's default), the user from the
// password database, the job's environment. Errors: the policy's, kInvalid
// for an unknown uid or a uid the caller cannot become.
Status Prepare(const CommandLine& cl, char** own_env, SuperviseOptions* out);

}  // namespace pilot::supervisor
