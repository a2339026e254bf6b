#include "supervisor/program/group.h"

#include <dirent.h>
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

#include "core/base/utf8.h"
#include "launch/spawn.h"
#include "launch/srun.h"
#include "supervisor/process.h"

namespace pilot::supervisor {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kTailBytes = 16 * 1024;

double Since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

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
  BecomeWorkloadChild(spec.run_as, parent);
  if (chdir(spec.cwd.c_str()) != 0) {
    Say("pilot: program: cannot enter the working directory " + spec.cwd + ": " +
        std::strerror(errno) + "\n");
    _exit(126);
  }
  Say("pilot: program: " + launch::ExecSearchingPath(r.argv, r.env) + "\n");
  _exit(127);
}

// Resident bytes of every process whose process group is one of `groups`.
int64_t GroupRss(const std::set<pid_t>& groups) {
  DIR* d = opendir("/proc");
  if (d == nullptr) return 0;
  const long page = sysconf(_SC_PAGESIZE);
  int64_t total = 0;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    const std::string path = std::string("/proc/") + e->d_name + "/stat";
    char buf[1024];
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    const ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) continue;
    buf[n] = '\0';
    const char* rp = std::strrchr(buf, ')');
    if (rp == nullptr) continue;
    char state = 0;
    long ppid = 0, pgrp = 0;
    if (std::sscanf(rp + 1, " %c %ld %ld", &state, &ppid, &pgrp) != 3) continue;
    if (groups.count(static_cast<pid_t>(pgrp)) == 0) continue;
    // Fields after ')': state(3) ... rss is field 24 of the whole line.
    const char* p = rp + 1;
    int field = 2;
    long long rss = 0;
    while (*p != '\0' && field < 24) {
      while (*p == ' ') ++p;
      ++field;
      if (field == 24) {
        rss = std::atoll(p);
        break;
      }
      while (*p != '\0' && *p != ' ') ++p;
    }
    total += rss * page;
  }
  closedir(d);
  return total;
}

struct Live {
  RankLaunch launch;
  RankResult result;
  pid_t pid = -1;
  int out_fd = -1, err_fd = -1, fifo_fd = -1;
  LineBuffer out_lines, fifo_lines, err_lines;
  int64_t pattern_matches = 0;
  std::map<int, int64_t> task_matches;  // an srun step's, per task
  bool reaped = false;
  Clock::time_point exited_at;
};

// A process's streams, in the order they are polled.
enum Stream { kFifo = 0, kStdout = 1, kStderr = 2 };

// One RunGroup: starts the processes, then rounds of reading their
// streams, reaping them and deciding whether to end them, until every
// process has exited and its streams are closed.
class GroupRun {
 public:
  explicit GroupRun(const GroupSpec& spec)
      : spec_(spec), t0_(Clock::now()), parent_(getpid()), live_(spec.ranks.size()) {}

  GroupResult Run() {
    for (size_t i = 0; i < spec_.ranks.size(); ++i) Start(&live_[i], spec_.ranks[i]);
    last_record_ = Clock::now();
    last_rss_ = Clock::now() - std::chrono::seconds(5);
    while (Round()) {
    }
    Finish();
    return std::move(g_);
  }

 private:
  // Starting.

