#include "cli/pilot_input.h"
#include "core/config/load.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <filesystem>

#include "cli/verdict_store.h"
#include "core/base/atomic_file.h"
#include "job/safe_read.h"
#include "job/state_layout.h"

namespace pilot::cli {

Result<std::string> ReadPilotFile(const Policy& policy, const std::string& path,
                                  size_t max_bytes, bool from_job) {
  if (from_job || ::geteuid() == 0) {
    const job::StateLayout layout(policy.state_dir, policy.work_root);
    // The jobs' folders, and the work root where the work folders lie
    // outside them: both hold files of the jobs' users.
    for (const std::string& dir : {layout.JobsDir(), layout.work_root()}) {
      if (dir.empty()) continue;
      if (std::optional<std::string> rel = job::PathBelow(dir, path)) {
        return job::ReadFileBeneath(dir, *rel, max_bytes);
      }
    }
  }
  return ReadFileLimited(path, max_bytes);
}

Result<Results> ReadPilotResults(const Policy& policy, const std::string& path, bool from_job) {
  PILOT_ASSIGN_OR_RETURN(std::string text,
                         ReadPilotFile(policy, path, kResultsMaxBytes, from_job));
  return ParseResults(text, path);
}

Result<PilotInput> LoadPilotInput(const std::string& source, const std::string& config_flag,
                                  const std::string& policy_flag) {
  PilotInput in;
  PILOT_ASSIGN_OR_RETURN(in.policy, LoadCliPolicy(policy_flag));
  Result<HardwareCatalog> cat = LoadHardwareCatalog(in.policy.hardware_catalog);
  if (!cat.ok()) {
    return cat.status().WithHint("set hardware_catalog in the site policy (pilot.conf(5))");
  }
  in.catalog = std::move(cat).value();

  std::string config_path = config_flag;
  const std::optional<int64_t> job_id = job::StateLayout::ParseJobId(source);
  const bool is_job = job_id.has_value();
  bool config_path_trusted = true;  // results.config_path may be read
  if (is_job) {
    const job::StateLayout layout(in.policy.state_dir, in.policy.work_root);
    const job::JobPaths paths = layout.Job(*job_id);
    in.label = "job " + source;
    // The supervisor's results; the workload's metrics stay in work/.
    in.results_path = paths.results;
    in.metrics_path = paths.work + "/metrics.jsonl";  // gone unless keep_work
    if (config_path.empty()) config_path = paths.config;
    Result<Verdict> v = ReadVerdict(layout.VerdictFile(*job_id));
    if (v.ok()) in.verdict = std::move(v).value();
  } else {
    in.label = source;
    in.results_path = source;
    const job::StateLayout layout(in.policy.state_dir);
    const std::optional<std::string> rel = job::PathBelow(layout.JobsDir(), source);
    if (rel && ::geteuid() == 0 && config_path.empty()) {
      // The user's results name any file as their config_path; root reads
      // the prolog's copy of the job the file is in instead.
      const std::optional<int64_t> owner =
          job::StateLayout::ParseJobId(rel->substr(0, rel->find('/')));
      if (owner) {
        config_path = layout.Job(*owner).config;
      } else {
        config_path_trusted = false;
      }
    }
  }
  in.from_job = is_job;
  Result<Results> r = ReadPilotResults(in.policy, in.results_path, is_job);
  if (!r.ok()) {
    Status s = r.status();
    if (is_job && s.code() == Code::kNotFound) {
      s = s.WithHint("the pilot did not finish, or its job ran before results were kept by "
                     "pilot-supervisor: pass a results.json");
    }
    if (is_job && s.code() == Code::kPermission && s.detail() == std::strerror(EACCES)) {
      s = s.WithHint("a job's results.json and config copy are readable by root and the job's "
                     "user only (pilot-files(5)); anyone can read its verdict: pilot verdict " +
                     source);
    }
    return s;
  }
  in.results = std::move(r).value();
  if (in.metrics_path.empty()) {
    in.metrics_path =
        (std::filesystem::path(in.results_path).parent_path() / "metrics.jsonl").string();
  }
  if (!config_path_trusted) {
    in.config_error = "a results.json in " + job::StateLayout(in.policy.state_dir).JobsDir() +
                      " outside a job's folder: root does not read its config_path: pass --config";
    return in;
  }
  if (config_path.empty()) config_path = in.results.config_path;
  if (config_path.empty()) {
    in.config_error = "results.json names no config: pass --config";
    return in;
  }
  LoadOptions opts;
  opts.expand_paths = false;  // only [run] and [model] are needed
  Result<Config> c = LoadConfig(config_path, opts);
  if (c.ok()) {
    in.config = std::move(c).value();
  } else {
    in.config_error = c.status().ToString();
  }
  return in;
}

}  // namespace pilot::cli
