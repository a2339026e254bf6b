// The C interface between spank_pilot.so (the small plugin Slurm loads into
// every srun, sbatch, salloc and slurmstepd) and spank_pilot_impl.so (the
// part that validates configs and starts the runner, with pilot_core, the
// TOML parser and OpenSSL behind it).
//
// Why two objects: loading the implementation's libraries costs tens of
// milliseconds, and every submission of every user loads the plugin. The
// front part depends on libc only and loads the implementation with
// dlopen() when a job asks for a pilot (and in slurmstepd), so a job without
// --pilot pays well under a millisecond (bench/RESULTS.md).
//
// Every function returns a SPANK return code (0 or -1) and never throws.
#pragma once

extern "C" {
#include <slurm/spank.h>
}

extern "C" {

// What the options (or their environment fallbacks) asked for. Strings are
// never null; *_given is 1 when the option came from Slurm (command line or
// forwarded), 0 when the default applies.
struct pilot_request {
  const char* config;
  const char* stage;
  const char* out;
  int config_given;
  int stage_given;
  int out_given;
};

// Parses the plugstack arguments (ac, av) and, in slurmstepd, the policy.
int pilot_impl_init(spank_t sp, int ac, char** av);
// srun / sbatch / salloc: validate and record the pilot. REQUIRES: init.
int pilot_impl_submit(spank_t sp, const struct pilot_request* req);
// slurmstepd, in the task: claim the pilot (root), then exec the runner.
int pilot_impl_task_init_privileged(spank_t sp, const struct pilot_request* req);
int pilot_impl_task_init(spank_t sp, const struct pilot_request* req);

}  // extern "C"
