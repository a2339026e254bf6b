// Submit side (srun, sbatch, salloc): validate the pilot config with the same
// loader as `pilot check` and record it in the job. A config error fails the
// command before Slurm creates a job.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <vector>
#include <string>

#include "core/config/config.h"
#include "core/config/load.h"
#include "core/config/site_check.h"
#include "core/records/policy.h"
#include "core/records/lock.h"
#include "job/pins.h"
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

// A program's pins (job/pins.h), hashed here as the user, so that the
// prolog can name what moved before the job started. Paths are expanded as
// the prolog will ($SLURM_SUBMIT_DIR is this folder); a config whose
// workdir names $SLURM_JOB_ID, unknown yet, is pinned by the prolog only.
// A pin that cannot be read refuses the submission: the pilot would fail.
int RecordPins(spank_t sp, const std::string& path, const Config& cfg) {
  std::error_code ec;
  const std::string cwd = std::filesystem::current_path(ec).string();
  const std::string home = EnvOr("HOME", "");
  const EnvLookup process = ProcessEnv();
  LoadOptions lo;
  lo.env = [&](const std::string& name) -> std::optional<std::string> {
    if (name == "SLURM_SUBMIT_DIR") return cwd;
    if (name == "SLURM_JOB_ID") return std::nullopt;
    return process(name);
  };
  Result<Config> expanded = LoadConfig(path, lo);
  if (!expanded.ok()) return 0;
  const std::string cache = job::HubCacheFolder(process, home);
  const job::PinRequest req = job::PinRequestFor(*expanded, cwd, cache);
  if (!job::HasPins(req)) return 0;
  job::PinLimits limits;
  limits.seconds = 30;
  const std::vector<LockPin> pins = job::ComputePins(req, limits);
  for (const LockPin& p : pins) {
    if (p.error.empty()) continue;
    const bool hub = p.kind == "hub_model" || p.kind == "hub_dataset";
    const std::string key =
        hub ? (p.kind == "hub_model" ? "program.hub_models" : "program.hub_datasets") : "program.pin";
    auto src = cfg.sources.find(key);
    const std::string where =
        path + (src != cfg.sources.end() && src->second.line > 0 ? ":" + std::to_string(src->second.line) : "");
    return Refuse(Status::Invalid(where + ": " + (src != cfg.sources.end() && src->second.is_default
                                                      ? std::string("program.command's script")
                                                      : key),
                                  p.error)
                      .WithHint(hub ? "download it into the hub cache before submitting (the "
                                      "job's nodes do not use the network)"
                                    : "pins are files and folders below program.workdir, read "
                                      "without following links"));
  }
  const std::string summary = job::SummaryToJson(PinSummary(pins));
  if (summary.size() > (64u << 10)) {
    return Refuse(Status::Invalid(path + ": program.pin", "the pins' record is larger than 64 KiB")
                      .WithHint("pin fewer entries (a folder counts as one)"));
  }
  if (Record(sp, job::kEnvPins, summary) != 0) return -1;
  if (!cache.empty() && Record(sp, job::kEnvHubCache, cache) != 0) return -1;
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
  // What the site allows a container to be, where this host can read the
  // site's policy (the supervisor checks again on the node).
  if (Result<Policy> site = LoadPolicy(st.args.policy, /*missing_ok=*/false); site.ok()) {
    if (Status s = CheckConfigAgainstSite(*cfg, site->container); !s.ok()) return Refuse(s);
  }

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
  return cfg->IsProgram() ? RecordPins(sp, path, *cfg) : 0;
}

}  // namespace pilot::spank
