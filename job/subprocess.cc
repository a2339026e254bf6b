#include "job/subprocess.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cmath>
#include <chrono>
#include <cstring>
#include <sstream>

#include "core/base/crypto.h"
#include "core/base/strings.h"

namespace pilot::job {
namespace {

using Clock = std::chrono::steady_clock;

// The process group of the command being run (0: none) and the signal that
// asked this process to stop; both read by the signal handler.
std::atomic<pid_t> g_running_group{0};
std::atomic<int> g_stop_signal{0};
static_assert(std::atomic<pid_t>::is_always_lock_free && std::atomic<int>::is_always_lock_free);

void OnTermination(int sig) {
  g_stop_signal.store(sig);
  const pid_t group = g_running_group.load();
  if (group > 0) kill(-group, SIGKILL);  // async-signal-safe
}

// In the child after fork: set up and exec, or _exit(127).
[[noreturn]] void ExecChild(const CommandSpec& spec, int out_fd, int err_fd, pid_t parent) {
  setpgid(0, 0);
  int null_fd = open("/dev/null", O_RDONLY);
  if (null_fd >= 0) dup2(null_fd, 0);
  dup2(out_fd, 1);
  dup2(err_fd, 2);
  for (int fd = 3; fd < 1024; ++fd) close(fd);
  signal(SIGPIPE, SIG_DFL);
  if (spec.run_as && !BecomeUser(*spec.run_as)) _exit(126);
  // After the change of user (which clears it): a caller killed at its own
  // time limit (an epilog past PrologEpilogTimeout) takes the helper along.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(126);
  ExecIn(spec.cwd, spec.argv, spec.env);
}

// Appends what `fd` has to `sink` (up to `cap`); false at end of file.
bool Drain(int fd, std::string* sink, size_t cap) {
  char buf[8192];
  ssize_t n = read(fd, buf, sizeof(buf));
  if (n < 0) return errno == EINTR || errno == EAGAIN;
  if (n == 0) return false;
  size_t room = sink->size() < cap ? cap - sink->size() : 0;
  sink->append(buf, std::min(room, static_cast<size_t>(n)));
  return true;
}

}  // namespace

bool BecomeUser(const RunAs& as) {
  if (setgid(as.gid) != 0 || initgroups(as.user.c_str(), as.gid) != 0 || setuid(as.uid) != 0) {
    return false;
  }
  // Must not be able to regain root.
  return as.uid == 0 || setuid(0) != 0;
}

void ExecIn(const std::string& cwd, const std::vector<std::string>& args,
            const std::vector<std::string>& env) {
  if (chdir(cwd.c_str()) != 0 && chdir("/") != 0) _exit(126);
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (const std::string& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  execve(argv[0], argv.data(), envp.data());
  _exit(127);
}

void StopCommandsOnTermination() {
  struct sigaction sa {};
  sa.sa_handler = OnTermination;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) sigaction(sig, &sa, nullptr);
}

int StopSignal() { return g_stop_signal.load(); }

std::string CommandResult::Describe(double timeout_seconds) const {
  std::ostringstream s;
  if (stopped) {
    const int sig = StopSignal();
    const char* name = sig == 0 ? nullptr : sigabbrev_np(sig);
    s << "stopped: the caller received "
      << (name ? std::string("SIG") + name : sig == 0 ? "a signal to stop" : "signal " + std::to_string(sig));
  } else if (timed_out) {
    s << "timed out after " << std::round(timeout_seconds * 10) / 10 << " s";
  } else if (signal != 0) {
    s << "killed by signal " << signal;
  } else {
    s << "exit " << exit_code;
  }
  return s.str();
}

Result<CommandResult> RunCommand(const CommandSpec& spec) {
  if (spec.argv.empty() || spec.argv[0].empty() || spec.argv[0][0] != '/') {
    return Status::Internal("RunCommand", "argv[0] must be an absolute path");
  }
  if (StopSignal() != 0) {
    CommandResult stopped;
    stopped.stopped = true;
    return stopped;
  }
  int out_pipe[2];
  int err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) return Status::IoError("pipe", std::strerror(errno));
  if (pipe2(err_pipe, O_CLOEXEC) != 0) {
    close(out_pipe[0]);
    close(out_pipe[1]);
    return Status::IoError("pipe", std::strerror(errno));
  }
  const pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    int e = errno;
    for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]}) close(fd);
    return Status::IoError("fork", std::strerror(e));
  }
  if (pid == 0) ExecChild(spec, out_pipe[1], err_pipe[1], parent);
  setpgid(pid, pid);  // also from the parent: no race with the kill below
  g_running_group.store(pid);
  // A stop that came between the check above and the store: the handler
  // saw no group to kill.
  if (StopSignal() != 0) kill(-pid, SIGKILL);
  close(out_pipe[1]);
  close(err_pipe[1]);

  CommandResult result;
  auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                     std::chrono::duration<double>(spec.timeout_seconds));
  auto kill_at = Clock::time_point::max();
  bool out_open = true;
  bool err_open = true;
  int wstatus = 0;
  bool reaped = false;
  while (!reaped) {
    auto now = Clock::now();
    if (!result.timed_out && now >= deadline) {
      result.timed_out = true;
      kill(-pid, SIGTERM);
      kill_at = now + std::chrono::duration_cast<Clock::duration>(
                          std::chrono::duration<double>(spec.kill_grace_seconds));
    }
    if (result.timed_out && now >= kill_at) {
      kill(-pid, SIGKILL);
      kill_at = Clock::time_point::max();
    }
    pollfd fds[2];
    int nfds = 0;
    if (out_open) fds[nfds++] = {out_pipe[0], POLLIN, 0};
    if (err_open) fds[nfds++] = {err_pipe[0], POLLIN, 0};
    if (nfds > 0) {
      if (poll(fds, nfds, 100) > 0) {
        for (int i = 0; i < nfds; ++i) {
          if ((fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
          if (fds[i].fd == out_pipe[0]) {
            out_open = Drain(out_pipe[0], &result.out, spec.max_output_bytes);
          } else {
            err_open = Drain(err_pipe[0], &result.err, spec.max_output_bytes);
          }
        }
      }
    } else {
      usleep(20 * 1000);
    }
    pid_t w = waitpid(pid, &wstatus, WNOHANG);
    if (w == pid) reaped = true;
  }
  // The child is gone; collect what is left in the pipes (without blocking
  // on a grandchild that still holds them open).
  for (int fd : {out_pipe[0], err_pipe[0]}) {
    fcntl(fd, F_SETFL, O_NONBLOCK);
    std::string* sink = fd == out_pipe[0] ? &result.out : &result.err;
    for (;;) {
      errno = 0;
      if (!Drain(fd, sink, spec.max_output_bytes) || errno == EAGAIN) break;
    }
    close(fd);
  }
  kill(-pid, SIGKILL);  // anything the child left behind in its group
  g_running_group.store(0);
  // Ended by the handler's kill (the stop came while it ran).
  result.stopped = StopSignal() != 0 && WIFSIGNALED(wstatus);
  if (WIFEXITED(wstatus)) result.exit_code = WEXITSTATUS(wstatus);
  if (WIFSIGNALED(wstatus)) result.signal = WTERMSIG(wstatus);
  return result;
}

Result<std::string> HashFileAsUser(const CommandRunner& run, CommandSpec spec, const std::string& path) {
  static const std::string kSha = FindExecutable("sha256sum");
  if (kSha.empty()) return Status::Unavailable("sha256sum", "not installed on this node");
  spec.argv = {kSha, "--", path};
  PILOT_ASSIGN_OR_RETURN(CommandResult r, run(spec));
  if (!r.Succeeded() || r.out.size() < 64 || !IsSha256Hex(r.out.substr(0, 64))) {
    const std::string why(Trim(r.err));
    return Status::NotFound(path, why.empty() ? r.Describe(spec.timeout_seconds) : why);
  }
  return r.out.substr(0, 64);
}

std::string Sha256AsUser(const CommandRunner& run, const std::string& path,
                         const std::optional<RunAs>& run_as, const std::string& user,
                         const std::string& home, double timeout_seconds) {
  CommandSpec spec;
  spec.env = CleanEnvironment(user, home);
  spec.run_as = run_as;
  spec.timeout_seconds = timeout_seconds;
  Result<std::string> h = HashFileAsUser(run, std::move(spec), path);
  return h.ok() ? *h : "";
}

std::vector<std::string> CleanEnvironment(const std::string& user, const std::string& home) {
  std::vector<std::string> env = {"PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
                                  "LANG=C"};
  if (!user.empty()) {
    env.push_back("USER=" + user);
    env.push_back("LOGNAME=" + user);
  }
  if (!home.empty()) env.push_back("HOME=" + home);
  return env;
}

std::string FindExecutable(const std::string& name) {
  for (const char* dir : {"/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin",
                          "/sbin", "/bin"}) {
    std::string p = std::string(dir) + "/" + name;
    if (access(p.c_str(), X_OK) == 0) return p;
  }
  return "";
}

}  // namespace pilot::job
