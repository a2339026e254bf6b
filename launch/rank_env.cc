#include "launch/rank_env.h"

#include <optional>
#include <utility>

#include "core/base/strings.h"

namespace pilot::launch {
namespace {

void Set(std::vector<std::string>* env, std::string_view name, const std::string& value) {
  std::string entry = std::string(name) + "=" + value;
  for (std::string& e : *env) {
    if (e.size() > name.size() && e.compare(0, name.size(), name) == 0 && e[name.size()] == '=') {
      e = std::move(entry);
      return;
    }
  }
  env->push_back(std::move(entry));
}

Result<int> IntVar(const EnvLookup& env, const std::string& name, int lo, int hi) {
  std::optional<std::string> v = env(name);
  if (!v) return Status::NotFound(name, "not set");
  uint64_t n = 0;
  if (!ParseUnsigned(*v, &n) || n < static_cast<uint64_t>(lo) || n > static_cast<uint64_t>(hi)) {
    return Status::Invalid(name, "\"" + *v + "\" is not a number in [" + std::to_string(lo) + ", " +
                                     std::to_string(hi) + "]");
  }
  return static_cast<int>(n);
}

}  // namespace

std::vector<std::string_view> RankEnvNames(RankVars vars) {
  if (vars == RankVars::kPilot) {
    return {"PILOT_RANK", "PILOT_WORLD_SIZE", "PILOT_LOCAL_RANK", "PILOT_MASTER_ADDR",
            "PILOT_MASTER_PORT"};
  }
  return {"RANK",       "LOCAL_RANK", "WORLD_SIZE",  "LOCAL_WORLD_SIZE",
          "GROUP_RANK", "NODE_RANK",  "MASTER_ADDR", "MASTER_PORT"};
}

void SetRankEnv(std::vector<std::string>* env, const RankPlace& p, RankVars vars) {
  const std::vector<std::string_view> names = RankEnvNames(vars);
  const std::vector<std::string> values =
      vars == RankVars::kPilot
          ? std::vector<std::string>{std::to_string(p.rank), std::to_string(p.world_size),
                                     std::to_string(p.local_rank), p.master_addr,
                                     std::to_string(p.master_port)}
          : std::vector<std::string>{std::to_string(p.rank),
                                     std::to_string(p.local_rank),
                                     std::to_string(p.world_size),
                                     std::to_string(p.local_world_size),
                                     std::to_string(p.node_rank),
                                     std::to_string(p.node_rank),
                                     p.master_addr,
                                     std::to_string(p.master_port)};
  for (size_t i = 0; i < names.size(); ++i) Set(env, names[i], values[i]);
}

bool InSlurmStep(const EnvLookup& env) {
  return env("SLURM_STEP_ID").has_value() && env("SLURM_NTASKS").has_value() &&
         env("SLURM_PROCID").has_value();
}

Result<RankInfo> RankFromEnv(const EnvLookup& env) {
  RankInfo r;
  constexpr int kMax = 1 << 20;
  if (env("PILOT_RANK")) {
    r.launcher = "local";
    PILOT_ASSIGN_OR_RETURN(r.world_size, IntVar(env, "PILOT_WORLD_SIZE", 1, kMax));
    PILOT_ASSIGN_OR_RETURN(r.rank, IntVar(env, "PILOT_RANK", 0, r.world_size - 1));
    PILOT_ASSIGN_OR_RETURN(r.local_rank, IntVar(env, "PILOT_LOCAL_RANK", 0, r.world_size - 1));
    if (env("PILOT_NODE_ID")) {
      PILOT_ASSIGN_OR_RETURN(r.node_id, IntVar(env, "PILOT_NODE_ID", 0, kMax));
    }
    if (auto a = env("PILOT_MASTER_ADDR")) r.master_addr = *a;
    PILOT_ASSIGN_OR_RETURN(r.master_port, IntVar(env, "PILOT_MASTER_PORT", 1, 65535));
    return r;
  }
  if (!InSlurmStep(env)) return Status::NotFound("rank", "neither PILOT_RANK nor an srun step");
  r.launcher = "srun";
  PILOT_ASSIGN_OR_RETURN(r.world_size, IntVar(env, "SLURM_NTASKS", 1, kMax));
  PILOT_ASSIGN_OR_RETURN(r.rank, IntVar(env, "SLURM_PROCID", 0, r.world_size - 1));
  PILOT_ASSIGN_OR_RETURN(r.local_rank, IntVar(env, "SLURM_LOCALID", 0, r.world_size - 1));
  if (env("SLURM_NODEID")) {
    PILOT_ASSIGN_OR_RETURN(r.node_id, IntVar(env, "SLURM_NODEID", 0, kMax));
  }
  std::optional<std::string> nodes = env("SLURM_STEP_NODELIST");
  if (!nodes) nodes = env("SLURM_JOB_NODELIST");
  if (!nodes) return Status::NotFound("SLURM_JOB_NODELIST", "not set in an srun step");
  PILOT_ASSIGN_OR_RETURN(std::vector<std::string> hosts, ExpandHostlist(*nodes));
  r.master_addr = hosts.front();
  if (auto a = env("SLURM_LAUNCH_NODE_IPADDR")) r.launch_addr = *a;
  if (auto a = env("PILOT_MASTER_ADDR")) r.master_addr = *a;
  if (env("PILOT_MASTER_PORT")) {
    PILOT_ASSIGN_OR_RETURN(r.master_port, IntVar(env, "PILOT_MASTER_PORT", 1, 65535));
  } else {
    std::optional<std::string> job = env("SLURM_JOB_ID");
    uint64_t id = 0;
    if (!job || !ParseUnsigned(*job, &id)) return Status::Invalid("SLURM_JOB_ID", "missing or not a number");
    r.master_port = MasterPortForJob(id);
  }
  return r;
}

}  // namespace pilot::launch
