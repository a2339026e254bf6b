#include "supervisor/program/group.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/fanotify.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>

#include "core/base/utf8.h"
#include "job/subprocess.h"
#include "launch/spawn.h"
#include "launch/srun.h"
#include "supervisor/process.h"
#include "supervisor/program/proc_tree.h"

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

// One connection to the phase's metrics socket.
struct Conn {
  int fd = -1;
  pid_t pid = 0;
  int live = -1;  // the rank process it descends from; -1: a process the supervisor inherited
  LineBuffer lines;
};

// A watched file, by identity (a path the user renames changes nothing).
struct Watched {
  dev_t dev = 0;
  ino_t ino = 0;
};

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

// A process's streams, in the order they are polled.
enum Stream { kStdout = 1, kStderr = 2 };

// One RunGroup: starts the processes, then rounds of reading their
// streams, reaping them and deciding whether to end them, until every
// process has exited and its streams are closed.
class GroupRun {
 public:
  explicit GroupRun(const GroupSpec& spec)
      : spec_(spec), t0_(Clock::now()), parent_(getpid()), live_(spec.ranks.size()) {}

  GroupResult Run() {
    // What a rank leaves behind (a daemon that left its process group)
    // becomes the supervisor's child, not init's: found and ended below.
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    g_.started_unix = WallSeconds() - Since(t0_);
    Listen();
    Watch();
    for (size_t i = 0; i < spec_.ranks.size(); ++i) Start(&live_[i], spec_.ranks[i]);
    last_record_ = Clock::now();
    last_rss_ = Clock::now() - std::chrono::seconds(5);
    while (Round()) {
    }
    Finish();
    CleanUp();
    return std::move(g_);
  }

 private:
  // Starting.

  // The phase's socket: root binds it, the job's user may connect (0600,
  // the user's), in a folder only root writes to.
  void Listen() {
    const std::string& path = spec_.metrics_socket;
    if (path.empty()) return;
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (path.size() >= sizeof addr.sun_path) {
      Say("pilot: program: the metrics socket's path is too long (" + std::to_string(path.size()) +
          " bytes, at most " + std::to_string(sizeof addr.sun_path - 1) + "): " + path +
          "; shorten the policy's state_dir\n");
      return;
    }
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    ::unlink(path.c_str());
    listen_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    const mode_t old = umask(0177);
    const bool bound = listen_fd_ >= 0 &&
                       bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
                       listen(listen_fd_, 128) == 0;
    umask(old);
    if (!bound) {
      Say("pilot: program: cannot listen on " + path + ": " + std::strerror(errno) + "\n");
      if (listen_fd_ >= 0) close(listen_fd_);
      listen_fd_ = -1;
      return;
    }
    if (spec_.run_as && chown(path.c_str(), spec_.run_as->uid, spec_.run_as->gid) != 0) {
      Say("pilot: program: cannot hand " + path + " to the job's user: " + std::strerror(errno) + "\n");
    }
  }

  // fanotify on each watched file (by inode: renaming or replacing the
  // path later does not move the mark). Permission events: the opener waits
  // in open() until the supervisor has answered, so it is still there to be
  // placed in the phase's tree however briefly it lives (a `cat`, a loader
  // worker, a process inside a container); every event is allowed.
  void Watch() {
    if (spec_.watch_files.empty()) return;
    const size_t n = std::min(spec_.watch_files.size(), kMaxWatchFiles);
    g_.watch_opened.assign(spec_.watch_files.size(), false);
    fan_fd_ = fanotify_init(FAN_CLASS_CONTENT | FAN_CLOEXEC | FAN_NONBLOCK, O_RDONLY | O_LARGEFILE);
    if (fan_fd_ < 0) {
      g_.watch_problem = std::string("fanotify: ") + std::strerror(errno);
      return;
    }
    watched_.resize(n);
    for (size_t i = 0; i < n; ++i) {
      const std::string& f = spec_.watch_files[i];
      struct stat st{};
      if (lstat(f.c_str(), &st) != 0 || !S_ISREG(st.st_mode) ||
          fanotify_mark(fan_fd_, FAN_MARK_ADD | FAN_MARK_DONT_FOLLOW, FAN_OPEN_PERM, AT_FDCWD, f.c_str()) != 0) {
        if (g_.watch_problem.empty()) {
          g_.watch_problem = "cannot watch " + f + ": " + std::strerror(errno ? errno : EINVAL);
        }
        continue;
      }
      watched_[i] = {st.st_dev, st.st_ino};
    }
  }

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

