#include "supervisor/program/program_env.h"

#include <algorithm>
#include <string_view>

#include "launch/rank_env.h"
#include "supervisor/workload_env.h"

namespace pilot::supervisor {
namespace {

bool PilotOwned(std::string_view name) {
  return name.substr(0, 6) == "PILOT_" || name.substr(0, 12) == "SLURM_PILOT_";
}

// Python's own ways to load code that no pin covers: a folder searched
// before the program's imports (a sitecustomize.py there runs first), the
// standard library's location, the user's site folder (usercustomize.py and
// .pth files run at start-up) and a file run before the program. The job's
// are not passed; the config (pinned) may set the first three.
bool PythonHook(std::string_view name) {
  return name == "PYTHONPATH" || name == "PYTHONHOME" || name == "PYTHONUSERBASE" ||
         name == "PYTHONSTARTUP" || name == "PYTHONNOUSERSITE";
}

}  // namespace

std::vector<std::string> ProgramEnv(const ProgramEnvInput& in) {
  std::vector<std::string> env = in.base_env;
  std::vector<std::string> seen;
  for (const std::string& kv : in.job_env) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    const std::string name = kv.substr(0, eq);
    if (PilotOwned(name) || PythonHook(name) || std::find(seen.begin(), seen.end(), name) != seen.end()) {
      continue;
    }
    seen.push_back(name);  // the first of a name twice wins, as getenv(3) reads it
    SetEnvValue(&env, name, kv.substr(eq + 1));
  }
  std::string py;
  if (in.cfg != nullptr) {
    for (const auto& [k, v] : in.cfg->program.env) SetEnvValue(&env, k, v);
    // Only program.env's PYTHONPATH (pinned with the config), after the probe.
    if (auto it = in.cfg->program.env.find("PYTHONPATH"); it != in.cfg->program.env.end()) py = it->second;
  }
  SetEnvValue(&env, "PYTHONPATH", in.probe_path + (py.empty() ? "" : ":" + py));
  // The user's site folder is not searched: what pip install --user put
  // there, its .pth files and usercustomize.py would change the program
  // without changing what the pilot pinned.
  SetEnvValue(&env, "PYTHONNOUSERSITE", "1");
  if (in.cfg != nullptr) {
    if (!in.cfg->training.alloc_conf.empty() && in.device == "cuda") {
      SetEnvValue(&env, "PYTORCH_CUDA_ALLOC_CONF", in.cfg->training.alloc_conf);
      SetEnvValue(&env, "PYTORCH_ALLOC_CONF", in.cfg->training.alloc_conf);
    }
    SetEnvValue(&env, "PILOT_STEPS", std::to_string(in.cfg->training.steps));
    SetEnvValue(&env, "PILOT_CHECKPOINT_STEP", std::to_string(in.cfg->checkpoint.at_step));
    SetEnvValue(&env, "PILOT_SEQ_LEN", std::to_string(in.cfg->run.seq_len));
    SetEnvValue(&env, "PILOT_MICRO_BATCH", std::to_string(in.cfg->run.micro_batch));
    if (in.cfg->training.deterministic) {
      // The probe asks torch for deterministic kernels; cuBLAS needs its
      // workspace fixed before CUDA starts (unless the job fixed one).
      SetEnvValue(&env, "PILOT_DETERMINISTIC", "1");
      if (in.device == "cuda" && EnvValue(env, "CUBLAS_WORKSPACE_CONFIG").empty()) {
        SetEnvValue(&env, "CUBLAS_WORKSPACE_CONFIG", ":4096:8");
      }
    }
  }
  SetEnvValue(&env, "PILOT_CHECKPOINT_DIR", in.checkpoint_dir);
  if (!in.resume_dir.empty()) SetEnvValue(&env, "PILOT_RESUME_DIR", in.resume_dir);
  if (in.resume_step > 0) SetEnvValue(&env, "PILOT_RESUME_STEP", std::to_string(in.resume_step));
  if (!in.metrics.empty()) SetEnvValue(&env, "PILOT_METRICS", in.metrics);
  SetEnvValue(&env, "PILOT_STAGE", in.stage);
  SetEnvValue(&env, "PILOT_PROCESS", in.process);
  SetEnvValue(&env, "PILOT_DEVICE", in.device);
  SetEnvValue(&env, "PILOT_SEED", std::to_string(in.seed));
  launch::RankPlace place;
  place.rank = in.rank;
  place.local_rank = in.local_rank;
  place.world_size = in.world_size;
  place.local_world_size = in.local_world_size;
  place.master_addr = in.master_addr;
  place.master_port = in.master_port;
  launch::SetRankEnv(&env, place, launch::RankVars::kTorchrun);
  if (in.tasks > 0) {
    // What srun would give the tasks the supervisor starts in its place
    // (frameworks that detect Slurm read their rank from these).
    SetEnvValue(&env, "SLURM_PROCID", std::to_string(in.rank));
    SetEnvValue(&env, "SLURM_LOCALID", std::to_string(in.local_rank));
    SetEnvValue(&env, "SLURM_NTASKS", std::to_string(in.tasks));
    SetEnvValue(&env, "SLURM_NPROCS", std::to_string(in.tasks));
  }
  return env;
}

}  // namespace pilot::supervisor
