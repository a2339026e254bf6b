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

#include "supervisor/process.h"
#include "supervisor/workload_env.h"

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
  std::vector<char*> envp;
  for (const std::string& e : r.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  std::vector<std::string> args = r.argv;
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const std::string& name = r.argv[0];
  if (name.find('/') != std::string::npos) {
    execve(name.c_str(), argv.data(), envp.data());
    Say("pilot: program: cannot run " + name + ": " + std::strerror(errno) + "\n");
    _exit(127);
  }
  const std::string path = EnvValue(r.env, "PATH");
  size_t start = 0;
  int why = ENOENT;
  for (size_t i = 0; i <= path.size(); ++i) {
    if (i < path.size() && path[i] != ':') continue;
    std::string dir = path.substr(start, i - start);
    start = i + 1;
    if (dir.empty()) continue;
    const std::string full = dir + "/" + name;
    execve(full.c_str(), argv.data(), envp.data());
    if (errno != ENOENT && errno != ENOTDIR) why = errno;
  }
  Say("pilot: program: " + name + ": " +
      (why == ENOENT ? std::string("not found in PATH ") + path : std::strerror(why)) + "\n");
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

}  // namespace

std::optional<std::pair<int, std::string>> SplitSrunLabel(const std::string& line, int tasks) {
  size_t i = 0;
  while (i < line.size() && i < 8 && line[i] == ' ') ++i;
  const size_t first = i;
  int64_t id = 0;
  while (i < line.size() && i - first < 9 && line[i] >= '0' && line[i] <= '9') id = id * 10 + (line[i++] - '0');
  if (i == first || i >= line.size() || line[i] != ':' || id >= tasks) return std::nullopt;
  ++i;
  if (i < line.size() && line[i] == ' ') ++i;
  return std::make_pair(static_cast<int>(id), line.substr(i));
}

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
  std::string out = text.substr(pos, end - pos);
  if (out.size() > bytes) out = out.substr(out.size() - bytes);
  return out;
}

