// The SPANK plugin's pure parts: plugstack.conf arguments, the pilot options
// a job carries, and the runner command line the batch step is replaced
// with. No Slurm header here, so unit tests can link this without Slurm.
// Only the plugin's implementation (spank_pilot_impl.so) links it.
//
// Thread-safety: pure functions over values.
#pragma once

#include <string>
#include <vector>

#include "core/base/status.h"
#include "job/plugin_args.h"

namespace pilot::spank {

// The plugstack arguments, shared with `pilot doctor` (job/plugin_args.h).
using job::ParsePluginArgs;
using job::PluginArgs;

// The pilot stages --pilot-stage accepts.
bool IsValidStage(const std::string& stage);

// What the user asked for with --pilot / --pilot-stage / --pilot-out (or
// their environment fallbacks PILOT_CONFIG, PILOT_STAGE, PILOT_OUT).
struct PilotRequest {
  std::string config;          // as given; "" = no pilot
  std::string stage = "all";   // single | node | all
  std::string out;             // as given, "" = the job's work folder
};

// --pilot-out as the supervisor takes it (an absolute path): `out` made
// lexically normal ("a/./b/../c" -> "a/c", no trailing '/'), a relative one
// first joined to `base`, the directory the job was submitted from. In
// the job, Slurm hands the plugin the option as the user typed it, so
// "--pilot-out=run1" arrives relative; the submit side resolved it against
// the same directory (sbatch's own), so both name one folder.
// REQUIRES: `base` absolute (callers fall back to "/").
std::string ResolvePilotOut(const std::string& out, const std::string& base);

// Who the job is, as root in the task learns it from Slurm (not from the
// job's environment).
struct TaskIdentity {
  unsigned long job_id = 0;
  unsigned long uid = 0;
  unsigned long gid = 0;
  std::string cwd = "/";  // the job's submit directory (SLURM_SUBMIT_DIR), absolute
};

// The supervisor the plugin starts for the pilot job's first task:
//   SUPERVISOR --job ID --uid UID --gid GID --policy POLICY --state-dir DIR
//              --runner RUNNER --stage STAGE [--out OUT] --cwd CWD
//              --channel CHANNEL_FD --job-env ENV_FD
// (pilot-supervisor(8)); --out only when the user gave --pilot-out, resolved
// against task.cwd (ResolvePilotOut).
std::vector<std::string> SupervisorArgv(const PluginArgs& args, const PilotRequest& request,
                                        const TaskIdentity& task, int channel_fd, int env_fd);

}  // namespace pilot::spank
