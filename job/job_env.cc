#include "job/job_env.h"
#include "core/config/load.h"

#include <cerrno>
#include <cstdlib>
#include <limits>
#include <vector>

#include "core/base/atomic_file.h"
#include "job/env_names.h"
#include "core/records/hostlist.h"

namespace pilot::job {
namespace {

std::string Get(const Lookup& env, const std::string& name) {
  auto v = env(name);
  return v ? *v : "";
}

Result<int64_t> Number(const Lookup& env, const std::string& name, bool required) {
  std::string v = Get(env, name);
  if (v.empty()) {
    if (!required) return int64_t{-1};
    return Status::Invalid(name, "not set").WithHint("run from Slurm's Prolog=/Epilog=");
  }
  char* end = nullptr;
  errno = 0;
  long long n = std::strtoll(v.c_str(), &end, 10);
  if (errno != 0 || end == v.c_str() || *end != '\0' || n < 0 ||
      n > std::numeric_limits<uint32_t>::max()) {
    return Status::Invalid(name, "not a number: \"" + v + "\"");
  }
  return static_cast<int64_t>(n);
}

}  // namespace

Lookup ProcessLookup() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
}

Result<JobEnv> ReadJobEnv(const Lookup& env) {
  JobEnv job;
  PILOT_ASSIGN_OR_RETURN(job.job_id, Number(env, "SLURM_JOB_ID", true));
  PILOT_ASSIGN_OR_RETURN(int64_t uid, Number(env, "SLURM_JOB_UID", true));
  PILOT_ASSIGN_OR_RETURN(int64_t gid, Number(env, "SLURM_JOB_GID", true));
  job.uid = static_cast<uid_t>(uid);
  job.gid = static_cast<gid_t>(gid);
  job.user = Get(env, "SLURM_JOB_USER");
  PILOT_ASSIGN_OR_RETURN(int64_t nodes, Number(env, "SLURM_JOB_NUM_NODES", false));
  job.nodes = nodes > 0 ? static_cast<int>(nodes) : 1;
  job.node_list = Get(env, "SLURM_JOB_NODELIST");
  if (job.node_list.empty()) job.node_list = Get(env, "SLURM_NODELIST");
  job.host = Get(env, "SLURMD_NODENAME");
  job.work_dir = Get(env, "SLURM_JOB_WORK_DIR");
  job.config_path = Get(env, kJobControlConfig);
  job.config_sha256 = Get(env, kJobControlConfigSha);
  job.pins_submitted = Get(env, kJobControlPins);
  job.hub_cache = Get(env, kJobControlHubCache);
  job.is_pilot = !job.config_path.empty() || !Get(env, kOptionPilot).empty();
  if (const std::string run = Get(env, kJobControlPilotRun); !run.empty()) {
    const bool digits = run.size() <= 18 && run.find_first_not_of("0123456789") == std::string::npos;
    job.pilot_run = digits ? std::stoll(run) : -1;
    if (job.pilot_run == 0) job.pilot_run = -1;
  }
  std::string stage = Get(env, kJobControlStage);
  if (!stage.empty()) job.stage = stage;
  job.out = Get(env, kJobControlOut);
  job.exit_code = Get(env, "SLURM_JOB_EXIT_CODE2");
  job.container_image = Get(env, kOptionPyxisImage);
  job.gpus = Get(env, "SLURM_JOB_GPUS");
  return job;
}

std::optional<std::string> FirstNode(const JobEnv& job) {
  if (job.host.empty() || job.node_list.empty()) return std::nullopt;
  Result<std::vector<std::string>> hosts = pilot::ExpandHostlist(job.node_list);
  if (!hosts.ok() || hosts->empty()) return std::nullopt;
  return hosts->front();
}

std::optional<std::string> FirstNodeIfOther(const JobEnv& job) {
  if (job.nodes <= 1) return std::nullopt;
  std::optional<std::string> first = FirstNode(job);
  if (!first || *first == job.host) return std::nullopt;
  return first;
}

LoadOptions JobConfigOptions(const JobEnv& job, const std::string& user,
                             const std::string& home) {
  LoadOptions lo;
  lo.base_dir = DirName(job.config_path);
  std::string job_id = std::to_string(job.job_id);
  std::string submit_dir = job.work_dir;
  lo.env = [user, home, job_id, submit_dir](const std::string& name) -> std::optional<std::string> {
    if (name == "USER" && !user.empty()) return user;
    if (name == "HOME" && !home.empty()) return home;
    if (name == "SLURM_JOB_ID") return job_id;
    if (name == "SLURM_SUBMIT_DIR" && !submit_dir.empty()) return submit_dir;
    return std::nullopt;
  };
  return lo;
}

Result<Config> ParseLockedConfig(const std::string& text, const Lock& lock, int64_t job_id,
                                 const std::string& home) {
  JobEnv job;
  job.job_id = job_id;
  job.uid = lock.job.uid;
  job.gid = lock.job.gid;
  job.user = lock.job.user;
  job.work_dir = lock.job.submit_dir;
  job.config_path = lock.config.path.empty() ? lock.config.copy : lock.config.path;
  return ParseConfig(text, job.config_path, JobConfigOptions(job, lock.job.user, home));
}

}  // namespace pilot::job
