#include "supervisor/process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>

namespace pilot::supervisor {
namespace {

volatile sig_atomic_t g_stop = 0;

[[noreturn]] void ExecChild(const WorkloadSpec& spec, int report_fd, pid_t parent) {
  setpgid(0, 0);
  if (report_fd != kReportFd) {
    dup2(report_fd, kReportFd);
    close(report_fd);
  }
  for (int fd = kReportFd + 1; fd < 4096; ++fd) close(fd);
  BecomeWorkloadChild(spec.run_as, parent);
  job::ExecIn(spec.cwd, spec.argv, spec.env);
}

}  // namespace

void BecomeWorkloadChild(const std::optional<job::RunAs>& run_as, pid_t parent) {
  signal(SIGPIPE, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  signal(SIGINT, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  if (run_as && !job::BecomeUser(*run_as)) _exit(126);
  // After the change of user (which clears it): die with the supervisor.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(126);
}

void RequestStop() { g_stop = 1; }
bool StopRequested() { return g_stop != 0; }
void ClearStopRequest() { g_stop = 0; }

Result<WorkloadOutcome> RunWorkload(const WorkloadSpec& spec, const std::function<void()>& tick) {
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) != 0) {
    return Status::IoError("report pipe", std::strerror(errno));
  }
  const pid_t parent = getpid();
  const auto t0 = std::chrono::steady_clock::now();
  const pid_t pid = fork();
  if (pid < 0) {
    close(pipefd[0]);
    close(pipefd[1]);
    return Status::IoError(spec.argv.empty() ? "workload" : spec.argv[0],
                           std::string("fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    // The write end without close-on-exec, on descriptor 3 in the child.
    const int w = fcntl(pipefd[1], F_DUPFD, 10);
    ExecChild(spec, w, parent);
  }
  setpgid(pid, pid);
  close(pipefd[1]);
  fcntl(pipefd[0], F_SETFL, O_NONBLOCK);

  WorkloadOutcome out;
  bool reaped = false, eof = false;
  int status = 0;
  std::chrono::steady_clock::time_point stop_sent{}, exited_at{};
  bool term_sent = false, kill_sent = false;
  char buf[65536];
  while (!(reaped && eof)) {
    pollfd p{pipefd[0], POLLIN, 0};
    const int pr = eof ? poll(nullptr, 0, 200) : poll(&p, 1, 200);
    if (!eof && pr > 0) {
      for (;;) {
        const ssize_t n = read(pipefd[0], buf, sizeof(buf));
        if (n > 0) {
          const size_t room = spec.max_report_bytes + 1 - std::min(out.report.size(), spec.max_report_bytes + 1);
          out.report.append(buf, std::min(room, static_cast<size_t>(n)));
          continue;
        }
        if (n == 0) eof = true;
        break;  // EAGAIN, EINTR or EOF
      }
    }
    if (tick) tick();
    if (!reaped) {
      const pid_t r = waitpid(pid, &status, WNOHANG);
      if (r == pid) {
        reaped = true;
        exited_at = std::chrono::steady_clock::now();
        out.wall_seconds = std::chrono::duration<double>(exited_at - t0).count();
        // Whatever its own children still do, the process is gone.
        kill(-pid, SIGKILL);
      }
    } else if (!eof && std::chrono::steady_clock::now() - exited_at > std::chrono::seconds(2)) {
      // A descendant kept the pipe open after the process ended: what was
      // written by then is the report.
      eof = true;
    }
    if (StopRequested() && !reaped) {
      const auto now = std::chrono::steady_clock::now();
      out.terminated = true;
      if (!term_sent) {
        kill(-pid, SIGTERM);
        term_sent = true;
        stop_sent = now;
      } else if (!kill_sent &&
                 std::chrono::duration<double>(now - stop_sent).count() > spec.kill_grace_seconds) {
        kill(-pid, SIGKILL);
        kill_sent = true;
      }
    }
  }
  close(pipefd[0]);
  if (WIFEXITED(status)) {
    out.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    out.signal = WTERMSIG(status);
  }
  if (out.report.size() > spec.max_report_bytes) {
    out.report_too_large = true;
    out.report.resize(spec.max_report_bytes);
  }
  return out;
}

}  // namespace pilot::supervisor
