// srun's own lines about the tasks of its step, as it writes them to its
// stderr when tasks end badly:
//   srun: error: gpu02: task 2: Killed
//   srun: error: gpu01: tasks 0-1,3: Exited with exit code 3
// Read by the launch layer (launch/srun.h: the rank that failed) and the
// supervisor (the nodes where the work folder is missing). And the labels
// `srun --label` puts before each line a task writes ("  3: ..."), which
// tell one task's lines from the others' in the step's one stream.
//
// Thread-safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace pilot {

struct SrunTaskLine {
  std::string node;        // the node srun names
  std::vector<int> tasks;  // the step's task ids (global ranks), in order
  std::string what;        // "Killed", "Exited with exit code 3"
};

// The line's parts, or nullopt for any other line (a task's own output,
// srun's other messages, a task list of more than 100000 ids).
std::optional<SrunTaskLine> ParseSrunTaskLine(const std::string& line);

// A line of an `srun --label` step of `tasks` tasks split into the task's
// id and what it wrote; nullopt for a line without a task's label (srun's
// own messages) or with an id outside 0..tasks-1.
std::optional<std::pair<int, std::string>> SplitSrunLabel(const std::string& line, int tasks);

// The lines task `task` of such a step wrote, without their labels, each
// ending in '\n': the text of that task alone.
std::string SrunTaskText(std::string_view text, int task, int tasks);

}  // namespace pilot
