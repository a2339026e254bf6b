// How the ranks of a node-stage phase start: the launch layer, torch-free,
// shared by both workloads. pilot-runner's node stage (runner/node/stage.h)
// starts its ranks through a Launcher chosen from parallel.launcher; the
// supervisor's phases of a user's program (supervisor/program/) start
// theirs with the same pieces: srun's step (launch/srun.h), the ranks'
// variables (launch/rank_env.h), the processes (launch/spawn.h), and the
// kind's name for results.json's stages.node.launcher (kSrun, kLocal).
//
// The kinds:
//   local  one process per rank on this node, the rank's variables set by
//          the launcher, the rendezvous on the loopback interface;
//   srun   one srun step of the job's allocation, a task per rank, the
//          ranks' variables from srun's; srun's lines about its tasks name
//          the rank that failed;
//   "auto" (parallel.launcher) the first row of kLaunchers whose condition
//          holds; a program's launcher "none" is one process that starts
//          its own workers (results.json's launcher "program").
//
// Adding a launcher kind: see the recipe beside kLaunchers in
// launch/launcher.cc (and docs/design.md, "Extending the runner").
//
// Thread-safety: called from the launching process's one thread (the srun
// launcher reads srun's stderr on a thread of its own).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/records/rank_report.h"
#include "launch/spawn.h"

namespace pilot::launch {

// The kinds' names: parallel.launcher's values, results.json's
// stages.node.launcher.
inline constexpr char kLocal[] = "local";
inline constexpr char kSrun[] = "srun";

// One phase's processes as the node stage asks for them: every rank runs
// this program again (pilot-runner) with `args`.
struct LaunchRequest {
  int world = 1;                  // ranks
  std::vector<std::string> args;  // pilot-runner's arguments, without argv[0]
  std::vector<std::string> env;   // every rank's environment, less its own rank variables
};

// Which rank a failure belongs to, and the message that names it.
struct RankBlame {
  std::optional<int> rank;
  std::string message;
};

class Launcher {
 public:
  virtual ~Launcher() = default;

  // parallel.launcher's value: results.json's stages.node.launcher and the
  // progress lines.
  virtual std::string Name() const = 0;

  // Starts the phase's ranks. Returns the processes the stage watches (a
  // pid <= 0 is one that did not start; the stage then kills the others).
  virtual std::vector<pid_t> Start(const LaunchRequest& req) = 0;

  // The failure of watched process `index` (Start's order), which ended
  // with wait status `status`. `signalled`: the stage signalled the
  // remaining processes after the first failure. `reports`: the ranks'
  // reports by rank, nullopt where a rank left none (or none that reads).
  virtual RankBlame Blame(size_t index, int status, bool signalled,
                          const std::vector<std::optional<RankReport>>& reports) const = 0;
};

// The kind parallel.launcher names: "auto" is the first of the table whose
// condition holds (srun inside a Slurm job unless `nproc` (--nproc) asks
// for a number of processes, local otherwise); an unknown name is the
// table's last row. DecideNodeLayout (launch/layout.h) asks it.
std::string LauncherKind(const std::string& setting, int nproc, bool in_slurm_job);

// The launcher of a kind LauncherKind returned (the table's last row for
// another name).
std::unique_ptr<Launcher> MakeLauncher(const std::string& kind);

// MakeLauncher(LauncherKind(setting, nproc, whether SLURM_JOB_ID is set)).
std::unique_ptr<Launcher> ChooseLauncher(const std::string& setting, int nproc);

// The node stage's processes when parallel.nproc is 0, for the builtin and
// a user's program alike: one per visible GPU (on a CPU, the job's tasks
// per node when it asked for more than one, else 2) on every node the
// launcher reaches (`nodes`: the job's nodes under srun, else 1).
int DefaultNodeProcesses(bool cuda, int visible_gpus, int tasks_per_node, int nodes);

// The names of kLaunchers' rows, in its order ("auto" not included).
std::vector<std::string> LauncherNames();

}  // namespace pilot::launch
