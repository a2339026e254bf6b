// What Slurm tells a prolog or epilog about the job, read from the
// environment slurmd gives them (prolog_slurmd / epilog_slurmd).
//
// The plugin records the submitted config in the job control environment,
// which slurmd passes to the prolog and epilog with a SPANK_ prefix
// (SPANK_SLURM_PILOT_CONFIG, ..._CONFIG_SHA256, ..._STAGE, ..._OUT), and
// Slurm forwards the option itself (SPANK__SLURM_SPANK_OPTION_pilot_pilot);
// job/env_names.h holds the names.
//
// Thread-safety: pure functions over a lookup.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "core/config/config.h"
#include "core/config/load.h"
#include "core/records/lock.h"
#include "core/base/status.h"

namespace pilot::job {

using Lookup = std::function<std::optional<std::string>(const std::string&)>;
Lookup ProcessLookup();  // getenv()

struct JobEnv {
  int64_t job_id = 0;
  std::string user;
  uid_t uid = 0;
  gid_t gid = 0;
  int nodes = 1;
  std::string node_list;
  std::string host;         // SLURMD_NODENAME
  std::string work_dir;     // SLURM_JOB_WORK_DIR (the submit folder)
  bool is_pilot = false;
  std::string config_path;  // absolute path given at submit
  std::string config_sha256;
  std::string stage = "all";
  std::string out;          // --pilot-out, "" = the job's work folder
  std::string exit_code;    // epilog: SLURM_JOB_EXIT_CODE2 ("0:0", "0:9")
  std::string container_image;  // pyxis --container-image, when used
  // A program's pins as the plugin recorded them at submit (JSON; "" =
  // none recorded) and the hub cache folder it resolved ("" = none).
  std::string pins_submitted;
  std::string hub_cache;
  std::string gpus;  // SLURM_JOB_GPUS: the job's GPUs on this node ("0,3"), slurmd's
  // --pilot-run: the pilot job whose grant this (long) job runs under; 0 =
  // none named, -1 = named but not a job id.
  int64_t pilot_run = 0;
};

// Reads the job from `env`. Errors (kInvalid): SLURM_JOB_ID or
// SLURM_JOB_UID/GID missing or not numbers. A pilot job without
// SPANK_SLURM_PILOT_CONFIG is still a pilot job (is_pilot) with an empty
// config path; the prolog records that as a problem.
Result<JobEnv> ReadJobEnv(const Lookup& env);

// The first node of the job's allocation when this node (SLURMD_NODENAME)
// is another of its nodes; nullopt on the first node, in a job of one
// node, and when the node list does not expand or the node's name is
// unknown. The first node is where the batch script runs (and the first
// task of `salloc`'s first srun step): the pilot, its lock and its verdict
// belong to that node's prolog and epilog.
std::optional<std::string> FirstNodeIfOther(const JobEnv& job);
// The first host of the job's node list; nullopt when the list is empty or
// does not expand, or this node's name (SLURMD_NODENAME) is unknown.
std::optional<std::string> FirstNode(const JobEnv& job);

// How the prolog and the epilog load the job's config: $USER, $HOME,
// $SLURM_JOB_ID and $SLURM_SUBMIT_DIR are the job's (not root's), relative
// paths are relative to the submitted config's folder.
LoadOptions JobConfigOptions(const JobEnv& job, const std::string& user,
                             const std::string& home);

// `text`, the config copy a lock pinned, parsed as the prolog loaded it for
// that job (its id `job_id`, the lock's user, uid, gid and submit folder,
// the submitted config's path; the user's `home`), by the supervisor that
// runs it.
Result<Config> ParseLockedConfig(const std::string& text, const Lock& lock, int64_t job_id,
                                 const std::string& home);

}  // namespace pilot::job
