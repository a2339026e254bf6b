// The config and the lock a run starts from.
#include "runner/train/inputs.h"
#include "core/config/load.h"

#include <cstdlib>
#include <utility>

#include "core/records/lock.h"
#include "runner/train/data.h"

namespace pilot::runner {

Status LoadInputs(const std::string& config_path, const std::string& lock_path,
                  const std::vector<std::string>& sets, Config* cfg, Pins* pins) {
  LoadOptions lo;
  lo.overrides = sets;
  Result<Config> c = LoadConfig(config_path, lo);
  if (!c.ok()) return c.status();
  *cfg = std::move(c).value();
  if (!lock_path.empty()) {
    PILOT_ASSIGN_OR_RETURN(Lock lock, ReadLock(lock_path));
    const std::string& pinned = !lock.config.sha256_copied.empty() ? lock.config.sha256_copied
                                                                   : lock.config.sha256_submitted;
    if (!pinned.empty() && pinned != cfg->sha256) {
      return Status::Corrupt(config_path, "sha256 " + cfg->sha256 + " differs from the one pinned in " +
                                              lock_path + " (" + pinned + ")")
          .WithHint("the config changed after the job was submitted; resubmit");
    }
    pins->seed = static_cast<uint64_t>(lock.seeds.training);
    for (const LockFile& f : lock.files) {
      const std::string& h = !f.sha256_actual.empty() ? f.sha256_actual : f.sha256_expected;
      if (f.role == "train") pins->train_sha256 = h;
      if (f.role == "eval") pins->eval_sha256 = h;
    }
    return Status::Ok();
  }
  if (cfg->training.seed >= 0) {
    pins->seed = static_cast<uint64_t>(cfg->training.seed);
  } else if (const char* job = std::getenv("SLURM_JOB_ID")) {
    pins->seed = MixSeed({std::strtoull(job, nullptr, 10)}) >> 1;
  } else {
    pins->seed = 0;
  }
  return Status::Ok();
}
}  // namespace pilot::runner