  void Accept() {
    for (;;) {
      const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) return;
      ucred cred{};
      socklen_t len = sizeof cred;
      std::optional<int> owner;
      if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && cred.pid > 0) {
        owner = OwnerOf(cred.pid);
      }
      if (!owner || conns_.size() >= 4096) {
        if (!owner) {
          ++g_.outside_writers;
          const std::string who = cred.pid > 0 ? NameProcess(cred.pid) : "an unknown process";
          std::vector<std::string>& seen = g_.outside_writer_examples;
          if (seen.size() < 5 && std::find(seen.begin(), seen.end(), who) == seen.end()) seen.push_back(who);
        }
        close(fd);
        continue;
      }
      Conn c;
      c.fd = fd;
      c.pid = cred.pid;
      c.live = *owner;
      conns_.push_back(std::move(c));
    }
  }

  // The watched files a process of the phase opened.
  void ReadWatchEvents() {
    alignas(fanotify_event_metadata) char buf[8192];
    for (;;) {
      const ssize_t n = read(fan_fd_, buf, sizeof buf);
      if (n <= 0) return;
      auto* m = reinterpret_cast<fanotify_event_metadata*>(buf);
      ssize_t left = n;
      for (; FAN_EVENT_OK(m, left); m = FAN_EVENT_NEXT(m, left)) {
        if (m->mask & FAN_Q_OVERFLOW) {
          if (g_.watch_problem.empty()) g_.watch_problem = "fanotify: events lost (queue overflow)";
        }
        if (m->fd < 0) continue;
        struct stat st{};
        const bool ours = OwnerOf(m->pid).has_value();
        if (ours && fstat(m->fd, &st) == 0) {
          for (size_t i = 0; i < watched_.size(); ++i) {
            if (watched_[i].ino == st.st_ino && watched_[i].dev == st.st_dev && watched_[i].ino != 0) {
              g_.watch_opened[i] = true;
            }
          }
        }
        if (m->mask & FAN_OPEN_PERM) {
          const fanotify_response allow{m->fd, FAN_ALLOW};
          if (write(fan_fd_, &allow, sizeof allow) != static_cast<ssize_t>(sizeof allow) &&
              g_.watch_problem.empty()) {
            g_.watch_problem = std::string("fanotify: cannot answer an open: ") + std::strerror(errno);
          }
        }
        close(m->fd);
      }
    }
  }

  // Records.

  void Break(const std::string& why) {
    if (g_.protocol_breaks++ < 5) g_.protocol_break_examples.push_back(why);
  }

  // `l`: the rank process the record came from (null: an orphan's).
  // A line that names no rank speaks for its process's rank when that
  // process is one rank's, or the phase has only one.
  void DefaultRank(const Live* l, std::optional<int>* rank) const {
    if (!*rank && l != nullptr && (spec_.process_per_rank || spec_.expected_ranks <= 1)) *rank = l->launch.rank;
  }

  void TakeRecord(Live* l, MetricRecord rec) {
    DefaultRank(l, &rec.rank);
    const std::string step = "step " + std::to_string(rec.step);
    if (!rec.rank) return Break(step + " without a rank, from a process outside every rank's tree");
    const int rank = *rec.rank;
    const std::string who = "rank " + std::to_string(rank);
    if (rank < 0 || rank >= std::max(1, spec_.expected_ranks)) {
      return Break(who + " reported " + step + ": ranks are 0.." +
                   std::to_string(std::max(1, spec_.expected_ranks) - 1));
    }
    if (spec_.process_per_rank && l != nullptr && l->launch.rank != rank) {
      return Break("the process of rank " + std::to_string(l->launch.rank) + " reported " + step +
                   " as " + who);
    }
    // A step before first_step is kept: the resumed process that reports
    // step 1 did not restore, which CheckPhase says in those words.
    if (spec_.last_step > 0 && rec.step > spec_.last_step) {
      // A loss pattern's extra matches (an eval line) past step N are not records.
      if (spec_.loss_pattern) return;
      return Break(who + " reported " + step + ", past the last step " + std::to_string(spec_.last_step));
    }
    auto last = rank_last_step_.find(rank);
    if (last != rank_last_step_.end() && rec.step <= last->second) {
      return Break(who + " reported " + step +
                   (rec.step == last->second
                        ? " twice: the first record of a step stands"
                        : " after step " + std::to_string(last->second) + ": steps only go forward"));
    }
    if (static_cast<int64_t>(g_.records.size()) >= spec_.max_records) {
      ++g_.dropped_records;
      return;
    }
    rec.arrived = Since(t0_);
    last_record_ = Clock::now();
    last_step_seen_ = std::max(last_step_seen_, rec.step);
    rank_last_step_[rank] = rec.step;
    if (l != nullptr) ++l->result.records;
    g_.records.push_back(std::move(rec));
  }

  // A record line; `task`: the srun task whose line it is (its rank,
  // whatever the record says).
  void RecordLine(Live* l, const std::string& line, std::optional<int> task) {
    if (spec_.loss_pattern || line.find_first_not_of(" \t\r") == std::string::npos) return;
    if (line.size() > kMaxRecordLine) {
      return Break("a record of " + std::to_string(line.size() + 1) +
                   " bytes (the protocol's limit is " + std::to_string(kMaxRecordLine + 1) + ")");
    }
    Result<ProbeLine> r = ParseProbeLine(line);
    if (!r.ok()) {
      if (g_.bad_records++ == 0) {
        g_.first_bad_record = r.status().detail() + ": " + std::string(Utf8Head(line, 120));
      }
      return;
    }
    if (r->record) {
      if (task) r->record->rank = *task;
      return TakeRecord(l, std::move(*r->record));
    }
    std::optional<int>& rank = r->env ? r->env->rank : r->state ? r->state->rank : r->packages->rank;
    if (task) rank = *task;
    DefaultRank(l, &rank);
    // Another rank's line from a one-rank process, or no rank: not kept
    // (the step records' protocol names such a writer).
    if (!rank || *rank < 0 || *rank >= std::max(1, spec_.expected_ranks)) return;
    if (spec_.process_per_rank && l != nullptr && l->launch.rank != *rank) return;
    const size_t cap = 4 * static_cast<size_t>(std::max(1, spec_.expected_ranks)) + 16;
    if (r->env && g_.envs.size() < cap) g_.envs.push_back(std::move(*r->env));
    if (r->state && g_.states.size() < cap) g_.states.push_back(std::move(*r->state));
    // A process's distributions take a few lines; rank 0's are what is kept.
    if (r->packages && g_.packages.size() < 4 * cap) g_.packages.push_back(std::move(*r->packages));
  }

  void OutLine(Live& l, const std::string& line) {
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

  Live* LiveOf(const Conn& c) { return c.live >= 0 ? &live_[static_cast<size_t>(c.live)] : nullptr; }

  // Reads what connection `c` has now; closes it at its end.
  void DrainConn(Conn& c) {
    char buf[65536];
    for (;;) {
      const ssize_t n = read(c.fd, buf, sizeof buf);
      if (n > 0) {
        const int64_t cut = c.lines.overlong();
        c.lines.Append(buf, static_cast<size_t>(n));
        if (c.lines.overlong() > cut) Break("a record line of more than " + std::to_string(kMaxMetricLine) + " bytes");
        while (auto line = c.lines.Next()) RecordLine(LiveOf(c), *line, std::nullopt);
        continue;
      }
      if (n < 0 && (errno == EINTR)) continue;
      if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
        if (auto rest = c.lines.Rest()) RecordLine(LiveOf(c), *rest, std::nullopt);
        close(c.fd);
        c.fd = -1;
      }
      return;
    }
  }

  // Reads what stream `which` of `l` has now; at its end closes it
  // (*fd = -1) and takes its last, unterminated line.
  void Drain(Live& l, int* fd, Stream which) {
    char buf[65536];
    for (;;) {
      const ssize_t n = read(*fd, buf, sizeof buf);
      if (n > 0) {
        const size_t k = static_cast<size_t>(n);
        if (which == kStdout) {
          if (l.launch.srun_tasks <= 0 || spec_.loss_pattern)
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
    for (size_t i = 0; i < conns_.size(); ++i) {
      if (conns_[i].fd < 0) continue;
      fds.push_back({conns_[i].fd, POLLIN, 0});
      owners.push_back({nullptr, -1 - static_cast<int>(i)});
    }
    if (listen_fd_ >= 0) {
      fds.push_back({listen_fd_, POLLIN, 0});
      owners.push_back({nullptr, 0});
    }
    if (fan_fd_ >= 0) {
      fds.push_back({fan_fd_, POLLIN, 0});
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
        DrainConn(conns_[static_cast<size_t>(-1 - which)]);
      } else if (which == 0) {
        Accept();
      } else {
        ReadWatchEvents();
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
    for (const Conn& c : conns_) streams_open = streams_open || c.fd >= 0;
    return !streams_open || late;
  }

  void SampleRss(bool all_reaped) {
    if (Since(last_rss_) < 1.0 && !all_reaped) return;
    last_rss_ = Clock::now();
    std::set<pid_t> running;
    for (Live& l : live_) {
      if (l.pid > 0) running.insert(l.pid);
    }
    const GroupUsage u = UsageOfGroups(running);
    g_.peak_rss_bytes = std::max(g_.peak_rss_bytes, u.rss_bytes);
    if (!all_reaped) cpu_samples_.emplace_back(Since(t0_), u.cpu_seconds);
  }

  static Clock::time_point FromNow(double seconds) {
    return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
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
        if (sig == SIGTERM && l.launch.as_root && !l.launch.cleanup_argv.empty() &&
            !l.cleanup_started) {
          l.cleanup_started = true;
          l.cleanup_pid = launch::SpawnProcess(l.launch.cleanup_argv.front(),
                                               l.launch.cleanup_argv, l.launch.env);
        }
      }
    }
  }

  bool EveryRankReachedLastStep() const {
    bool all_done = spec_.expected_ranks > 0;
    for (int r = 0; r < spec_.expected_ranks; ++r) {
      auto it = rank_last_step_.find(r);
      all_done = all_done && it != rank_last_step_.end() && it->second >= spec_.last_step;
    }
    return all_done;
  }

  // Why the supervisor would end the phase now; SIGTERM to every process
  // group once, SIGKILL kill_grace_seconds later.
  void EndIfDue() {
    if (StopRequested()) g_.stopped = true;
    if (!g_.stopped && !g_.hung && Since(last_record_) > spec_.step_timeout_seconds &&
        !end_after_) {
      g_.hung = true;
      g_.hung_seconds = Since(last_record_);
      g_.hung_after_step = last_step_seen_;
    }
    if (spec_.last_step > 0 && !end_after_ && EveryRankReachedLastStep()) {
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
    PollStreams();
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

  // The processes' CPU time between the first and the last record kept, from
  // the samples taken inside that window (two at least, 2 s apart).
  void MeasureBusy() {
    if (g_.records.size() < 2) return;
    const double from = g_.records.front().arrived, to = g_.records.back().arrived;
    const std::pair<double, double>* a = nullptr;
    const std::pair<double, double>* b = nullptr;
    for (const auto& s : cpu_samples_) {
      if (s.first < from || s.first > to) continue;
      if (a == nullptr) a = &s;
      b = &s;
    }
    if (a == nullptr || b->first - a->first < 2.0) return;
    g_.busy_window_seconds = b->first - a->first;
    g_.busy_cpu_seconds = std::max(0.0, b->second - a->second);
    g_.busy_from = t0_ + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(a->first));
    g_.busy_to = t0_ + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(b->first));
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
      if (l.launch.cleanup_argv.empty() || l.pid <= 0) continue;
      if (!l.result.terminated && l.result.signal == 0) continue;
      job::CommandSpec c;
      c.argv = l.launch.cleanup_argv;
      c.env = l.launch.env;
      if (!l.launch.as_root) c.run_as = spec_.run_as;
      c.timeout_seconds = 30;
      Result<job::CommandResult> r = job::RunCommand(c);
      if (!r.ok() || !r->Succeeded()) {
        Say("pilot: program: " + c.argv.back() + " was not removed: " +
            (r.ok() ? r->Describe(c.timeout_seconds) + ": " + r->err.substr(0, 400)
                    : r.status().ToString()) +
            "\n");
      }
    }
  }

  // The last records, every descriptor closed, the results.
  void Finish() {
    // The last events answered, then the marks gone before anything waits
    // on the phase's processes: an open after this one is not held.
    if (fan_fd_ >= 0) {
      ReadWatchEvents();
      close(fan_fd_);
      fan_fd_ = -1;
    }
    if (listen_fd_ >= 0) Accept();
    for (Conn& c : conns_) {
      if (c.fd >= 0) DrainConn(c);
      if (c.fd >= 0) close(c.fd);
      c.fd = -1;
    }
    for (Live& l : live_) {
      for (int* fd : {&l.out_fd, &l.err_fd}) {
        if (*fd < 0) continue;
        close(*fd);
        *fd = -1;
      }
      g_.ranks.push_back(l.result);
    }
    EndOutlived();
    if (listen_fd_ >= 0) {
      close(listen_fd_);
      ::unlink(spec_.metrics_socket.c_str());
    }
    MeasureBusy();
    g_.wall_seconds = Since(t0_);
  }

  const GroupSpec& spec_;
  const Clock::time_point t0_;
  const pid_t parent_;
  std::vector<Live> live_;
  std::vector<Conn> conns_;
  int listen_fd_ = -1;
  int fan_fd_ = -1;
  std::vector<Watched> watched_;
  std::vector<std::pair<double, double>> cpu_samples_;  // seconds since t0, CPU seconds
  GroupResult g_;
  Clock::time_point last_record_;
  int64_t last_step_seen_ = 0;
  std::map<int, int64_t> rank_last_step_;
  std::optional<Clock::time_point> end_after_;  // when the grace period ends
  std::optional<Clock::time_point> term_sent_;
  bool kill_sent_ = false;
  Clock::time_point last_rss_;
};

}  // namespace

std::string TailLines(const std::string& text, size_t lines, size_t bytes) {
  size_t end = text.size();
  while (end > 0 && (text[end - 1] == '\n' || text[end - 1] == '\r')) --end;
  size_t pos = end, count = 0;
  while (pos > 0 && count < lines) {
    const size_t nl = text.rfind('\n', pos - 1);
    if (nl == std::string::npos) {
      pos = 0;
      break;
    }
    pos = nl;
    ++count;
    if (count < lines) continue;
    ++pos;
  }
  if (pos < end && text[pos] == '\n') ++pos;
  // Cut on a character boundary: half a character is bytes no reader
  // takes as text.
  return std::string(Utf8Tail(std::string_view(text).substr(pos, end - pos), bytes));
}

GroupResult RunGroup(const GroupSpec& spec) { return GroupRun(spec).Run(); }

}  // namespace pilot::supervisor
