// Running the processes of one phase of a user's program: every rank (or,
// with launcher "none", the one process that starts its own workers) as the
// job's user, each in its own process group, with its standard output and
// error on pipes the supervisor forwards to the job's and keeps the end of,
// and its metrics records on a Unix socket the supervisor listens on
// (pilot-program(7)).
//
// Provenance: a message on the socket is read only when the process that
// sent it descends from one of the phase's processes (its parent chain in
// /proc reaches one of them, or the supervisor itself, which is the
// subreaper of what they leave behind); any other writer (another process
// of the same user, outside the job, connected or handed a connection) is
// refused and named in GroupResult::outside_writers (metrics_socket.h). The first record of a step and rank
// stands: a second one, a step before the rank's last, a step or rank out
// of range, or a line past the protocol's 4095 bytes is a protocol break,
// never kept.
//
// The supervisor's clock times every record as it arrives; a file the
// program rewrites later changes nothing. The phase ends when every process
// has exited, or the supervisor ends it: no accepted record for
// step_timeout seconds (hung), a process failed (the others get a grace
// period, then are ended: distributed peers of a failed rank wait
// forever), every rank reported the last step and did not exit within the
// grace period (RankResult::terminated: it did not exit by itself), or the
// supervisor was told to stop. Ending is SIGTERM to each process group,
// SIGKILL after kill_grace_seconds. When the phase is over, every process
// still descending from the supervisor (a daemon that left its process
// group) is killed and named in GroupResult::outlived: nothing of a phase
// survives it.
//
// The socket is a MetricsSocket (metrics_socket.h). With watch_files, the
// phase also learns which of those files a process of the phase opened and
// how much of them it read before its first record (CheckpointWatch,
// checkpoint_watch.h): that a resumed process read the checkpoint is then
// the supervisor's observation, not the program's word.
//
// Thread-safety: uses fork(); call from the supervisor's single thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "job/subprocess.h"
#include "core/records/srun_lines.h"
#include "supervisor/program/checkpoint_watch.h"
#include "supervisor/program/metrics.h"

