// One task of a program's srun step across nodes, run in the pinned image
// (`pilot-supervisor --container-task`, spank_pilot(8), CONTAINERS).
//
// podman starts as root, and a step of the user's job cannot run as root
// on the job's other nodes; Apptainer runs as the user but must be given
// each task's own variables (its --cleanenv drops the rest), and the image
// checked against this node's pin. So the supervisor marks the step
// (job/env_names.h: kEnvContainerImage and friends), the plugin hands each
// of its tasks, on every node, to this root process (the socket pair of
// job/task_channel.h: the task's stdio and its environment as slurmstepd
// made it), and this process runs the task's command under the runtime as
// launch/container.h spells it, with the task's stdio, as the job's user.
//
// Nothing that decides what runs as root is taken from the task without a
// check against root's own files on this node:
//   - the job: its lock (the first node) or this node's prolog record
//     (STATE/nodes/JOBID/NODE.json), root's plain file naming this job and
//     uid;
//   - the image: the one that record pinned, by digest (Apptainer: or the
//     image file by its SHA-256), and only it;
//   - the runtime: podman or Apptainer, as the step names it
//     (kEnvContainerRuntime; podman when absent), allowed by the site's
//     policy;
//   - binds at the same path: a folder the job's user owns (no link on the
//     way), or the probe's folder; a mount of container.mounts: one the
//     site's allowed_mounts allows;
//   - the GPUs: the record's GPUs of the job on this node;
//   - the container's cgroup: inside the task's.
// The command and the program's environment are the task's: the user's
// own, run as the user in the image.
//
// Thread-safety: one call per process (it forks and waits).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/base/status.h"
#include "core/records/lock.h"
#include "core/records/policy.h"
#include "job/subprocess.h"
#include "supervisor/program/container.h"

namespace pilot::supervisor {

struct ContainerTaskInput {
  int64_t job_id = -1;
  int64_t step_id = -1;
  int64_t task_id = -1;            // the task's global id (its rank)
  std::string node;                // this node's Slurm name
  job::RunAs run_as;               // the job's user
  const Policy* policy = nullptr;  // this node's
  std::vector<std::string> env;    // the task's, NAME=value
  std::vector<std::string> command;
};

// What runs: `setup` and the task's command and environment wrapped in the
// image (argv, env, as_root), or why not (kInvalid, naming what failed the
// check). Reads root's files; starts nothing.
Result<RankLaunch> PlanContainerTask(const ContainerTaskInput& in);

// The record of the job on this node that PlanContainerTask trusts: the
// lock when this node holds it, else the node's own prolog record.
// Errors: kNotFound when neither is there; kInvalid when one is not root's
// plain file naming the job and uid.
Result<Lock> NodeRecordOfJob(const Policy& policy, int64_t job_id, uid_t uid,
                             const std::string& node);

// Plans and runs the task; its exit status (the runtime's, which is the
// command's; 128+N for a signal; 1 with a `pilot:` line on stderr when the
// task may not run). SIGTERM and SIGINT are passed on to the runtime; a
// podman container still there after a signal (its PID 1 may ignore
// SIGTERM) is removed before this returns.
int RunContainerTask(const ContainerTaskInput& in);

}  // namespace pilot::supervisor
