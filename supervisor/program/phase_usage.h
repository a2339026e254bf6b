// What the processes of one phase of a user's program use, sampled from
// /proc four times a second: their summed resident memory (the peak) and
// CPU time, and from the CPU samples the work done while the phase's
// records came (GroupResult::busy_*: at least two samples 2 s apart inside
// the window from the first kept record to the last).
//
// Thread-safety: one phase's, from the supervisor's single thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <set>
#include <utility>
#include <vector>

#include "supervisor/program/group.h"

namespace pilot::supervisor {

class PhaseUsage {
 public:
  using Clock = std::chrono::steady_clock;
  explicit PhaseUsage(Clock::time_point t0) : t0_(t0), last_(t0 - std::chrono::seconds(5)) {}

  // Samples the process groups `running` (their leaders' pids) when
  // kSampleSeconds have passed, or at once when `all_reaped` (the last
  // look: memory only, no CPU sample). Raises out->peak_rss_bytes. Often
  // enough that a phase whose records span 2.5 s has a busy window of 2 s.
  static constexpr double kSampleSeconds = 0.25;
  void Sample(const std::set<pid_t>& running, bool all_reaped, GroupResult* out);
  // Sets out's busy_* from the samples inside its records' window.
  void MeasureBusy(GroupResult* out) const;
  // Reads the CPU time of `running` now for each record from out->records'
  // index `*seen` on that is the first kept, or the first of a step in
  // `steps`, and moves `*seen` to the end.
  void MarkRecords(const std::set<pid_t>& running, const std::vector<int64_t>& steps, size_t* seen,
                   GroupResult* out);

 private:
  const Clock::time_point t0_;
  Clock::time_point last_;
  std::vector<std::pair<double, double>> cpu_samples_;  // seconds since t0, CPU seconds
};

}  // namespace pilot::supervisor
