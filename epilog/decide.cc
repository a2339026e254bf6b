// From what the epilog gathered to core's DecideInput, and the decision.
#include <pwd.h>

#include "core/base/atomic_file.h"
#include "core/config/load.h"
#include "core/decide/decide.h"
#include "core/records/hardware.h"
#include "core/records/verify_report.h"
#include "epilog/epilog.h"

namespace pilot::epilog {

Result<Verdict> DecideForEpilog(const EpilogInputs& in, const Policy& policy) {
  DecideInput d;
  if (in.lock) {
    d.lock = *in.lock;
  } else {
    // Without a lock nothing was pinned: a pinning failure of its own.
    d.lock.job.id = in.job.job_id;
    d.lock.job.user = in.job.user;
    d.lock.job.uid = in.job.uid;
    d.lock.job.gid = in.job.gid;
    d.lock.job.host = in.job.host;
    d.lock.config.path = in.job.config_path;
    d.lock.config.sha256_submitted = in.job.config_sha256;
    d.lock.problems.push_back({"lock_missing", in.lock_problem});
  }

  // The prolog's copy is root's: trusted, but still size-limited.
  Result<std::string> text = ReadFileLimited(in.config_copy, 1 << 20);
  if (text.ok()) {
    std::string home;
    if (struct passwd* pw = getpwuid(in.job.uid)) home = pw->pw_dir;
    job::JobEnv job = in.job;
    if (job.config_path.empty()) job.config_path = in.config_copy;
    Result<Config> cfg =
        ParseConfig(*text, job.config_path, job::JobConfigOptions(job, d.lock.job.user, home));
    if (cfg.ok()) {
      d.config = std::move(cfg).value();
    } else {
      d.config_error = cfg.status().Message();
    }
  } else {
    d.config_error = "no copy of the config: " + text.status().Message();
  }

  d.results = in.results;
  d.results_error = in.results_problem;

  if (in.verify_ran && in.verify_problem.empty()) {
    Result<VerifyReport> v = ParseVerifyReport(in.verify_output, "pilot-runner verify --json");
    if (v.ok()) {
      d.verify = std::move(v).value();
    } else {
      d.verify.ran = false;
      d.verify.error = v.status().Message();
    }
    if (d.verify.ran && !in.manifest_problem.empty()) {
      d.verify.manifest_ok = false;
      d.verify.manifest_detail = in.manifest_problem;
    }
  } else {
    d.verify.ran = false;
    d.verify.error = !in.verify_problem.empty() ? in.verify_problem
                     : !in.results_problem.empty() ? "not run: no valid results"
                                                   : "not run";
  }

  HardwareCatalog catalog;
  if (!policy.hardware_catalog.empty()) {
    Result<HardwareCatalog> c = LoadHardwareCatalog(policy.hardware_catalog);
    if (!c.ok()) return c.status().Context("hardware catalog");
    catalog = std::move(c).value();
  }
  d.container_digest_now = in.container_digest_now;
  d.nodes_down = in.nodes_down;
  d.other_nodes = in.other_nodes;
  return Decide(d, policy, catalog, in.now_unix);
}

}  // namespace pilot::epilog
