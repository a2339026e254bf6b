// One workload process: started by the supervisor as the job's user, with
// the environment it was given, its standard streams the job's, and a pipe
// on descriptor 3 for its report that only the supervisor reads.
//
// The child: own process group; setgid, initgroups, setuid (and a check
// that root cannot be regained); the parent-death signal (SIGKILL), so it
// does not outlive the supervisor; every other descriptor closed; then
// exec. The supervisor times it with its own clock, samples device memory
// while it runs, and on SIGTERM/SIGINT (the job cancelled or out of time)
// passes SIGTERM to its group, then SIGKILL after a grace period.
//
// Thread-safety: uses fork(); call from the supervisor's single thread.
#pragma once

#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/base/status.h"
#include "job/subprocess.h"

namespace pilot::supervisor {

inline constexpr int kReportFd = 3;

struct WorkloadSpec {
  std::vector<std::string> argv;  // argv[0] absolute
  std::vector<std::string> env;   // complete
  std::optional<job::RunAs> run_as;  // nullopt: as the caller (tests without root)
  std::string cwd = "/";
  size_t max_report_bytes = 16u << 20;
  double kill_grace_seconds = 10;
};

struct WorkloadOutcome {
  int exit_code = -1;   // -1 when a signal ended it
  int signal = 0;
  double wall_seconds = 0;
  std::string report;   // what it wrote on descriptor 3 (at most max_report_bytes)
  bool report_too_large = false;
  bool terminated = false;  // the supervisor was asked to stop while it ran
};

// In a freshly forked child, before exec: default signal handling and an
// empty mask, the job's user (when given; a check that root cannot be
// regained), the parent-death signal (SIGKILL), and exit 126 when any of
// that fails or `parent` is already gone. Descriptors are the caller's.
void BecomeWorkloadChild(const std::optional<job::RunAs>& run_as, pid_t parent);

// Set by the supervisor's SIGTERM/SIGINT handler.
void RequestStop();
bool StopRequested();
// Forgets a stop request: for a process that runs several supervisions in
// turn (the tests); the supervisor itself never takes one back.
void ClearStopRequest();

// Runs the process to its end; `tick` runs about every 200 ms meanwhile
// (device memory sampling). Errors: kIoError when it cannot be started.
Result<WorkloadOutcome> RunWorkload(const WorkloadSpec& spec, const std::function<void()>& tick);

}  // namespace pilot::supervisor
