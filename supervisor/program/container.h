// A user's program in the pinned image ([container] runtime, pilot.toml(5)):
// what the supervisor checks before the first phase, how it turns one
// process's command into the runtime's (launch/container.h builds the
// argv), and the digest it reads back from the runtime afterwards.
//
// Inside, the protocol is the one of pilot-program(7): the process's
// environment less what only makes sense on the node (PATH, HOME, LD_*:
// the image has its own), the job's work folder (checkpoints included),
// the phase's metrics socket folder, the probe and the program's working
// folder bound at the same paths, the job's user and group, the job's
// GPUs only (renumbered from 0 inside, as CUDA_VISIBLE_DEVICES says).
//
// podman starts as root and drops to the user inside; Apptainer runs as
// the user; pyxis is an srun step of the job (one per process), as the
// user. Ranks across nodes run one srun step: pyxis's with pyxis's options,
// podman's and Apptainer's tasks each handed by its node's plugin to a root
// process that runs it in the image (container_task.h). Only podman is
// exercised end to end (pyxis and Apptainer are not packaged for Debian
// 12; their argv is unit tested).
//
// Thread-safety: the supervisor's single thread (RunCommand forks).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/config/config.h"
#include "core/config/mounts.h"
#include "core/records/lock.h"
#include "core/records/policy.h"
#include "core/records/results.h"
#include "job/subprocess.h"
#include "supervisor/program/group.h"

namespace pilot::supervisor {

struct ContainerSetup {
  std::string runtime;            // container.runtime
  std::string image;              // the lock's pinned REPO@sha256:HEX
  std::vector<Mount> mounts;      // the pilot's binds, then container.mounts
  std::vector<std::string> gpus;  // the job's GPU indices on the node
  const ContainerPolicy* site = nullptr;
  std::optional<job::RunAs> run_as;
  std::string workdir;
  // Across nodes: what each task of the srun step asks its node to bind
  // (container_task.h): the work folder, the probe and the working folder
  // (the metrics socket's folder is the first node's, and unused there).
  std::vector<std::string> task_binds;
  std::string node;  // pyxis: the node of the single stage's steps ("" = srun's choice)
};

// "" when the program can run in `cfg`'s runtime here, else the sentence
// that says why not (program.problems, the verdict names it): a runtime
// the site does not allow or that is not installed (podman, Apptainer), a mount outside
// allowed_mounts, an image the prolog did not pin by digest (or, for
// Apptainer and pyxis, by a file's SHA-256).
std::string ContainerProblem(const Config& cfg, const Lock& lock, const Policy& policy);

// The runtime's program as the site names it, looked up in root's PATH
// ("" when not found); "srun" for pyxis, looked up in the job's PATH.
std::string RuntimeProgram(const std::string& runtime, const ContainerPolicy& site);

// The setup of a pilot whose config and lock passed ContainerProblem: the
// pinned image, the job's GPUs (`gpus`, a CUDA_VISIBLE_DEVICES list), the
// lock's host for pyxis, and the binds: `own` (the work folder, the
// metrics folder, the probe, the working folder; one that does not exist
// is left out, as podman refuses a bind without its source) then
// container.mounts; each node of a step across nodes binds `own` less
// `metrics_dir`. The working folder is the user's to name: it is resolved
// as the job's user (`realpath -e`, 10 s at most), so root binds no folder
// the user could not reach, and bound from where it resolves.
// Errors: kInvalid, the detail a sentence: ContainerProblem's, or one
// naming the folder when the user cannot reach it.
Result<ContainerSetup> MakeContainerSetup(const Config& cfg, const Lock& lock, const Policy& policy,
                                  const std::optional<job::RunAs>& run_as,
                                  const std::string& workdir, const std::string& gpus,
                                  const std::vector<std::string>& own,
                                  const std::string& metrics_dir);

// The variables that mark the srun step of ranks across nodes to be run in
// the image, task by task, on every node (job/env_names.h,
// container_task.h), set in `env`.
void MarkContainerStep(const ContainerSetup& setup, const Config& cfg,
                       std::vector<std::string>* env);

// The binds every process gets: `paths` (work folder, metrics folder,
// probe, working folder; each once, "" skipped) read-write, then
// container.mounts as written.
std::vector<Mount> ContainerMounts(const std::vector<std::string>& paths, const Config& cfg);

// Rewrites `r` (argv, env; as_root for podman) to run its command in the
// image. Errors: kInvalid from launch::BuildContainerCommand.
Status WrapInContainer(const ContainerSetup& setup, const std::string& name, RankLaunch* r);

// The container a killed or stopped runtime left behind
// (RankLaunch::cleanup_argv; nothing when it is empty). Start: begun now,
// beside a SIGTERM (a container's PID 1 ignores it unless it handles it,
// and a job's processes may get little time after scancel's: KillWait),
// as root for a process started as root; returns its pid, or -1. Remove:
// run to its end, 30 s at most, as the process was started (as root, else
// as `run_as`); what went wrong is said on standard error after `who`
// ("pilot: WHO: NAME was not removed: ...").
pid_t StartContainerRemoval(const RankLaunch& r);
void RemoveContainer(const RankLaunch& r, const std::optional<job::RunAs>& run_as, const std::string& who);

// pyxis across nodes: the options of the ranks' srun step (before its
// command), and `env` made the step's (node-only variables out, root's
// PATH). Errors: kInvalid from launch::BuildContainerCommand.
Result<std::vector<std::string>> PyxisStep(const ContainerSetup& setup,
                                           std::vector<std::string>* env);

// What ran, after the processes did: a registry image under podman read
// back with podman image inspect (as root, 60 s at most); an image file
// hashed again as the user; under Apptainer and pyxis, which report
// nothing, the digest the processes were started with, once one of
// `processes` reported a step.
ProgramContainer ReadBackContainer(const ContainerSetup& setup,
                                   const std::vector<ProgramProcess>& processes);

// Why `runtime` did not start the program, from the first process that
// ended so: podman's own exit status (125: podman itself failed, as a pull
// of an image the registry does not have; 126: the command in the image
// could not be run; 127: the image has no such command) with its last
// "Error:" line; for Apptainer and pyxis, a process that reported no step
// and whose standard error holds Apptainer's "FATAL:" line or pyxis's
// error (srun's, when pyxis is not installed). "" when none ended so.
std::string ContainerStartFailure(const std::string& runtime,
                                  const std::vector<ProgramProcess>& processes);

}  // namespace pilot::supervisor
