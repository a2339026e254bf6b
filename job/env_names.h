// The environment variable names the Slurm-side parts share: what the SPANK
// plugin records at submission, what slurmd hands the prolog and epilog, and
// what a user may set instead of an option. Every part that reads or writes
// one of these names takes it from here.
//
// How a name travels (Slurm 22.05):
//   - at submission the plugin sets kEnvConfig, kEnvConfigSha, kEnvStage,
//     kEnvOut, and for a program kEnvPins and kEnvHubCache, both in the command's environment (so the job's tasks see
//     them) and in the job control environment, which slurmd passes to the
//     prolog and epilog with a "SPANK_" prefix (kJobControlConfig, ...);
//   - Slurm forwards a plugin option --OPT of plugin PLUGIN to the prolog
//     and epilog as SPANK__SLURM_SPANK_OPTION_PLUGIN_OPT (kOptionPilot for
//     our --pilot, kOptionPyxisImage for pyxis' --container-image);
//   - the supervisor sets kEnvActive and kEnvInstance for the workload;
//     a second pilot in the same job is prevented by the task's claim of
//     runner.started (spank_plugin/remote.cc), not by these.
//
// Header only, plain character arrays and no other include: the plugin's
// front part (spank_pilot.so, libc only) includes it too, and nothing here
// needs Slurm's headers.
#pragma once

namespace pilot::job {

// Recorded by the plugin at submission (job environment and job control
// environment).
inline constexpr char kEnvConfig[] = "SLURM_PILOT_CONFIG";            // absolute config path
inline constexpr char kEnvConfigSha[] = "SLURM_PILOT_CONFIG_SHA256";  // sha256 of its text
inline constexpr char kEnvStage[] = "SLURM_PILOT_STAGE";              // single | node | all
inline constexpr char kEnvOut[] = "SLURM_PILOT_OUT";                  // --pilot-out, if given
// A program's pins at submit (job/pins.h: PinSummary as one line of JSON)
// and the Hugging Face hub cache folder the user's environment named.
inline constexpr char kEnvPins[] = "SLURM_PILOT_PINS";
inline constexpr char kEnvHubCache[] = "SLURM_PILOT_HUB_CACHE";
// A long job's pilot (--pilot-run=JOBID): the job id of the pilot whose
// grant it runs under. Set in both environments; the prolog checks the run
// against that pilot's grant (job/binding.h).
inline constexpr char kEnvPilotRun[] = "SLURM_PILOT_RUN";

// Set by pilot-supervisor in the workload's environment (the job id and
// the pilot instance). Only informative: no part trusts them, since a user
// can put any variable into a job's environment.
inline constexpr char kEnvActive[] = "SLURM_PILOT_ACTIVE";
inline constexpr char kEnvInstance[] = "SLURM_PILOT_INSTANCE";

// Set by pilot-supervisor on the srun step that runs a program's ranks
// across nodes in its pinned image ([container] runtime "podman" or
// "apptainer"; pyxis's step carries pyxis's own options instead): in each
// task of that step the plugin hands the task to `pilot-supervisor
// --container-task` (root), which runs it under the runtime. The image must be
// the one root's record of the job on that node pinned, a bind a folder of
// the job's user or the probe's, a mount one the site allows, each checked
// there (spank_pilot(8), CONTAINERS); so a user who sets these in a step of
// their own gets no more than their command in the pilot's image, as
// themselves. Newline-separated lists.
inline constexpr char kEnvContainerImage[] = "SLURM_PILOT_CONTAINER_IMAGE";    // REPO@sha256:HEX
inline constexpr char kEnvContainerBinds[] = "SLURM_PILOT_CONTAINER_BINDS";    // folders, same path inside
inline constexpr char kEnvContainerMounts[] = "SLURM_PILOT_CONTAINER_MOUNTS";  // container.mounts
inline constexpr char kEnvContainerWorkdir[] = "SLURM_PILOT_CONTAINER_WORKDIR";
inline constexpr char kEnvContainerRuntime[] = "SLURM_PILOT_CONTAINER_RUNTIME";  // podman | apptainer

// The prefix slurmd puts before names of the job control environment when
// it hands them to the prolog and epilog, and the names they read.
inline constexpr char kJobControlPrefix[] = "SPANK_";
inline constexpr char kJobControlConfig[] = "SPANK_SLURM_PILOT_CONFIG";
inline constexpr char kJobControlConfigSha[] = "SPANK_SLURM_PILOT_CONFIG_SHA256";
inline constexpr char kJobControlStage[] = "SPANK_SLURM_PILOT_STAGE";
inline constexpr char kJobControlOut[] = "SPANK_SLURM_PILOT_OUT";
inline constexpr char kJobControlPins[] = "SPANK_SLURM_PILOT_PINS";
inline constexpr char kJobControlHubCache[] = "SPANK_SLURM_PILOT_HUB_CACHE";
inline constexpr char kJobControlPilotRun[] = "SPANK_SLURM_PILOT_RUN";

// Options as Slurm forwards them to the prolog and epilog.
inline constexpr char kOptionPilot[] = "SPANK__SLURM_SPANK_OPTION_pilot_pilot";
inline constexpr char kOptionPyxisImage[] = "SPANK__SLURM_SPANK_OPTION_pyxis_container_image";

// What a user may set in place of --pilot, --pilot-stage and --pilot-out
// (read by the plugin at submission; spank_pilot(8)).
inline constexpr char kUserConfig[] = "PILOT_CONFIG";
inline constexpr char kUserStage[] = "PILOT_STAGE";
inline constexpr char kUserOut[] = "PILOT_OUT";
inline constexpr char kUserPilotRun[] = "PILOT_RUN";

// The site policy file the `pilot` command reads when --policy is not given
// (pilot(1)).
inline constexpr char kUserPolicy[] = "PILOT_POLICY";

}  // namespace pilot::job