namespace pilot::supervisor {

struct RankLaunch {
  int rank = 0;
  // argv[0] absolute, or looked up in the env's PATH as the user
  // (launch::ExecSearchingPath)
  std::vector<std::string> argv;
  std::vector<std::string> env;   // complete (PILOT_METRICS names GroupSpec::metrics_socket)
  // > 0: the process is one `srun --label` step of this many tasks (ranks
  // across nodes, launch/srun.h). Its output lines start with the task's
  // id ("  2: ...", launch::SplitSrunLabel);
  // without a loss pattern each of its stdout lines is a metrics record of
  // the rank that id names, and stdout is not forwarded (the ranks' own
  // output goes to their stderr, pilot-program(7)). srun's lines about
  // tasks that ended badly are kept in RankResult::srun_lines.
  int srun_tasks = 0;
  // Started as the supervisor (root), not GroupSpec::run_as: a container
  // runtime that itself runs the program as the job's user (podman --user,
  // supervisor/program/container.h).
  bool as_root = false;
  // What removes a container its runtime would leave behind
  // (launch::ContainerCommand::remove_argv; empty: nothing): started beside
  // the SIGTERM when the supervisor ends the process (as root, for a
  // process started as root), else run after the process (as it was
  // started, with env, 30 s at most) when a signal ended it.
  std::vector<std::string> cleanup_argv;
};

struct GroupSpec {
  std::vector<RankLaunch> ranks;
  std::optional<job::RunAs> run_as;  // nullopt: as the caller (tests without root)
  std::string cwd = "/";
  double step_timeout_seconds = 600;
  // With a pattern, stdout lines are the records: the n-th match of a
  // process is step first_step + n - 1.
  std::optional<LossPattern> loss_pattern;  // RE2, linear in the line (metrics.h)
  int64_t first_step = 1;
  int64_t last_step = 0;             // N; 0 = no end-of-run grace
  int expected_ranks = 1;            // ranks 0..n-1 whose records reach N end the run
  // Each process is one rank (RankLaunch::rank): a record of another rank
  // from its tree is a protocol break. False when one process starts the
  // ranks (launcher "none", an srun step).
  bool process_per_rank = false;
  // Records kept at most (one per step and rank is the protocol): a program
  // that floods its FIFO costs the supervisor no more memory than this.
  int64_t max_records = 1000000;
  double exit_grace_seconds = 30;    // after a process failed, for its peers
  // After every rank reported the last step, for the processes to exit by
  // themselves (a final save of a large model takes a while).
  double last_step_grace_seconds = 30;
  double kill_grace_seconds = 10;
  int forward_stdout = 1;            // where its output goes (-1: nowhere)
  int forward_stderr = 2;
  std::function<void()> tick;        // about every 200 ms
  // The socket the phase's records arrive on: made by RunGroup (owned by
  // run_as, mode 0600, in a folder only root may write) and removed again;
  // "" = no records but the loss pattern's or srun's lines.
  std::string metrics_socket;
  // Files whose opening and reading by a process of the phase is recorded
  // (at most kMaxWatchFiles; the rest are not watched).
  std::vector<std::string> watch_files;
  // False: the processes' output is only forwarded (across nodes too): no
  // record is read or kept and no hang is judged (a bound run,
  // supervisor/program/bound_run.h, whose processes report nothing).
  bool records = true;
  // Steps at whose first record the phase's CPU time is read as well
  // (GroupResult::cpu_marks; the first record's always is).
  std::vector<int64_t> cpu_mark_steps;
  // False when the ranks run in an srun step (slurmstepd's children, on
  // this node or another): their CPU time is not the supervisor's to read,
  // so no busy window and no CPU marks are taken.
  bool local_work = true;
};

// The phase's processes' CPU time (their process groups, reaped children
// included: proc_tree.h) read when a record arrived.
struct CpuMark {
  int64_t step = 0;
  double seconds = 0;      // the record's time since the phase started
  double cpu_seconds = 0;  // CPU seconds of the phase's processes by then
};

// The longest record line (bytes, without its newline) the protocol allows.
inline constexpr size_t kMaxRecordLine = 4095;

struct RankResult {
  int rank = 0;
  bool started = false;
  std::string start_problem;  // why it could not be started
  int exit_code = -1;         // -1 when a signal ended it
  int signal = 0;
  bool terminated = false;    // the supervisor signalled it
  // When it ended: seconds from the phase's start until it was reaped (the
  // order in which ranks ended names the first to fail, judge.h).
  double wall_seconds = 0;
  std::string stderr_tail;    // the last lines of its standard error (16 to 32 KiB)
  std::string stdout_tail;
  int64_t records = 0;
  int srun_tasks = 0;                            // RankLaunch::srun_tasks
  std::vector<pilot::SrunTaskLine> srun_lines;  // an srun step's, in the order srun wrote them
};

struct GroupResult {
  std::vector<RankResult> ranks;
  std::vector<MetricRecord> records;  // every rank's, in the order they arrived
  // The probe's other lines (metrics.h), in the order they arrived, a few
  // per rank at most; each with the rank of the process that wrote it.
  std::vector<EnvLine> envs;
  std::vector<PackagesLine> packages;
  std::vector<StateLine> states;
  int64_t bad_records = 0;
  int64_t dropped_records = 0;        // beyond GroupSpec::max_records: counted, not kept
  std::string first_bad_record;       // why the first one was refused
  // Records that broke the protocol (a step twice, backwards, out of range,
  // a rank out of range, a line too long): counted, the first few named.
  int64_t protocol_breaks = 0;
  std::vector<std::string> protocol_break_examples;
  // Writers refused because they do not descend from the phase: counted,
  // the first few named ("pid 123 (python3), uid 1000").
  int64_t outside_writers = 0;
  std::vector<std::string> outside_writer_examples;
  // Processes of the phase still alive when it ended, killed then.
  std::vector<std::string> outlived;
  // watch_files: which a process of the phase opened, how much of each it
  // read before its first record, and opens by the user's other processes.
  WatchResult watch;
  // The phase's processes' CPU time while its records came: between two
  // samples (/proc, four times a second) inside the window from the first kept
  // record to the last; 0 seconds when the window held no two samples 2 s
  // apart. busy_from/busy_to: the window on the steady clock, for the
  // device's utilization over the same time.
  double busy_window_seconds = 0;
  double busy_cpu_seconds = 0;
  double busy_steps = 0;              // the window's length in steps (mean time between steps)
  // The first record's CpuMark, then GroupSpec::cpu_mark_steps' (each read
  // within a round, 200 ms, of its record's arrival).
  std::vector<CpuMark> cpu_marks;
  std::chrono::steady_clock::time_point busy_from, busy_to;
  bool hung = false;                  // no record for step_timeout seconds
  double hung_seconds = 0;
  int64_t hung_after_step = 0;        // the last step any rank reported then
  bool stopped = false;               // the supervisor was told to stop
  bool after_last_step = false;       // ended after every rank reported the last step
  double wall_seconds = 0;
  // When the phase started, in seconds since the epoch (the system clock):
  // a record's MetricRecord::arrived after it is then a time that file
  // system timestamps compare with.
  double started_unix = 0;
  int64_t peak_rss_bytes = 0;         // sum over its processes, sampled from /proc
};

// Runs every rank to its end (see above).
GroupResult RunGroup(const GroupSpec& spec);

}  // namespace pilot::supervisor
