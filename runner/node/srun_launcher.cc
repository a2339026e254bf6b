// parallel.launcher = "srun": the ranks as one job step of the allocation
// the runner runs in. Slurm sets each task's SLURM_* variables, from which
// runner/node/hostlist.h derives the rank and the rendezvous.
#include <sys/types.h>

#include <cstdlib>
#include <filesystem>

#include "runner/node/launcher.h"

namespace pilot::runner {
namespace {

class SrunLauncher final : public Launcher {
 public:
  std::string Name() const override { return "srun"; }

  // One srun process for all ranks.
  std::vector<pid_t> Start(const LaunchRequest& req) override {
    std::vector<std::string> a = {"srun", "--ntasks=" + std::to_string(req.world), "--kill-on-bad-exit=1",
                                  "--wait=60", "/proc/self/exe"};
    // srun runs the executable by path on every node: use the real one.
    std::error_code ec;
    a.back() = std::filesystem::read_symlink("/proc/self/exe", ec).string();
    a.insert(a.end(), req.args.begin(), req.args.end());
    std::vector<std::string> env = req.env;
    if (const char* port = std::getenv("PILOT_MASTER_PORT")) env.push_back(std::string("PILOT_MASTER_PORT=") + port);
    return {SpawnProcess("srun", a, env)};
  }

  // srun's status does not name the task: the rank without a report or
  // with the earliest error does.
  RankBlame Blame(size_t /*index*/, int status, bool /*signalled*/,
                  const std::vector<std::optional<RankReport>>& reports) const override {
    RankBlame b;
    for (size_t r = 0; r < reports.size(); ++r) {
      const std::optional<RankReport>& rep = reports[r];
      if (!rep || rep->status != "ok") {
        b.rank = static_cast<int>(r);
        b.message = "rank " + std::to_string(r) + " failed" +
                    (rep && rep->message ? ": " + *rep->message
                                         : " (no report; srun " + DescribeWaitStatus(status) + ")");
        return b;
      }
    }
    b.message = "srun " + DescribeWaitStatus(status);
    return b;
  }
};

}  // namespace

std::unique_ptr<Launcher> MakeSrunLauncher() { return std::make_unique<SrunLauncher>(); }

}  // namespace pilot::runner
