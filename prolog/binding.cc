// A long job bound to its pilot (job/binding.h): the prolog's side.
#include "job/binding.h"

#include <pwd.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstring>

#include "core/base/atomic_file.h"
#include "core/base/rfc3339.h"
#include "core/decide/grant.h"
#include "job/reserve.h"
#include "job/state_dir.h"
#include "job/state_layout.h"
#include "prolog/prolog.h"

namespace pilot::prolog {
namespace {

// The hub cache the pilot's hub pins were read from: a snapshot folder is
// CACHE/models--org--name/snapshots/COMMIT. "" when it pinned none.
std::string HubCacheOf(const Lock& lock) {
  for (const LockPin& p : lock.pins) {
    if (p.kind != "hub_model" && p.kind != "hub_dataset") continue;
    std::string path = p.path;
    for (int up = 0; up < 3 && !path.empty(); ++up) path = path.substr(0, path.rfind('/'));
    if (!path.empty()) return path;
  }
  return "";
}

// A file of root's that only root can have written: a plain file owned by
// root. "" when it is; else why not.
std::string NotRootsFile(const std::string& path) {
  struct stat sb {};
  if (::lstat(path.c_str(), &sb) != 0) return path + ": " + std::strerror(errno);
  if (!S_ISREG(sb.st_mode) || sb.st_uid != 0) return path + " is not a plain file of root's";
  return "";
}

// Why the job is not the piloted run (empty: it is); fills the record's
// identities.
std::vector<std::string> CheckRun(const PrologOptions& opts, const job::JobEnv& job,
                                  const PrologDeps& deps, const std::string& user,
                                  job::RunRecord* rec) {
  if (job.pilot_run < 0) return {"--pilot-run: not a job id"};
  const job::StateLayout layout(opts.state_dir, opts.work_root);
  const std::string pilot = "job " + std::to_string(job.pilot_run);
  const std::string grant_path = layout.GrantFile(job.pilot_run);
  if (std::string why = NotRootsFile(grant_path); !why.empty()) {
    return {pilot + " has no grant (" + why +
            "): only a granted pilot binds a run ('pilot grant', pilot(1))"};
  }
  Result<std::string> text = ReadFileLimited(grant_path, 1 << 20);
  Result<GrantRecord> grant =
      text.ok() ? ParseGrantRecord(*text, grant_path) : Result<GrantRecord>(text.status());
  if (!grant.ok()) return {"the grant of " + pilot + ": " + grant.status().Message()};
  if (grant->job_id != job.pilot_run)
    return {grant_path + " names job " + std::to_string(grant->job_id)};
  if (grant->user != user) return {pilot + " was granted to " + grant->user + ", not to " + user};
  if (!grant->identity) {
    return {"the grant of " + pilot +
            " records no run identity (its verdict carries none): ask for a new pilot"};
  }
  rec->piloted_sha256 = grant->identity->sha256;
  const std::string lock_path = layout.Job(job.pilot_run).lock;
  if (std::string why = NotRootsFile(lock_path); !why.empty())
    return {"the lock of " + pilot + ": " + why};
  Result<Lock> piloted = ReadLock(lock_path);
  if (!piloted.ok()) return {"the lock of " + pilot + ": " + piloted.status().Message()};
  if (piloted->job.uid != job.uid)
    return {pilot + " is another user's (uid " + std::to_string(piloted->job.uid) + ")"};
  // The pilot's config and folders, read now, as this job's user.
  job::JobEnv as_piloted = job;
  as_piloted.config_path = piloted->config.path;
  as_piloted.work_dir = piloted->job.submit_dir;
  as_piloted.hub_cache = HubCacheOf(*piloted);
  as_piloted.pins_submitted.clear();
  Lock now = PinForIdentity(opts, as_piloted, deps);
  now.job.nodes = piloted->job.nodes;  // the grant bounds the node count (job_submit.lua)
  const LockIdentity id = RunIdentity(now);
  rec->identity_sha256 = id.sha256;
  rec->identity_lines = id.lines;
  std::vector<std::string> why = job::IdentityDifferences(grant->identity->lines, id.lines);
  // A part that could not be pinned now shows as a difference; say why.
  if (!why.empty()) {
    for (const LockProblem& p : now.problems) why.push_back("(" + p.code + ": " + p.detail + ")");
  }
  return why;
}

}  // namespace

Status BindRun(const PrologOptions& opts, const job::JobEnv& job, const PrologDeps& deps) {
  const job::StateLayout layout(opts.state_dir, opts.work_root);
  std::string user = job.user;
  if (user.empty()) {
    if (struct passwd* pw = getpwuid(job.uid)) user = pw->pw_name;
  }
  job::RunRecord rec;
  rec.job_id = job.job_id;
  rec.pilot_job = job.pilot_run;
  rec.user = user;
  rec.uid = job.uid;
  rec.host = job.host;
  rec.reasons = CheckRun(opts, job, deps, user, &rec);
  rec.decision = rec.reasons.empty() ? job::kRunAdmitted : job::kRunRefused;
  rec.checked_at = FormatRfc3339(deps.now_unix());
  const std::string path = layout.RunFile(job.job_id);
  Status s = job::MakeRootDir(layout.RunsDir(), 0755);
  auto log = [&](const std::string& line) {
    std::fprintf(stderr, "pilot-prolog: job %lld: %s\n", static_cast<long long>(job.job_id),
                 line.c_str());
  };
  if (s.ok()) s = job::WriteWithReserve(layout, path, job::RunRecordToJson(rec), 0644, log);
  if (!s.ok()) {
    log("cannot record the run's check: " + s.Message() + "; its tasks refuse until it is checked");
    return job::IsOutOfSpace(s) ? Status::Ok() : s;
  }
  log(std::string("run of pilot job ") + std::to_string(job.pilot_run) + ": " + rec.decision +
      (rec.reasons.empty() ? "" : ": " + rec.reasons.front()));
  return Status::Ok();
}

}  // namespace pilot::prolog
