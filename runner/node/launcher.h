// How the node stage starts the processes of a phase: a Launcher per way
// (local child processes, one srun step), chosen from parallel.launcher.
// The stage (runner/node/stage.h) builds the ranks' arguments and
// environment, watches the processes a launcher started, and reads the
// ranks' reports; a launcher starts them and says which rank a failure
// belongs to.
//
// Adding a launcher ("a new file plus a schema value"): see the recipe
// beside kLaunchers in launcher.cc.
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

namespace pilot::runner {

// One phase's processes as the stage asks for them.
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

// The launcher parallel.launcher names: "auto" is the first of the table
// whose condition holds (srun inside a Slurm job unless `nproc` (--nproc)
// asks for a number of processes, local otherwise).
std::unique_ptr<Launcher> ChooseLauncher(const std::string& setting, int nproc);

// Helpers of the launchers.
// posix_spawn(p) of `exe` (a name without '/' is looked up in PATH) with
// `args` (argv, argv[0] included) and `env`, its stderr on `stderr_fd`
// when that is >= 0 (ours otherwise); -1 with a message when it cannot
// start.
pid_t SpawnProcess(const std::string& exe, const std::vector<std::string>& args,
                   const std::vector<std::string>& env, int stderr_fd = -1);
// "exit 3", "killed by signal 9 (Killed)".
std::string DescribeWaitStatus(int status);

}  // namespace pilot::runner
