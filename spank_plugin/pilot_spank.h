// Internal interface of spank_pilot_impl.so: the state shared by the hooks
// of one process and one entry point per Slurm context. dispatch.cc (the
// front part, spank_pilot.so) holds the `slurm_spank_*` symbols and the
// options, and forwards here through impl.cc (see impl_api.h).
//
// Every function returns a SPANK return code (0 or -1) and never lets an
// exception escape: the callers are C.
//
// Thread-safety: Slurm calls the hooks of one process from one thread.
#pragma once

// spank.h declares the slurm_spank_* hooks outside its extern "C" block;
// included from C++ they must get C linkage to match our definitions.
extern "C" {
#include <slurm/spank.h>
}

#include <string>

#include "job/env_names.h"
#include "spank_plugin/plugin_args.h"

namespace pilot::spank {

// Per-process plugin state. Filled by init (plugstack arguments) and by the
// option callbacks; the callbacks may run twice (once from the environment
// Slurm forwards, once from the command line) and simply overwrite.
struct PluginState {
  PluginArgs args;
  PilotRequest request;
  bool pilot_option_seen = false;  // --pilot given (or forwarded)
  bool stage_given = false;        // --pilot-stage given
  bool out_given = false;          // --pilot-out given
  bool replace_task = false;       // remote: this task hands over to the supervisor
  int channel_fd = -1;             // remote: the task's end of the supervisor channel
  bool container_task = false;     // remote: the supervisor runs this task in the image
  std::string deferred_error;      // remote: reported from task_init
};
PluginState& State();

// slurmstepd: state_dir and runner not given in plugstack.conf come from
// the policy file (a missing or broken policy keeps the defaults, logged).
void ApplyPolicy(PluginArgs* args);

// Logging: `pilot: ...` in the daemon's log (slurm_error).
void LogError(const std::string& message);

// sbatch / salloc / srun: validate the config and mark the job.
int SubmitInitPostOpt(spank_t sp);

// slurmstepd: decide in the task (as root) whether it runs the pilot and
// start pilot-supervisor, then (as the user) hand the supervisor the job's
// stdio and wait for it in place of the user's command.
int RemoteTaskInitPrivileged(spank_t sp);
int RemoteTaskInit(spank_t sp);

}  // namespace pilot::spank