GroupResult RunGroup(const GroupSpec& spec) {
  GroupResult g;
  const auto t0 = Clock::now();
  const pid_t parent = getpid();
  std::vector<Live> live(spec.ranks.size());
  std::set<pid_t> groups;
  // A writer of our own keeps each FIFO from reporting end-of-file between
  // the program's opens and closes.
  std::vector<int> keep_open;
  for (size_t i = 0; i < spec.ranks.size(); ++i) {
    Live& l = live[i];
    l.launch = spec.ranks[i];
    l.result.rank = l.launch.rank;
    l.result.srun_tasks = l.launch.srun_tasks;
    if (!l.launch.metrics_fifo.empty()) {
      l.fifo_fd = open(l.launch.metrics_fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
      if (l.fifo_fd >= 0) {
        const int w = open(l.launch.metrics_fifo.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
        if (w >= 0) keep_open.push_back(w);
      }
    }
    int out[2], err[2];
    if (l.launch.argv.empty() || pipe2(out, O_CLOEXEC) != 0) {
      l.result.start_problem = l.launch.argv.empty() ? "no command" : std::strerror(errno);
      continue;
    }
    if (pipe2(err, O_CLOEXEC) != 0) {
      l.result.start_problem = std::strerror(errno);
      close(out[0]);
      close(out[1]);
      continue;
    }
    const pid_t pid = fork();
    if (pid < 0) {
      l.result.start_problem = std::string("fork: ") + std::strerror(errno);
      for (int fd : {out[0], out[1], err[0], err[1]}) close(fd);
      continue;
    }
    if (pid == 0) {
      // The write ends without close-on-exec, above the range dup2 overwrites.
      const int ow = fcntl(out[1], F_DUPFD, 10), ew = fcntl(err[1], F_DUPFD, 10);
      ExecRank(l.launch, spec, ow, ew, parent);
    }
    setpgid(pid, pid);
    close(out[1]);
    close(err[1]);
    l.pid = pid;
    l.out_fd = out[0];
    l.err_fd = err[0];
    fcntl(l.out_fd, F_SETFL, O_NONBLOCK);
    fcntl(l.err_fd, F_SETFL, O_NONBLOCK);
    l.result.started = true;
    groups.insert(pid);
  }

  auto last_record = Clock::now();
  int64_t last_step_seen = 0;
  std::map<int, int64_t> rank_last_step;
  std::optional<Clock::time_point> end_after;  // when the grace period ends
  std::optional<Clock::time_point> term_sent;
  bool kill_sent = false;
  auto last_rss = Clock::now() - std::chrono::seconds(5);

  auto take_record = [&](Live& l, MetricRecord rec) {
    if (static_cast<int64_t>(g.records.size()) >= spec.max_records) {
      ++g.dropped_records;
      return;
    }
    if (!rec.rank) rec.rank = l.launch.rank;
    rec.arrived = Since(t0);
    last_record = Clock::now();
    last_step_seen = std::max(last_step_seen, rec.step);
    rank_last_step[*rec.rank] = std::max(rank_last_step[*rec.rank], rec.step);
    ++l.result.records;
    g.records.push_back(std::move(rec));
  };
  // `task`: the srun task whose line it is (its rank, whatever the record says).
  auto fifo_line = [&](Live& l, const std::string& line, std::optional<int> task) {
    if (spec.loss_pattern || line.find_first_not_of(" \t\r") == std::string::npos) return;
    Result<MetricRecord> r = ParseMetricLine(line);
    if (!r.ok()) {
      if (g.bad_records++ == 0) {
        g.first_bad_record = r.status().detail() + ": " + line.substr(0, 120);
      }
      return;
    }
    if (task) r->rank = *task;
    take_record(l, std::move(r).value());
  };
  auto out_line = [&](Live& l, const std::string& line) {
    std::optional<int> task;
    std::string text = line;
    if (l.launch.srun_tasks > 0) {
      auto split = SplitSrunLabel(line, l.launch.srun_tasks);
      if (!split) return;
      task = split->first;
      text = std::move(split->second);
      if (!spec.loss_pattern) return fifo_line(l, text, task);
    }
    if (!spec.loss_pattern) return;
    std::optional<double> loss = MatchLoss(*spec.loss_pattern, text);
    if (!loss) return;
    MetricRecord rec;
    rec.step = spec.first_step + (task ? l.task_matches[*task]++ : l.pattern_matches++);
    rec.loss = *loss;
    rec.rank = task;
    take_record(l, std::move(rec));
  };
  auto err_line = [&](Live& l, const std::string& line) {
    if (l.launch.srun_tasks <= 0 || l.result.srun_lines.size() >= 1000) return;
    if (auto t = pilot::ParseSrunTaskLine(line)) l.result.srun_lines.push_back(std::move(*t));
  };
  auto drain = [&](Live& l, int* fd, int which) {
    char buf[65536];
    for (;;) {
      const ssize_t n = read(*fd, buf, sizeof buf);
      if (n > 0) {
        const size_t k = static_cast<size_t>(n);
        if (which == 0) {
          l.fifo_lines.Append(buf, k);
          while (auto line = l.fifo_lines.Next()) fifo_line(l, *line, std::nullopt);
        } else if (which == 1) {
          if (l.launch.srun_tasks <= 0 || spec.loss_pattern) WriteAll(spec.forward_stdout, buf, k);
          KeepTail(&l.result.stdout_tail, buf, k);
          l.out_lines.Append(buf, k);
          while (auto line = l.out_lines.Next()) out_line(l, *line);
        } else {
          WriteAll(spec.forward_stderr, buf, k);
          KeepTail(&l.result.stderr_tail, buf, k);
          l.err_lines.Append(buf, k);
          while (auto line = l.err_lines.Next()) err_line(l, *line);
        }
        continue;
      }
      if (n == 0 && which != 0) {
        close(*fd);
        *fd = -1;
        if (which == 1) {
          if (auto rest = l.out_lines.Rest()) out_line(l, *rest);
        } else if (auto rest = l.err_lines.Rest()) {
          err_line(l, *rest);
        }
      }
      break;
    }
  };
  auto signal_all = [&](int sig) {
    for (Live& l : live) {
      if (l.pid > 0 && !l.reaped) {
        l.result.terminated = true;
        kill(-l.pid, sig);
      }
    }
  };

  for (;;) {
    bool all_reaped = true, streams_open = false;
    std::vector<pollfd> fds;
    std::vector<std::pair<Live*, int>> owners;
    for (Live& l : live) {
      if (l.pid > 0 && !l.reaped) all_reaped = false;
      const int which_fd[3] = {l.fifo_fd, l.out_fd, l.err_fd};
      for (int w = 0; w < 3; ++w) {
        if (which_fd[w] < 0) continue;
        if (w != 0) streams_open = true;
        fds.push_back({which_fd[w], POLLIN, 0});
        owners.push_back({&l, w});
      }
    }
    if (all_reaped) {
      // Descendants that keep a stream open get 2 s after the last exit.
      bool late = true;
      for (Live& l : live) {
        if (l.pid > 0 && Since(l.exited_at) < 2) late = false;
      }
      if (!streams_open || late) break;
    }
    const int pr = poll(fds.data(), fds.size(), 200);
    if (pr > 0) {
      for (size_t i = 0; i < fds.size(); ++i) {
        if (fds[i].revents == 0) continue;
        Live& l = *owners[i].first;
        int* fd = owners[i].second == 0 ? &l.fifo_fd : owners[i].second == 1 ? &l.out_fd : &l.err_fd;
        drain(l, fd, owners[i].second);
      }
    }
    if (spec.tick) spec.tick();
    if (Since(last_rss) >= 1.0 || all_reaped) {
      last_rss = Clock::now();
      std::set<pid_t> running;
      for (Live& l : live) {
        if (l.pid > 0) running.insert(l.pid);
      }
      g.peak_rss_bytes = std::max(g.peak_rss_bytes, GroupRss(running));
    }
    for (Live& l : live) {
      if (l.pid <= 0 || l.reaped) continue;
      int status = 0;
      if (waitpid(l.pid, &status, WNOHANG) != l.pid) continue;
      l.reaped = true;
      l.exited_at = Clock::now();
      l.result.wall_seconds = Since(t0);
      if (WIFEXITED(status)) l.result.exit_code = WEXITSTATUS(status);
      if (WIFSIGNALED(status)) l.result.signal = WTERMSIG(status);
      kill(-l.pid, SIGKILL);  // whatever it left behind
      const bool failed = l.result.signal != 0 || l.result.exit_code != 0;
      if (failed && !end_after) end_after = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                std::chrono::duration<double>(spec.exit_grace_seconds));
    }
    bool any_running = false;
    for (Live& l : live) any_running = any_running || (l.pid > 0 && !l.reaped);
    if (!any_running) continue;
    // Why the supervisor would end the phase now.
    if (StopRequested()) g.stopped = true;
    if (!g.stopped && !g.hung && Since(last_record) > spec.step_timeout_seconds && !end_after) {
      g.hung = true;
      g.hung_seconds = Since(last_record);
      g.hung_after_step = last_step_seen;
    }
    if (spec.last_step > 0 && !end_after) {
      bool all_done = spec.expected_ranks > 0;
      for (int r = 0; r < spec.expected_ranks; ++r) {
        auto it = rank_last_step.find(r);
        all_done = all_done && it != rank_last_step.end() && it->second >= spec.last_step;
      }
      if (all_done) {
        g.after_last_step = true;
        end_after = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                       std::chrono::duration<double>(spec.exit_grace_seconds));
      }
    }
    const bool end_now = g.stopped || g.hung || (end_after && Clock::now() >= *end_after);
    if (end_now && !term_sent) {
      signal_all(SIGTERM);
      term_sent = Clock::now();
    } else if (term_sent && !kill_sent &&
               std::chrono::duration<double>(Clock::now() - *term_sent).count() >
                   spec.kill_grace_seconds) {
      signal_all(SIGKILL);
      kill_sent = true;
    }
  }
  for (Live& l : live) {
    for (int* fd : {&l.fifo_fd, &l.out_fd, &l.err_fd}) {
      if (*fd < 0) continue;
      if (fd == &l.fifo_fd) drain(l, fd, 0);
      close(*fd);
      *fd = -1;
    }
    if (auto rest = l.fifo_lines.Rest()) fifo_line(l, *rest, std::nullopt);
    g.ranks.push_back(l.result);
  }
  for (int fd : keep_open) close(fd);
  g.wall_seconds = Since(t0);
  return g;
}

}  // namespace pilot::supervisor
