// Before the node stage of a job of several nodes: whether the job's work
// folder, where every rank writes its checkpoint (and the builtin ranks
// their reports), is a folder the job's user can enter and write on every
// node. A pilot across nodes needs it on a file system the nodes share
// (work_root, pilot.conf(5)); without one the ranks on the other nodes
// fail with nothing to say why.
//
// One srun step of one task per node runs `test -d -w -x` on the folder as
// the job's user.
//
// Thread-safety: forks (job::RunCommand); the supervisor's single thread.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "job/subprocess.h"

namespace pilot::supervisor {

struct WorkOnNodesInput {
  std::optional<job::RunAs> run_as;  // the job's user
  std::vector<std::string> env;      // the workload's (SLURM_* included: srun joins the job)
  std::vector<std::string> hosts;    // the job's nodes
  std::string work;                  // the work folder
  double timeout_seconds = 60;
};

// The sentence the node stage fails with when a node lacks the folder;
// nullopt when every node has it, or when the check itself could not run
// (said through `log`: the node stage then shows what is wrong).
std::optional<std::string> WorkFolderMissing(const WorkOnNodesInput& in,
                                             const std::function<void(const std::string&)>& log);

// The nodes srun's stderr names as having a task that failed, in order,
// each once.
std::vector<std::string> FailedNodesOf(const std::string& srun_stderr);

// `name` looked up in the PATH of `env` (an absolute path), or "".
std::string FindInPath(const std::vector<std::string>& env, const std::string& name);

}  // namespace pilot::supervisor
