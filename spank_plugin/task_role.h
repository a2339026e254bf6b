// What a task of a step does: start the pilot (the first task, global task
// 0, of the step that claims it), run the step's own command, or refuse.
// Decided by root in the task's privileged hook (spank_plugin/remote.cc)
// from files only root writes; no Slurm header here, so the tests decide
// without a cluster.
//
// A job that asked for a pilot (its --pilot option, or the
// SLURM_PILOT_CONFIG the plugin recorded at submission: the caller says
// which by `asked`) is a pilot job whether or not its lock is there:
//   - its lock (STATE/jobs/JOBID/lock.json: root's, a plain file, naming
//     this job and this uid) without the problem state_space_low: kPilot,
//     the lock returned (the caller then claims runner.started, which a
//     later step finds taken and so runs its own command);
//   - that lock with state_space_low (job/reserve.h): kRefuse, its detail
//     in the message;
//   - a lock of another job or user, or one that does not read: kRefuse;
//   - no lock, and this node's own record of the job
//     (STATE/nodes/JOBID/NODE.json, as the prolog of a job's other node
//     writes it, naming this job and uid): another node of a job of
//     several, whose pilot runs on its first node: kOwnCommand;
//   - no lock otherwise (its prolog could not write one: a full state file
//     system; or a node without pilot-prolog): kRefuse, "no lock for this
//     pilot job": neither the pilot nor the job's command runs.
// kRefuse holds for every task of every step of the job; kPilot only lets
// task 0 claim the pilot (the others run as they always did).
// A job that did not ask: kOwnCommand, whatever files there are.
//
// `node` is this node's Slurm name as slurmstepd's own environment has it
// (SLURMD_NODENAME, set by slurmstepd for itself, not the job's copy);
// "" when unknown, which never makes a node another node of the job.
//
// Thread-safety: reads files; no shared state.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "core/records/lock.h"
#include "job/state_layout.h"

namespace pilot::spank {

enum class TaskRole { kOwnCommand, kPilot, kRefuse };

struct TaskDecision {
  TaskRole role = TaskRole::kOwnCommand;
  Lock lock;            // kPilot: the job's lock
  std::string message;  // kRefuse: "job N: what: detail", for the job's output and the log
};

TaskDecision DecideTask(const job::StateLayout& layout, int64_t job_id, uid_t uid, bool asked,
                        const std::string& node);

}  // namespace pilot::spank
