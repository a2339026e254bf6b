#include "supervisor/program/group.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>

#include "launch/spawn.h"
#include "launch/srun.h"
#include "supervisor/process.h"
#include "supervisor/program/checkpoint_watch.h"
#include "supervisor/program/container.h"
#include "supervisor/program/metrics_socket.h"
#include "supervisor/program/phase_usage.h"
#include "supervisor/program/proc_tree.h"
#include "supervisor/program/record_intake.h"

namespace pilot::supervisor {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kTailBytes = 16 * 1024;

double Since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double WallSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void WriteAll(int fd, const char* p, size_t n) {
  while (fd >= 0 && n > 0) {
    const ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;  // the job's stream is gone: keep running, keep the tail
    p += w;
    n -= static_cast<size_t>(w);
  }
}

void KeepTail(std::string* tail, const char* p, size_t n) {
  tail->append(p, n);
  if (tail->size() > 2 * kTailBytes) tail->erase(0, tail->size() - kTailBytes);
}

void Say(const std::string& text) { WriteAll(2, text.data(), text.size()); }

// The child: its own process group, the job's user, its pipes on 1 and 2.
[[noreturn]] void ExecRank(const RankLaunch& r, const GroupSpec& spec, int out_w, int err_w,
                           pid_t parent) {
  setpgid(0, 0);
  const int devnull = open("/dev/null", O_RDONLY);
  if (devnull >= 0) dup2(devnull, 0);
  dup2(out_w, 1);
  dup2(err_w, 2);
  for (int fd = 3; fd < 4096; ++fd) close(fd);
  BecomeWorkloadChild(r.as_root ? std::nullopt : spec.run_as, parent);
  if (chdir(spec.cwd.c_str()) != 0) {
    Say("pilot: program: cannot enter the working directory " + spec.cwd + ": " +
        std::strerror(errno) + "\n");
    _exit(126);
  }
  Say("pilot: program: " + launch::ExecSearchingPath(r.argv, r.env) + "\n");
  _exit(127);
}

struct Live {
  RankLaunch launch;
  RankResult result;
  pid_t pid = -1;
  int out_fd = -1, err_fd = -1;
  LineBuffer out_lines, err_lines;
  int64_t pattern_matches = 0;
  std::map<int, int64_t> task_matches;  // an srun step's, per task
  bool reaped = false;
  bool cleanup_started = false;  // RankLaunch::cleanup_argv, at the first SIGTERM
  pid_t cleanup_pid = -1;        // that removal, until reaped

