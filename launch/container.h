// The command line that runs one process of a user's program inside the
// image the prolog pinned ([container] runtime, pilot.toml(5); the site's
// [container], pilot.conf(5)). One function, ContainerCommand, builds it
// for every runtime, so that what runs is spelled in one place:
//
//   podman     podman [--root CACHE] run --rm --pull=missing --user UID:GID
//              --network=host --security-opt=no-new-privileges
//              --cap-drop=all --workdir DIR --name NAME
//              --env NAME (value from podman's own environment) ...
//              --volume SRC:DST[:ro] ... --device nvidia.com/gpu=I ...
//              [site args] --entrypoint= IMAGE@sha256:HEX COMMAND...
//              Started as root (podman drops to --user inside);
//              CONTAINERS_CONF names the site's containers.conf.
//   apptainer  apptainer exec --cleanenv --contain --pwd DIR
//              --bind SRC:DST[:ro],... [--nv] [site args]
//              docker://IMAGE@sha256:HEX COMMAND... (or the .sif file
//              the prolog hashed), as the user; the environment as
//              APPTAINERENV_NAME=VALUE; the job's CUDA_VISIBLE_DEVICES
//              as it is (the host's numbering: Apptainer shares /dev).
//   pyxis      srun --overlap --nodes=1 --ntasks=1 [--nodelist=NODE]
//              PYXIS FLAGS COMMAND..., as the user, inside the job; the
//              environment is srun's own, which pyxis passes on. PYXIS
//              FLAGS (PyxisFlags, also those of a step across nodes):
//              --container-image=REGISTRY#REPO@sha256:HEX
//              --container-workdir=DIR --no-container-remap-root
//              --no-container-mount-home --container-mounts=SRC:DST[:ro],...
//              [site args].
//
// Never by tag: `image` must carry its digest (the lock's pinned
// reference) or be a local file. Environment values never appear on the
// command line (a program's secrets would be in /proc/PID/cmdline for
// every user of the node, and a newline or comma would split them): the
// returned env carries them. Podman and Apptainer are given the job's
// GPUs only; Apptainer's and pyxis's processes get what Slurm confines the
// job (or step) to.
//
// Adding a container runtime (every file it touches, in the order a
// program's process meets them):
//   1. Its name: kRuntime<Name> below; container.runtime's choices
//      (core/config/config_schema.cc, config.h's comment), the site's
//      allowed_runtimes (core/records/policy.cc's check, policy.h) and
//      results.json's program.container.runtime (core/records/results.cc's
//      OneOf); whether it takes an image file (core/config/config_validate.cc).
//   2. Its command line: a case of BuildContainerCommand (launch/
//      container.cc): by digest only, values in the returned env, the
//      job's GPUs only, as_root and remove_argv where the runtime needs
//      them; its argv in the table above; tests in tests/launch/
//      container_test.cc, exact.
//   3. The supervisor (supervisor/program/container.cc): the program it
//      runs (RuntimeProgram, the site's <name>_path in pilot.conf), the
//      site's arguments and cache (RunOf), what it runs with (RuntimeEnv),
//      what ran read back (ReadBackContainer: the digest the runtime
//      reports, else "reference" with its reason), the line in which it
//      says why an image did not start (RuntimeSaid); tests in
//      tests/supervisor/program_container_test.cc.
//   4. Across nodes: either its options go on the ranks' srun step (as
//      pyxis's, PyxisStep) or each node's plugin hands the task to root
//      (MarkContainerStep; PlanContainerTask's list of runtimes in
//      supervisor/program/container_task.cc, tested in
//      tests/supervisor/container_task_test.cc).
//   5. The prolog pins its image as for the others (an image file: by
//      sha256); pilot.toml(5), pilot.conf(5), pilot-program(7) and
//      spank_pilot(8)'s CONTAINERS say what it runs and what it binds.
//
// Pure; thread-safe. Only podman is exercised end to end here (pyxis and
// Apptainer are not packaged for Debian 12: spank_pilot(8)).
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "core/base/status.h"
#include "core/config/mounts.h"

namespace pilot::launch {

inline constexpr char kRuntimeNone[] = "none";
inline constexpr char kRuntimePodman[] = "podman";
inline constexpr char kRuntimeApptainer[] = "apptainer";
inline constexpr char kRuntimePyxis[] = "pyxis";

struct ContainerRun {
  std::string runtime;  // kRuntimePodman, kRuntimeApptainer, kRuntimePyxis
  std::string image;    // "REPO@sha256:HEX" or an image file
  uid_t uid = 0;
  gid_t gid = 0;
  std::string workdir;                 // absolute, the same inside
  std::vector<std::string> env;        // NAME=VALUE the program is given
  std::vector<Mount> mounts;           // binds, each at its destination
  std::vector<std::string> gpus;       // the job's GPU indices ("0", "3"); none: a CPU run
  std::vector<std::string> site_args;  // the site's for this runtime (pilot.conf)
  std::string program_path;            // podman or apptainer to run
  std::string image_cache;             // podman --root, APPTAINER_CACHEDIR ("" = default)
  std::string containers_conf;         // podman: CONTAINERS_CONF ("" = podman's own)
  std::string name;                    // podman's container name ("" = podman picks)
  // podman: the cgroup the container's own group is made under, so that it
  // stays inside the job's (supervisor/cgroup.h); "" = podman's default.
  std::string cgroup_parent;
  std::string node;                    // pyxis: the node its step runs on ("" = srun's choice)
  std::vector<std::string> command;    // the program's argv
};

struct ContainerCommand {
  std::vector<std::string> argv;
  // The environment to start argv with (complete: the caller's variables
  // the runtime needs, PATH, HOME, plus what carries the program's).
  std::vector<std::string> env;
  bool as_root = false;  // podman: started by root, the program runs as uid:gid
  // podman, a named container: removes it whatever its state (podman rm
  // --force --ignore --time 0 NAME), to be run (as argv is, with env) when
  // argv was ended by a signal: a killed `podman run` leaves its container
  // running under conmon, and a program that is the container's PID 1
  // ignores SIGTERM unless it handles it. Empty otherwise.
  std::vector<std::string> remove_argv;
};

// Errors: kInvalid naming the value: an unknown runtime, an image without
// its digest, a relative workdir, a node that is not one name, an env entry without '=' or with a name
// that is not [A-Za-z_][A-Za-z0-9_]*, a mount that ParseMount would refuse,
// a GPU index that is not a number, an empty command.
// `base_env`: the variables the runtime itself runs with (PATH, HOME...).
Result<ContainerCommand> BuildContainerCommand(const ContainerRun& run,
                                               const std::vector<std::string>& base_env);

// pyxis's options for a step of `run` (the part of the pyxis argv above
// after srun's own); the step's srun and command are the caller's.
std::vector<std::string> PyxisFlags(const ContainerRun& run);

// pyxis's spelling of a registry reference: the registry host separated by
// '#' ("reg.io:5000/a/b@sha256:.." -> "reg.io:5000#a/b@sha256:.."); a
// Docker Hub name (no host) and a file are returned unchanged.
std::string PyxisImage(const std::string& image);

// The digest of a reference "REPO@sha256:HEX" ("" when it has none).
std::string DigestOf(const std::string& image);

}  // namespace pilot::launch
