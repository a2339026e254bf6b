// Submit side (srun, sbatch, salloc): validate the pilot config with the same
// loader as `pilot check` and record it in the job. A config error fails the
// command before Slurm creates a job.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "core/config/config.h"
#include "core/config/load.h"
#include "spank_plugin/pilot_spank.h"

namespace pilot::spank {
namespace {

std::string EnvOr(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::string(v) : fallback;
}

// The user reads this on the terminal of srun/sbatch/salloc.
int Refuse(const Status& s) {
  std::fprintf(stderr, "%s\n", s.ToString().c_str());
  return -1;
}

// Sets NAME both in this command's environment (copied into the job's) and in
// the job control environment (seen by the prolog and epilog as SPANK_NAME).
int Record(spank_t sp, const char* name, const std::string& value) {
  if (setenv(name, value.c_str(), 1) != 0) return -1;
  spank_err_t rc = spank_job_control_setenv(sp, name, value.c_str(), 1);
  if (rc != ESPANK_SUCCESS) {
    LogError(std::string("spank_job_control_setenv(") + name + "): " + spank_strerror(rc));
    return -1;
  }
  return 0;
}

}  // namespace

int SubmitInitPostOpt(spank_t sp) {
  // (dispatch.cc already returned for jobs without a pilot and for an
  // srun inside an allocation.)

  PluginState& st = State();
  PilotRequest& req = st.request;
  if (!st.pilot_option_seen) req.config = EnvOr(job::kUserConfig, "");
  if (req.config.empty()) return 0;
  if (!st.stage_given) req.stage = EnvOr(job::kUserStage, "all");
  if (!st.out_given) req.out = EnvOr(job::kUserOut, "");
  if (!IsValidStage(req.stage)) {
    return Refuse(
        Status::Invalid(job::kUserStage, "must be single, node or all, got \"" + req.stage + "\""));
  }

  std::error_code ec;
  std::filesystem::path abs = std::filesystem::absolute(req.config, ec);
  if (ec) return Refuse(Status::IoError(req.config, ec.message()));
  std::string path = abs.lexically_normal().string();
  // $SLURM_JOB_ID and friends are not known yet: check the names only, as
  // `pilot check --no-expand` does; the prolog expands them.
  LoadOptions lo;
  lo.expand_paths = false;
  Result<Config> cfg = LoadConfig(path, lo);
  if (!cfg.ok()) return Refuse(cfg.status());

  if (!req.out.empty()) {
    std::filesystem::path out = std::filesystem::absolute(req.out, ec);
    if (ec) return Refuse(Status::IoError(req.out, ec.message()));
    req.out = out.lexically_normal().string();
  }
  if (Record(sp, job::kEnvConfig, path) != 0 || Record(sp, job::kEnvConfigSha, cfg->sha256) != 0 ||
      Record(sp, job::kEnvStage, req.stage) != 0 ||
      (!req.out.empty() && Record(sp, job::kEnvOut, req.out) != 0)) {
    return -1;
  }
  return 0;
}

}  // namespace pilot::spank
