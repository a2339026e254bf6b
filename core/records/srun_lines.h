// srun's own lines about the tasks of its step, as it writes them to its
// stderr when tasks end badly:
//   srun: error: gpu02: task 2: Killed
//   srun: error: gpu01: tasks 0-1,3: Exited with exit code 3
// Read by the launch layer (launch/srun.h: the rank that failed) and the
// supervisor (the nodes where the work folder is missing).
//
// Thread-safety: pure functions.
#pragma once

#include <optional>
#include <string>
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

}  // namespace pilot