  // A writer of our own keeps the FIFO from reporting end-of-file between
  // the program's opens and closes.
  void OpenFifo(Live* l) {
    if (l->launch.metrics_fifo.empty()) return;
    l->fifo_fd = open(l->launch.metrics_fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (l->fifo_fd < 0) return;
    const int w = open(l->launch.metrics_fifo.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (w >= 0) keep_open_.push_back(w);
  }

  void Start(Live* l, const RankLaunch& launch) {
    l->launch = launch;
    l->result.rank = l->launch.rank;
    l->result.srun_tasks = l->launch.srun_tasks;
    OpenFifo(l);
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

  // Records.

  void TakeRecord(Live& l, MetricRecord rec) {
    if (static_cast<int64_t>(g_.records.size()) >= spec_.max_records) {
      ++g_.dropped_records;
      return;
    }
    if (!rec.rank) rec.rank = l.launch.rank;
    rec.arrived = Since(t0_);
    last_record_ = Clock::now();
    last_step_seen_ = std::max(last_step_seen_, rec.step);
    rank_last_step_[*rec.rank] = std::max(rank_last_step_[*rec.rank], rec.step);
    ++l.result.records;
    g_.records.push_back(std::move(rec));
  }

  // A record line; `task`: the srun task whose line it is (its rank,
  // whatever the record says).
  void FifoLine(Live& l, const std::string& line, std::optional<int> task) {
    if (spec_.loss_pattern || line.find_first_not_of(" \t\r") == std::string::npos) return;
    Result<MetricRecord> r = ParseMetricLine(line);
    if (!r.ok()) {
      if (g_.bad_records++ == 0) {
        g_.first_bad_record = r.status().detail() + ": " + line.substr(0, 120);
      }
      return;
    }
    if (task) r->rank = *task;
    TakeRecord(l, std::move(r).value());
  }

  void OutLine(Live& l, const std::string& line) {
    std::optional<int> task;
    std::string text = line;
    if (l.launch.srun_tasks > 0) {
      auto split = launch::SplitSrunLabel(line, l.launch.srun_tasks);
      if (!split) return;
      task = split->first;
      text = std::move(split->second);
      if (!spec_.loss_pattern) return FifoLine(l, text, task);
    }
    if (!spec_.loss_pattern) return;
    std::optional<double> loss = MatchLoss(*spec_.loss_pattern, text);
    if (!loss) return;
    MetricRecord rec;
    rec.step = spec_.first_step + (task ? l.task_matches[*task]++ : l.pattern_matches++);
    rec.loss = *loss;
    rec.rank = task;
    TakeRecord(l, std::move(rec));
  }

  void ErrLine(Live& l, const std::string& line) {
    if (l.launch.srun_tasks <= 0 || l.result.srun_lines.size() >= 1000) return;
    if (auto t = pilot::ParseSrunTaskLine(line)) l.result.srun_lines.push_back(std::move(*t));
  }

  // Streams.

  // Reads what stream `which` of `l` has now; at the end of stdout or
  // stderr closes it (*fd = -1) and takes its last, unterminated line.
  void Drain(Live& l, int* fd, Stream which) {
    char buf[65536];
    for (;;) {
      const ssize_t n = read(*fd, buf, sizeof buf);
      if (n > 0) {
        const size_t k = static_cast<size_t>(n);
        if (which == kFifo) {
          l.fifo_lines.Append(buf, k);
          while (auto line = l.fifo_lines.Next()) FifoLine(l, *line, std::nullopt);
        } else if (which == kStdout) {
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
      if (n == 0 && which != kFifo) {
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

  static int* FdOf(Live& l, Stream which) {
    return which == kFifo ? &l.fifo_fd : which == kStdout ? &l.out_fd : &l.err_fd;
  }

  // Waits up to 200 ms for any open stream and drains those that have data.
  void PollStreams() {
    std::vector<pollfd> fds;
    std::vector<std::pair<Live*, Stream>> owners;
    for (Live& l : live_) {
      for (Stream w : {kFifo, kStdout, kStderr}) {
        if (*FdOf(l, w) < 0) continue;
        fds.push_back({*FdOf(l, w), POLLIN, 0});
        owners.push_back({&l, w});
      }
    }
    const int pr = poll(fds.data(), fds.size(), 200);
    if (pr <= 0) return;
    for (size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      Live& l = *owners[i].first;
      Drain(l, FdOf(l, owners[i].second), owners[i].second);
    }
  }

  // Processes.

  bool AllReaped() const {
    for (const Live& l : live_) {
      if (l.pid > 0 && !l.reaped) return false;
    }
    return true;
  }

  // Every process has exited: done once their stdout and stderr are closed;
  // descendants that keep a stream open get 2 s after the last exit.
  bool StreamsDone() const {
    bool streams_open = false;
    bool late = true;
    for (const Live& l : live_) {
      streams_open = streams_open || l.out_fd >= 0 || l.err_fd >= 0;
      if (l.pid > 0 && Since(l.exited_at) < 2) late = false;
    }
    return !streams_open || late;
  }

  void SampleRss(bool all_reaped) {
    if (Since(last_rss_) < 1.0 && !all_reaped) return;
    last_rss_ = Clock::now();
    std::set<pid_t> running;
    for (Live& l : live_) {
      if (l.pid > 0) running.insert(l.pid);
    }
    g_.peak_rss_bytes = std::max(g_.peak_rss_bytes, GroupRss(running));
  }

  Clock::time_point GraceFromNow() const {
    return Clock::now() + std::chrono::duration_cast<Clock::duration>(
                              std::chrono::duration<double>(spec_.exit_grace_seconds));
  }

  // Reaps the processes that exited; a failed one starts the grace period.
  void Reap() {
    for (Live& l : live_) {
      if (l.pid <= 0 || l.reaped) continue;
      int status = 0;
      if (waitpid(l.pid, &status, WNOHANG) != l.pid) continue;
      l.reaped = true;
      l.exited_at = Clock::now();
      l.result.wall_seconds = Since(t0_);
      if (WIFEXITED(status)) l.result.exit_code = WEXITSTATUS(status);
      if (WIFSIGNALED(status)) l.result.signal = WTERMSIG(status);
      kill(-l.pid, SIGKILL);  // whatever it left behind
      const bool failed = l.result.signal != 0 || l.result.exit_code != 0;
      if (failed && !end_after_) end_after_ = GraceFromNow();
    }
  }

  void SignalAll(int sig) {
    for (Live& l : live_) {
      if (l.pid > 0 && !l.reaped) {
        l.result.terminated = true;
        kill(-l.pid, sig);
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
      end_after_ = GraceFromNow();
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

  // The FIFOs' last records, every descriptor closed, the results.
  void Finish() {
    for (Live& l : live_) {
      for (int* fd : {&l.fifo_fd, &l.out_fd, &l.err_fd}) {
        if (*fd < 0) continue;
        if (fd == &l.fifo_fd) Drain(l, fd, kFifo);
        close(*fd);
        *fd = -1;
      }
      if (auto rest = l.fifo_lines.Rest()) FifoLine(l, *rest, std::nullopt);
      g_.ranks.push_back(l.result);
    }
    for (int fd : keep_open_) close(fd);
    g_.wall_seconds = Since(t0_);
  }

  const GroupSpec& spec_;
  const Clock::time_point t0_;
  const pid_t parent_;
  std::vector<Live> live_;
  std::vector<int> keep_open_;
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
