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
// Only podman is run by the supervisor today; pyxis and Apptainer are
// refused with a sentence naming them (their argv is built and unit
// tested, not exercised end to end). Ranks across nodes run one srun step
// whose tasks each node's plugin hands to a root process that runs them
// in the image (container_task.h).
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
};

// "" when the program can run in `cfg`'s runtime here, else the sentence
// that says why not (program.problems, the verdict names it): a runtime
// the site does not allow, one the supervisor does not run, a mount
// outside allowed_mounts, an image the prolog did not pin by digest.
std::string ContainerProblem(const Config& cfg, const Lock& lock, const Policy& policy);

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

// Reads the image's digest and id back from the runtime (podman image
// inspect, as root, 60 s at most).
ProgramContainer ReadBackContainer(const ContainerSetup& setup);

// Why the runtime did not start the program, from the first process whose
// exit status is podman's own (125: podman itself failed, as a pull of an
// image the registry does not have; 126: the command in the image could not
// be run; 127: the image has no such command), with the last "Error:" line
// of its standard error; "" when no process ended so.
std::string ContainerStartFailure(const std::vector<ProgramProcess>& processes);

}  // namespace pilot::supervisor
