// The ranks of a phase as one srun step of the job's allocation: srun's
// command line, the command each task runs, and reading what srun writes
// (its --label prefixes, its own lines about tasks that ended badly,
// core/records/srun_lines.h) back into ranks.
//
// Thread-safety: pure functions.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/records/srun_lines.h"

namespace pilot::launch {

// One srun step of `tasks` tasks (one per rank; task id = global rank).
struct SrunStep {
  std::string srun = "srun";  // a path, or a name looked up in PATH
  int tasks = 1;
  // > 0: over this many nodes, tasks / nodes on each, srun's block
  // distribution (the first tasks / nodes ranks on the first node, and so
  // on); 0: as srun places them.
  int nodes = 0;
  bool label = false;                // --label: each output line starts with its task's id
  std::vector<std::string> options;  // more of srun's, before the command (pyxis's)
  std::vector<std::string> command;  // every task's argv
};

// srun's argv: srun [--nodes=N] --ntasks=T [--ntasks-per-node=T/N
// --distribution=block] --kill-on-bad-exit=1 --wait=60 [--label] OPTIONS
// COMMAND.
// A task that fails ends the step; the others get 60 s after the first
// task ends.
std::vector<std::string> SrunStepArgv(const SrunStep& step);

// `command` wrapped for a task of an srun step: torchrun's variables
// (RANK, LOCAL_RANK, GROUP_RANK, NODE_RANK) from srun's, MASTER_ADDR at
// srun's launch node (the first node, where rank 0 runs) where srun gives
// its address, and, where PILOT_METRICS is set, the records on the task's
// stdout (descriptor 3 of the command, PILOT_METRICS=/proc/self/fd/3) and
// the command's own stdout on its stderr.
std::vector<std::string> TorchrunTaskCommand(const std::vector<std::string>& command);

// A line of an `srun --label` step split into the task's id and what it
// wrote (core/records/srun_lines.h).
using ::pilot::SplitSrunLabel;

// A task srun's lines name as failed: the line and the task (its rank).
struct FailedTask {
  const SrunTaskLine* line = nullptr;  // points into the lines searched
  int task = -1;
};

// srun's first line about a task that failed names the rank to blame: the
// others it reports after it were ended because of it, or failed when
// their peer went away. Tried in `passes` passes, the lines in srun's
// order and each line's tasks in order: the first (line, task) that
// `accept(pass, line, task)` takes, or nullopt.
std::optional<FailedTask> FirstFailedTask(
    const std::vector<SrunTaskLine>& lines, int passes,
    const std::function<bool(int pass, const SrunTaskLine& line, int task)>& accept);

// FirstFailedTask by srun's words alone: a task a signal ended (or another
// reason) before one that exited ("Exited with exit code 1"), and that
// before one srun ended ("Terminated"): the peers of a killed rank usually
// exit with an error of their own. The line's first task.
std::optional<FailedTask> FailedTaskBySrunWords(const std::vector<SrunTaskLine>& lines);

}  // namespace pilot::launch
