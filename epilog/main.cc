// pilot-epilog: Slurm Epilog= for pilot jobs. See epilog.h and
// pilot-epilog(8). Exit status: 0 for every job (its problems are in the
// verdict; a verdict that cannot be stored is queued for `pilot flush`, or
// logged), 1 only when this node cannot serve pilot jobs (the state
// directory cannot be made or owned).
#include <cstdio>
#include <optional>
#include <string>

#include "core/base/guarded_main.h"
#include "epilog/epilog.h"
#include "job/flags.h"
#include "job/job_env.h"
#include "job/subprocess.h"

namespace {

using pilot::job::JobEnv;
using pilot::job::ScriptStart;
using pilot::job::StartScript;

int Main(int argc, char** argv) {
  using namespace pilot::epilog;
  // slurmd ends a script past PrologEpilogTimeout with SIGTERM, then
  // SIGKILL: the helper running then must not outlive this process.
  pilot::job::StopCommandsOnTermination();
  int exit_code = 0;
  std::optional<ScriptStart> start = StartScript("pilot-epilog", "Epilog", argc, argv, &exit_code);
  if (!start) return exit_code;
  const JobEnv& job = start->job;
  const pilot::Policy& policy = start->policy;
  auto report = RunEpilog(policy, job, RealEpilogDeps(policy));
  if (!report.ok()) {
    std::fprintf(stderr, "pilot-epilog: job %lld: %s\n", static_cast<long long>(job.job_id),
                 report.status().ToString().c_str());
    return 1;
  }
  if (report->skipped) {
    std::fprintf(stderr, "pilot-epilog: job %lld: %s\n", static_cast<long long>(job.job_id),
                 report->note.c_str());
    return 0;
  }
  const std::string& where = !report->verdict_path.empty()    ? report->verdict_path
                             : !report->unstored_path.empty() ? report->unstored_path
                                                              : std::string("nowhere (not stored)");
  std::fprintf(stderr, "pilot-epilog: job %lld: %s -> %s%s%s%s\n",
               static_cast<long long>(job.job_id), pilot::DecisionName(report->decision),
               where.c_str(), report->posted ? " (posted)" : "", report->queued ? " (queued)" : "",
               report->note.empty() ? "" : ("; " + report->note).c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // A failing epilog drains the node. Every bug exits 0 instead: the job is
  // left without a verdict, which no `pilot grant` accepts (pilot-epilog(8)).
  return pilot::GuardedMain("epilog", 0, [&] { return Main(argc, argv); });
}
