// Where and how the processes of one phase of a user's program start: the
// job's GPUs and device, the node stage's layout (launch::DecideNodeLayout,
// the decision the builtin runner's node stage makes too), and each
// process's command line and environment: one process per rank on this
// node, one that starts its own workers (launcher "none"), or one `srun
// --label` step of a task per rank across the job's nodes; in the pinned
// image when [container] asks for one (supervisor/program/container.h).
//
// Thread-safety: pure but for launch::FreePort (a socket, any thread).
#pragma once

#include <string>
#include <vector>

#include "core/config/config.h"
#include "core/records/lock.h"
#include "launch/layout.h"
#include "supervisor/program/container.h"
#include "supervisor/program/group.h"

namespace pilot::supervisor {

// Where the program's ranks run.
struct ProgramPlacement {
  std::string gpus;    // the job's GPU list (the lock's, else CUDA_VISIBLE_DEVICES)
  std::string device;  // training.device, "auto" resolved: "cuda" with GPUs, else "cpu"
  launch::NodeLayout node;    // the node stage's
  launch::NodeLayout single;  // the single stage's: one rank
};

ProgramPlacement PlaceProgram(const Config& cfg, const Lock& lock, const std::vector<std::string>& job_env);

struct PhaseLaunchInput {
  const Config* cfg = nullptr;
  const Lock* lock = nullptr;
  std::vector<std::string> base_env;  // the allow-listed workload environment
  std::vector<std::string> job_env;
  std::string probe_path;
  const launch::NodeLayout* layout = nullptr;  // the phase's
  const ContainerSetup* container = nullptr;   // nullptr: no image
  std::string device;
  std::string stage, process;
  // The phase's socket; ignored across nodes, where each task's records go
  // to its stdout unless a loss pattern reads that.
  std::string metrics_socket;
  bool loss_pattern = false;
  // False: no PILOT_METRICS at all (a bound run, whose processes report
  // nothing: the probe stays silent, as outside a pilot).
  bool records = true;
  std::string checkpoint_dir, resume_dir;
  int64_t resume_step = 0;  // PILOT_RESUME_STEP; 0 = not set
};

struct PhaseLaunch {
  std::vector<RankLaunch> ranks;
  // What could not be set up (a process then runs /bin/false and the phase
  // fails on its exit status).
  std::vector<std::string> problems;
  std::string description;  // "2 processes of python3 train.py", for the log
};

PhaseLaunch PhaseRanks(const PhaseLaunchInput& in);

}  // namespace pilot::supervisor
