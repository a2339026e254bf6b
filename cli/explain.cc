// pilot explain JOBID: why the controller refused a change to a job bound
// to a pilot's grant. Slurm 22.05 shows the user only the error code's text
// ("Access/permission denied"); job_submit.lua records the reason in
// STATE/refusals/JOBID.json (job/refusal.h), which this shows with the
// bounds of the grant the job is held to.
#include <sys/stat.h>

#include "cli/options.h"
#include "cli/verdict_store.h"
#include "core/base/atomic_file.h"
#include "core/base/utf8.h"
#include "core/decide/grant.h"
#include "job/refusal.h"
#include "job/state_layout.h"

namespace pilot::cli {

int RunExplain(const Invocation& inv) {
  CommandLine cl("pilot explain [OPTIONS] JOBID",
                 "Show why the controller refused the last change to job JOBID (scontrol update)\n"
                 "that would have taken it past its pilot's grant, as the site's job_submit.lua\n"
                 "recorded it, and the bounds of that grant. Exit 0 shown, 1 nothing recorded.");
  cl.options.add_options()("policy", PolicyValue(), PolicyHelp("state_dir").c_str());
  cl.hidden.add_options()("job", po::value<std::string>(), "job id");
  cl.positional.add("job", 1);
  po::variables_map vm;
  if (auto rc = ParseCommandArgs(inv, cl, vm)) return *rc;
  if (!vm.count("job")) return UsageError(inv, "expected a JOBID");
  const std::string id = vm["job"].as<std::string>();
  const std::optional<int64_t> job_id = job::StateLayout::ParseJobId(id);
  if (!job_id) return UsageError(inv, "JOBID must be a number, got '" + id + "'");
  Result<Policy> policy = LoadCliPolicy(vm["policy"].as<std::string>());
  if (!policy.ok()) {
    inv.err << policy.status().ToString() << "\n";
    return kExitUsage;
  }
  const job::StateLayout layout(policy->state_dir);
  const std::string path = layout.RefusalFile(*job_id);
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) {
    inv.err << Status::NotFound("explain",
                                "job " + id + ": no refused change recorded (" + path + ")")
                   .WithHint(
                       "a change the controller refused for a reason of its own is not recorded; "
                       "see spank_pilot(8), BINDING")
                   .ToString()
            << "\n";
    return kExitNo;
  }
  Result<std::string> text = S_ISREG(st.st_mode)
                                 ? ReadFileLimited(path, 1 << 16)
                                 : Result<std::string>(Status::Corrupt(path, "not a regular file"));
  Result<job::ChangeRefusal> r =
      text.ok() ? job::ParseChangeRefusal(*text, path) : Result<job::ChangeRefusal>(text.status());
  if (r.ok() && r->job_id != *job_id)
    r = Status::Corrupt(path, "it names job " + std::to_string(r->job_id));
  if (!r.ok()) {
    inv.err << "pilot: explain: " << r.status().ToString() << "\n";
    return kExitNo;
  }
  inv.out << "job " << id << ": a change was refused at " << VisibleText(r->refused_at)
          << " (asked by uid " << r->uid << ")\n"
          << "  asked   " << VisibleText(r->change) << "\n"
          << "  why     " << VisibleText(r->reason) << "\n";
  if (r->pilot_job) {
    const std::string grant_path = layout.GrantFile(*r->pilot_job);
    Result<std::string> gt = ReadFileLimited(grant_path, 1 << 20);
    Result<GrantRecord> g =
        gt.ok() ? ParseGrantRecord(*gt, grant_path) : Result<GrantRecord>(gt.status());
    inv.out << "  grant   ";
    if (g.ok()) {
      inv.out << ReservationName(*r->pilot_job) << " for " << VisibleText(g->user) << ": at most "
              << g->nodes << " node(s) and " << g->duration_minutes
              << " minutes; one job, never an array\n";
    } else {
      inv.out << "pilot " << *r->pilot_job << ": " << VisibleText(g.status().Message()) << "\n";
    }
  }
  inv.out << "  record  " << path << "\n";
  return kExitOk;
}

}  // namespace pilot::cli
