// parallel.launcher = "srun": the ranks as one job step of the allocation
// the runner runs in (SrunStepArgv, launch/srun.h). Slurm sets each task's
// SLURM_* variables, from which RankFromEnv (launch/rank_env.h) derives the rank
// and the rendezvous.
//
// srun's stderr (its own lines and the tasks' stderr it forwards) passes
// through a pipe: a thread copies it to ours as it comes and keeps srun's
// lines about its tasks ("srun: error: gpu02: task 2: Killed"), which name
// the node and the task of a rank that died without a report of its own.
#include <fcntl.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/records/srun_lines.h"
#include "launch/launcher.h"
#include "launch/srun.h"

namespace pilot::launch {
namespace {

// What the reading thread shares with the launcher; owned by both, so a
// thread still reading (a task that kept srun's stderr open) never
// outlives it.
struct StderrCopy {
  std::mutex m;
  std::condition_variable cv;
  bool done = false;
  std::vector<SrunTaskLine> lines;
};

void CopyStderr(int fd, std::shared_ptr<StderrCopy> copy) {
  std::string pending;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    std::fwrite(buf, 1, static_cast<size_t>(n), stderr);
    std::fflush(stderr);
    pending.append(buf, static_cast<size_t>(n));
    for (size_t nl; (nl = pending.find('\n')) != std::string::npos;) {
      if (std::optional<SrunTaskLine> t = ParseSrunTaskLine(pending.substr(0, nl))) {
        std::lock_guard<std::mutex> g(copy->m);
        if (copy->lines.size() < 1000) copy->lines.push_back(std::move(*t));
      }
      pending.erase(0, nl + 1);
    }
    if (pending.size() > (64 << 10)) pending.clear();  // a line too long to be srun's
  }
  ::close(fd);
  std::lock_guard<std::mutex> g(copy->m);
  copy->done = true;
  copy->cv.notify_all();
}

class SrunLauncher final : public Launcher {
 public:
  ~SrunLauncher() override { Finish(); }

  std::string Name() const override { return kSrun; }

  // One srun process for all ranks.
  std::vector<pid_t> Start(const LaunchRequest& req) override {
    Finish();
    SrunStep step;
    step.tasks = req.world;
    // srun runs the executable by path on every node: use the real one.
    std::error_code ec;
    step.command = {std::filesystem::read_symlink("/proc/self/exe", ec).string()};
    step.command.insert(step.command.end(), req.args.begin(), req.args.end());
    const std::vector<std::string> a = SrunStepArgv(step);
    std::vector<std::string> env = req.env;
    if (const char* port = std::getenv("PILOT_MASTER_PORT"))
      env.push_back(std::string("PILOT_MASTER_PORT=") + port);
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return {SpawnProcess("srun", a, env)};
    const pid_t pid = SpawnProcess("srun", a, env, fds[1]);
    ::close(fds[1]);
    copy_ = std::make_shared<StderrCopy>();
    reader_ = std::thread(CopyStderr, fds[0], copy_);
    return {pid};
  }

  // srun's status does not name the task. srun's first line about a task
  // that failed does (the first to fail: the others it reports after it
  // were ended because of it), preferring a rank whose own report does not
  // say a peer's collective failed; else the rank without a report or with
  // the earliest error of its own.
  RankBlame Blame(size_t /*index*/, int status, bool /*signalled*/,
                  const std::vector<std::optional<RankReport>>& reports) const override {
    const std::vector<SrunTaskLine> lines = Lines();
    const std::optional<FailedTask> pick =
        FirstFailedTask(lines, 2, [&reports](int pass, const SrunTaskLine& /*line*/, int t) {
          if (t < 0 || static_cast<size_t>(t) >= reports.size()) return false;
          if (reports[t] && reports[t]->status == "ok") return false;
          return pass != 0 || !PeerFailed(reports[t]);
        });
    RankBlame b;
    if (pick) {
      const std::optional<RankReport>& rep = reports[pick->task];
      b.rank = pick->task;
      b.message = "rank " + std::to_string(pick->task) + " on " + pick->line->node +
                  " failed (srun: " + pick->line->what + ")" +
                  (rep && rep->message ? ": " + *rep->message : "");
      return b;
    }
    for (int pass = 0; pass < 2; ++pass) {
      for (size_t r = 0; r < reports.size(); ++r) {
        const std::optional<RankReport>& rep = reports[r];
        if (rep && rep->status == "ok") continue;
        if (pass == 0 && PeerFailed(rep)) continue;
        b.rank = static_cast<int>(r);
        b.message = "rank " + std::to_string(r) +
                    (rep && !rep->host.empty() ? " on " + rep->host : "") + " failed" +
                    (rep && rep->message ? ": " + *rep->message
                                         : " (no report; srun " + DescribeWaitStatus(status) + ")");
        return b;
      }
    }
    b.message = "srun " + DescribeWaitStatus(status);
    return b;
  }

 private:
  // srun has ended when the stage asks for the blame: its pipe closes
  // with it, unless a task it left behind still holds it (then what was
  // read by then is used).
  std::vector<SrunTaskLine> Lines() const {
    if (!copy_) return {};
    std::unique_lock<std::mutex> g(copy_->m);
    copy_->cv.wait_for(g, std::chrono::seconds(5), [this] { return copy_->done; });
    return copy_->lines;
  }

  void Finish() {
    if (!reader_.joinable()) return;
    bool done = false;
    {
      std::unique_lock<std::mutex> g(copy_->m);
      done = copy_->cv.wait_for(g, std::chrono::seconds(5), [this] { return copy_->done; });
    }
    if (done) {
      reader_.join();
    } else {
      reader_.detach();  // it owns what it touches
    }
  }

  std::shared_ptr<StderrCopy> copy_;
  std::thread reader_;
};

}  // namespace

std::unique_ptr<Launcher> MakeSrunLauncher() { return std::make_unique<SrunLauncher>(); }

}  // namespace pilot::launch
