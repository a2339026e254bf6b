// pilot-prolog: Slurm Prolog= for pilot jobs. See prolog.h and
// pilot-prolog(8). Exit status: 0 for every job (a user's mistake is
// recorded in lock.json; a full file system leaves the job without a lock,
// which is a NO-GO), 1 only when this node cannot serve pilot jobs (the
// state directory cannot be made, owned or written for another reason).
#include <cstdio>
#include <optional>
#include <string_view>

#include "core/base/guarded_main.h"
#include "job/flags.h"
#include "job/job_env.h"
#include "job/pins.h"
#include "job/subprocess.h"
#include "prolog/prolog.h"

namespace {

using pilot::job::JobEnv;
using pilot::job::ScriptStart;
using pilot::job::StartScript;

// pilot-prolog --pins REQUEST: the prolog runs itself so, as the job's user
// (job/pins.h), and reads the pins from standard output.
int PinsAsUser(const char* request) {
  pilot::Result<pilot::job::PinRequest> req = pilot::job::ParsePinRequest(request);
  if (!req.ok()) {
    std::fprintf(stderr, "%s\n", req.status().ToString().c_str());
    return 2;
  }
  pilot::job::PinLimits limits;
  std::printf("%s\n", pilot::LockPinsToJson(pilot::job::ComputePins(*req, limits)).c_str());
  return 0;
}

int Main(int argc, char** argv) {
  using namespace pilot::prolog;
  if (argc == 3 && std::string_view(argv[1]) == "--pins") return PinsAsUser(argv[2]);
  // slurmd ends a script past PrologEpilogTimeout with SIGTERM, then
  // SIGKILL: the helper running then must not outlive this process.
  pilot::job::StopCommandsOnTermination();
  int exit_code = 0;
  std::optional<ScriptStart> start =
      StartScript("pilot-prolog", "Prolog", argc, argv, &exit_code, /*bound_runs=*/true);
  if (!start) return exit_code;
  const JobEnv& job = start->job;
  const pilot::Policy& policy = start->policy;
  PrologOptions opts;
  opts.state_dir = policy.state_dir;
  opts.work_root = policy.work_root;
  opts.work_quota_command = policy.work_quota_command;
  opts.reserve_bytes = static_cast<int64_t>(policy.state_reserve_mb) << 20;
  opts.floor_bytes = static_cast<int64_t>(policy.state_floor_mb) << 20;
  opts.runner = policy.runner_path;
  opts.total_timeout_seconds = policy.prolog_timeout_seconds;
  PrologDeps deps = RealPrologDeps(policy);
  pilot::Status s = RunProlog(opts, job, deps);
  if (!s.ok()) {
    std::fprintf(stderr, "pilot-prolog: job %lld: %s\n", static_cast<long long>(job.job_id),
                 s.ToString().c_str());
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // A failing prolog drains the node. Every bug exits 0 instead: without a
  // lock the epilog issues NO-GO for the job (pilot-prolog(8)).
  return pilot::GuardedMain("prolog", 0, [&] { return Main(argc, argv); });
}