  Clock::time_point exited_at;
};

// The rank of the phase's process `l` (nullopt: an orphan's).
std::optional<int> RankOf(const Live* l) {
  return l != nullptr ? std::optional<int>(l->launch.rank) : std::nullopt;
}

Clock::time_point FromNow(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

// A process's streams, in the order they are polled.
enum Stream { kStdout = 1, kStderr = 2 };

// One RunGroup: starts the processes, then rounds of reading their
// streams, reaping them and deciding whether to end them, until every
// process has exited and its streams are closed.
class GroupRun {
 public:
  explicit GroupRun(const GroupSpec& spec)
      : spec_(spec),
        t0_(Clock::now()),
        parent_(getpid()),
        live_(spec.ranks.size()),
        socket_(spec.metrics_socket, spec.run_as, [this](pid_t pid) { return OwnerOf(pid); },
                MetricsSocket::Sink{
                    [this](int owner, const std::string& line) {
                      RecordLine(owner >= 0 ? &live_[static_cast<size_t>(owner)] : nullptr, line, std::nullopt);
                    },
                    [this](const std::string& why) { intake_.Break(why); },
                    [this](const std::string& who) { Outsider(who); }}),
        watch_(spec.watch_files, spec.run_as ? spec.run_as->uid : getuid()) {}

  GroupResult Run() {
    // What a rank leaves behind (a daemon that left its process group)
    // becomes the supervisor's child, not init's: found and ended below.
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    g_.started_unix = WallSeconds() - Since(t0_);
    for (size_t i = 0; i < spec_.ranks.size(); ++i) Start(&live_[i], spec_.ranks[i]);
    intake_.StartIdleClock();
    while (Round()) {
    }
    Finish();
    CleanUp();
    return std::move(g_);
  }

 private:
  // Starting.

  void Start(Live* l, const RankLaunch& launch) {
    l->launch = launch;
    l->result.rank = l->launch.rank;
    l->result.srun_tasks = l->launch.srun_tasks;
    int out[2], err[2];
    if (l->launch.argv.empty() || pipe2(out, O_CLOEXEC) != 0) {
      l->result.start_problem = l->launch.argv.empty() ? "no command" : std::strerror(errno);
      return;
    }
    if (pipe2(err, O_CLOEXEC) != 0) {
      l->result.start_problem = std::strerror(errno);
      close(out[0]);
      close(out[1]);
      return;
    }
    const pid_t pid = fork();
    if (pid < 0) {
      l->result.start_problem = std::string("fork: ") + std::strerror(errno);
      for (int fd : {out[0], out[1], err[0], err[1]}) close(fd);
      return;
    }
    if (pid == 0) {
      // The write ends without close-on-exec, above the range dup2 overwrites.
      const int ow = fcntl(out[1], F_DUPFD, 10), ew = fcntl(err[1], F_DUPFD, 10);
      ExecRank(l->launch, spec_, ow, ew, parent_);
    }
    setpgid(pid, pid);
    close(out[1]);
    close(err[1]);
    l->pid = pid;
    l->out_fd = out[0];
    l->err_fd = err[0];
    fcntl(l->out_fd, F_SETFL, O_NONBLOCK);
    fcntl(l->err_fd, F_SETFL, O_NONBLOCK);
    l->result.started = true;
  }

  // Provenance.

  // The live process `pid` descends from: its index, -1 for a process the
  // supervisor inherited (a rank's orphan), nullopt for a process outside
  // the phase.
  std::optional<int> OwnerOf(pid_t pid) const {
    pid_t cur = pid;
    for (int hops = 0; hops < 4096 && cur > 1; ++hops) {
      for (size_t i = 0; i < live_.size(); ++i) {
        if (live_[i].pid == cur && !live_[i].reaped) return static_cast<int>(i);
      }
      if (cur == parent_) return -1;
      long ppid = 0;
      if (!ReadStat(cur, &ppid, nullptr)) return std::nullopt;
      cur = static_cast<pid_t>(ppid);
    }
    return std::nullopt;
  }

  // Records.

  // A writer refused: counted, the first five named once each.
  void Outsider(const std::string& who) {
    ++g_.outside_writers;
    std::vector<std::string>& seen = g_.outside_writer_examples;
    if (seen.size() < 5 && std::find(seen.begin(), seen.end(), who) == seen.end()) seen.push_back(who);
  }

  void RecordLine(Live* l, const std::string& line, std::optional<int> task) {
    if (intake_.Line(RankOf(l), line, task) && l != nullptr) ++l->result.records;
  }

  void TakeRecord(Live* l, MetricRecord rec) {
    if (intake_.Record(RankOf(l), std::move(rec)) && l != nullptr) ++l->result.records;
  }

  void OutLine(Live& l, const std::string& line) {
    if (!spec_.records) return;
    std::optional<int> task;
    std::string text = line;
    if (l.launch.srun_tasks > 0) {
      auto split = launch::SplitSrunLabel(line, l.launch.srun_tasks);
      if (!split) return;
      task = split->first;
      text = std::move(split->second);
      if (!spec_.loss_pattern) return RecordLine(&l, text, task);
    }
    if (!spec_.loss_pattern) return;
    std::optional<double> loss = MatchLoss(*spec_.loss_pattern, text);
    if (!loss) return;
    MetricRecord rec;
    rec.step = spec_.first_step + (task ? l.task_matches[*task]++ : l.pattern_matches++);
    rec.loss = *loss;
    rec.rank = task;
    TakeRecord(&l, std::move(rec));
  }

  void ErrLine(Live& l, const std::string& line) {
    if (l.launch.srun_tasks <= 0 || l.result.srun_lines.size() >= 1000) return;
    if (auto t = pilot::ParseSrunTaskLine(line)) l.result.srun_lines.push_back(std::move(*t));
  }

  // Streams.

  // Reads what stream `which` of `l` has now; at its end closes it
  // (*fd = -1) and takes its last, unterminated line.
  void Drain(Live& l, int* fd, Stream which) {
    char buf[65536];
    for (;;) {
      const ssize_t n = read(*fd, buf, sizeof buf);
      if (n > 0) {
        const size_t k = static_cast<size_t>(n);
        if (which == kStdout) {
          if (l.launch.srun_tasks <= 0 || spec_.loss_pattern || !spec_.records)
            WriteAll(spec_.forward_stdout, buf, k);
          KeepTail(&l.result.stdout_tail, buf, k);
          l.out_lines.Append(buf, k);
          while (auto line = l.out_lines.Next()) OutLine(l, *line);
        } else {
          WriteAll(spec_.forward_stderr, buf, k);
          KeepTail(&l.result.stderr_tail, buf, k);
          l.err_lines.Append(buf, k);
          while (auto line = l.err_lines.Next()) ErrLine(l, *line);
        }
        continue;
      }
      if (n == 0) {
        close(*fd);
        *fd = -1;
        if (which == kStdout) {
          if (auto rest = l.out_lines.Rest()) OutLine(l, *rest);
        } else if (auto rest = l.err_lines.Rest()) {
          ErrLine(l, *rest);
        }
      }
      break;
    }
  }

  static int* FdOf(Live& l, Stream which) { return which == kStdout ? &l.out_fd : &l.err_fd; }

  // Waits up to 200 ms for any open stream and drains those that have data.
  void PollStreams() {
    std::vector<pollfd> fds;
    // Owners: a rank's stream, a connection (-1 - index), the socket, fanotify.
    std::vector<std::pair<Live*, int>> owners;
    for (Live& l : live_) {
      for (Stream w : {kStdout, kStderr}) {
        if (*FdOf(l, w) < 0) continue;
        fds.push_back({*FdOf(l, w), POLLIN, 0});
        owners.push_back({&l, w});
      }
    }
    std::vector<int> conn_fds;
    std::vector<size_t> conn_index;
    socket_.PollFds(&conn_fds, &conn_index);
    for (size_t i = 0; i < conn_fds.size(); ++i) {
      fds.push_back({conn_fds[i], POLLIN, 0});
      owners.push_back({nullptr, -1 - static_cast<int>(conn_index[i])});
    }
    if (socket_.listen_fd() >= 0) {
      fds.push_back({socket_.listen_fd(), POLLIN, 0});
      owners.push_back({nullptr, 0});
    }
    if (watch_.fd() >= 0) {
      fds.push_back({watch_.fd(), POLLIN, 0});
      owners.push_back({nullptr, 1});
    }
    const int pr = poll(fds.data(), fds.size(), 200);
    if (pr <= 0) return;
    for (size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      auto [l, which] = owners[i];
      if (l != nullptr) {
        Drain(*l, FdOf(*l, static_cast<Stream>(which)), static_cast<Stream>(which));
      } else if (which < 0) {
        socket_.Drain(static_cast<size_t>(-1 - which));
      } else if (which == 0) {
        socket_.Accept();
      } else {
        watch_.ReadEvents(ours_);
      }
    }
  }

  // Processes.

  bool AllReaped() const {
    for (const Live& l : live_) {
      if (l.pid > 0 && !l.reaped) return false;
    }
    return true;
  }

  // Every process has exited: done once their stdout, stderr and record
  // connections are closed; descendants that keep one open get 2 s after
  // the last exit.
  bool StreamsDone() const {
    bool streams_open = false;
    bool late = true;
    for (const Live& l : live_) {
      streams_open = streams_open || l.out_fd >= 0 || l.err_fd >= 0;
      if (l.pid > 0 && Since(l.exited_at) < 2) late = false;
    }
    streams_open = streams_open || socket_.AnyOpen();
    return !streams_open || late;
  }

  void SampleRss(bool all_reaped) {
    std::set<pid_t> running;
    for (Live& l : live_) {
      if (l.pid > 0) running.insert(l.pid);
    }
    // The CPU time at the records that mark a phase's start and its save,
    // before the once-a-second sample (which may read the same moment).
    if (!all_reaped && spec_.local_work) usage_.MarkRecords(running, spec_.cpu_mark_steps, &marked_, &g_);
    usage_.Sample(running, all_reaped, &g_);
  }

  // Reaps what exited: the phase's processes (a failed one starts the grace
  // period) and the orphans the supervisor inherited as their subreaper.
  void Reap() {
    for (;;) {
      int status = 0;
      const pid_t pid = waitpid(-1, &status, WNOHANG);
      if (pid <= 0) return;
      for (Live& l : live_) {
        if (l.cleanup_pid == pid) l.cleanup_pid = -1;  // the removal ended
        if (l.pid != pid || l.reaped) continue;
        l.reaped = true;
        l.exited_at = Clock::now();
        l.result.wall_seconds = Since(t0_);
        if (WIFEXITED(status)) l.result.exit_code = WEXITSTATUS(status);
        if (WIFSIGNALED(status)) l.result.signal = WTERMSIG(status);
        kill(-l.pid, SIGKILL);  // whatever it left behind in its group
        const bool failed = l.result.signal != 0 || l.result.exit_code != 0;
        if (failed && !end_after_) end_after_ = FromNow(spec_.exit_grace_seconds);
      }
    }
  }

  void SignalAll(int sig) {
    for (Live& l : live_) {
      if (l.pid > 0 && !l.reaped) {
        l.result.terminated = true;
        kill(-l.pid, sig);
        // A container's PID 1 ignores SIGTERM unless it handles it, and a
        // job's processes may get little time after scancel's SIGTERM
        // (KillWait): the container is removed now, at once, beside it.
        if (sig == SIGTERM && l.launch.as_root && !l.cleanup_started) {
          l.cleanup_started = true;
          l.cleanup_pid = StartContainerRemoval(l.launch);
        }
      }
    }
  }

  // Why the supervisor would end the phase now; SIGTERM to every process
  // group once, SIGKILL kill_grace_seconds later.
  void EndIfDue() {
    if (StopRequested()) g_.stopped = true;
    if (spec_.records && !g_.stopped && !g_.hung && Since(intake_.last_record()) > spec_.step_timeout_seconds &&
        !end_after_) {
      g_.hung = true;
      g_.hung_seconds = Since(intake_.last_record());
      g_.hung_after_step = intake_.last_step_seen();
    }
    if (spec_.last_step > 0 && !end_after_ && intake_.EveryRankReached(spec_.last_step)) {
      g_.after_last_step = true;
      end_after_ = FromNow(spec_.last_step_grace_seconds);
    }
    const bool end_now = g_.stopped || g_.hung || (end_after_ && Clock::now() >= *end_after_);
    if (end_now && !term_sent_) {
      SignalAll(SIGTERM);
      term_sent_ = Clock::now();
    } else if (term_sent_ && !kill_sent_ &&
               std::chrono::duration<double>(Clock::now() - *term_sent_).count() >
                   spec_.kill_grace_seconds) {
      SignalAll(SIGKILL);
      kill_sent_ = true;
    }
  }

  // One round; false when the group is over.
  bool Round() {
    const bool all_reaped = AllReaped();
    if (all_reaped && StreamsDone()) return false;
    PollStreams();  // then what the watched files' reads were by the first record
    watch_.Round(g_.records.empty() ? -1 : Since(t0_));
    if (spec_.tick) spec_.tick();
    SampleRss(all_reaped);
    Reap();
    if (!AllReaped()) EndIfDue();
    return true;
  }

  // Every process still descending from the supervisor belongs to this
  // phase (it runs nothing else meanwhile): killed, named, reaped.
  void EndOutlived() {
    for (int round = 0; round < 20; ++round) {
      const std::vector<pid_t> left = DescendantsOf(parent_);
      if (left.empty()) break;
      for (pid_t pid : left) {
        if (round == 0 && g_.outlived.size() < 10) g_.outlived.push_back(NameProcess(pid));
        kill(pid, SIGKILL);
      }
      usleep(50 * 1000);
      while (waitpid(-1, nullptr, WNOHANG) > 0) {
      }
    }
    while (waitpid(-1, nullptr, WNOHANG) > 0) {
    }
  }

  // A container its runtime left behind when the process was ended (a
  // killed `podman run` leaves it running under conmon): removed before the
  // next phase starts and before the supervisor ends, so it neither keeps
  // the GPUs nor outlives the job. A removal started beside the SIGTERM is
  // waited for (30 s at most), then run once more: the first may have met
  // the container still starting (`--ignore` makes a second one cheap).
  void CleanUp() {
    for (Live& l : live_) {
      const Clock::time_point until = FromNow(30);
      while (l.cleanup_pid > 0 && Clock::now() < until) {
        const pid_t w = waitpid(l.cleanup_pid, nullptr, WNOHANG);
        if (w == l.cleanup_pid || (w < 0 && errno != EINTR)) l.cleanup_pid = -1;
        if (l.cleanup_pid > 0) usleep(20000);
      }
    }
    for (Live& l : live_) {
      if (l.pid <= 0 || (!l.result.terminated && l.result.signal == 0)) continue;
      RemoveContainer(l.launch, spec_.run_as, "program");
    }
  }

  // The last records, every descriptor closed, the results.
  void Finish() {
    // The last events answered, then the marks gone before anything waits
    // on the phase's processes: an open after this one is not held.
    watch_.Close(ours_);
    g_.watch = watch_.result();
    socket_.Close();
    for (Live& l : live_) {
      for (int* fd : {&l.out_fd, &l.err_fd}) {
        if (*fd < 0) continue;
        close(*fd);
        *fd = -1;
      }
      g_.ranks.push_back(l.result);
    }
    EndOutlived();
    if (spec_.local_work) usage_.MeasureBusy(&g_);
    g_.wall_seconds = Since(t0_);
  }

  const GroupSpec& spec_;
  const Clock::time_point t0_;
  const pid_t parent_;
  std::vector<Live> live_;
  MetricsSocket socket_;
  CheckpointWatch watch_;
  const std::function<bool(pid_t)> ours_ = [this](pid_t pid) { return OwnerOf(pid).has_value(); };
  GroupResult g_;
  RecordIntake intake_{spec_, t0_, &g_};
  PhaseUsage usage_{t0_};
  size_t marked_ = 0;  // records PhaseUsage::MarkRecords has looked at
  std::optional<Clock::time_point> end_after_;  // when the grace period ends
  std::optional<Clock::time_point> term_sent_;
  bool kill_sent_ = false;
};

}  // namespace

GroupResult RunGroup(const GroupSpec& spec) { return GroupRun(spec).Run(); }

}  // namespace pilot::supervisor
