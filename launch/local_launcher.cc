// parallel.launcher = "local": the ranks as child processes of this one,
// on this machine, with the PILOT_* rank variables (launch/rank_env.h,
// read back by RankFromEnv) and a rendezvous on the loopback
// interface.
#include <signal.h>
#include <sys/wait.h>

#include <cstdlib>

#include "launch/launcher.h"
#include "launch/rank_env.h"

namespace pilot::launch {
namespace {

class LocalLauncher final : public Launcher {
 public:
  std::string Name() const override { return kLocal; }

  // One process per rank: watched process r is rank r.
  std::vector<pid_t> Start(const LaunchRequest& req) override {
    const int port =
        std::getenv("PILOT_MASTER_PORT") ? std::atoi(std::getenv("PILOT_MASTER_PORT")) : FreePort();
    std::vector<pid_t> pids;
    for (int r = 0; r < req.world; ++r) {
      std::vector<std::string> e = req.env;
      RankPlace place;
      place.rank = r;
      place.local_rank = r;
      place.world_size = req.world;
      place.master_port = port;
      SetRankEnv(&e, place, RankVars::kPilot);
      std::vector<std::string> a = {"pilot-runner"};
      a.insert(a.end(), req.args.begin(), req.args.end());
      pids.push_back(SpawnProcess("/proc/self/exe", a, e));
    }
    return pids;
  }

  RankBlame Blame(size_t index, int status, bool signalled,
                  const std::vector<std::optional<RankReport>>& reports) const override {
    const int r = static_cast<int>(index);
    const std::optional<RankReport>& rep = reports[r];
    const bool stopped_by_us = signalled && WIFSIGNALED(status) &&
                               (WTERMSIG(status) == SIGTERM || WTERMSIG(status) == SIGKILL) && !rep;
    RankBlame b;
    b.rank = r;
    b.message = "rank " + std::to_string(r) + " failed (" + DescribeWaitStatus(status) +
                (stopped_by_us ? ": it stopped responding and the launcher ended it" : "") + ")" +
                (rep && rep->message ? ": " + *rep->message : "");
    return b;
  }
};

}  // namespace

std::unique_ptr<Launcher> MakeLocalLauncher() { return std::make_unique<LocalLauncher>(); }

}  // namespace pilot::launch
