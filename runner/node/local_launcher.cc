// parallel.launcher = "local": the ranks as child processes of this one,
// on this machine, with the PILOT_* rank variables (core/records/hostlist.h)
// and a rendezvous on the loopback interface.
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>

#include "core/records/hostlist.h"
#include "runner/node/launcher.h"

namespace pilot::runner {
namespace {

// A free TCP port on the loopback interface (the kernel's choice).
int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return kPortBase;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof(a);
  int port = kPortBase;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  ::close(fd);
  return port;
}

class LocalLauncher final : public Launcher {
 public:
  std::string Name() const override { return "local"; }

  // One process per rank: watched process r is rank r.
  std::vector<pid_t> Start(const LaunchRequest& req) override {
    const int port = std::getenv("PILOT_MASTER_PORT") ? std::atoi(std::getenv("PILOT_MASTER_PORT")) : FreePort();
    std::vector<pid_t> pids;
    for (int r = 0; r < req.world; ++r) {
      std::vector<std::string> e = req.env;
      e.push_back("PILOT_RANK=" + std::to_string(r));
      e.push_back("PILOT_WORLD_SIZE=" + std::to_string(req.world));
      e.push_back("PILOT_LOCAL_RANK=" + std::to_string(r));
      e.push_back("PILOT_MASTER_ADDR=127.0.0.1");
      e.push_back("PILOT_MASTER_PORT=" + std::to_string(port));
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

}  // namespace pilot::runner
