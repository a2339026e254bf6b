// A change to a job that the site's job_submit.lua refused after the job
// was admitted (slurm_job_modify: a run bound to a pilot's grant that
// would leave its reservation or partition, become an array, or take more
// nodes or time than granted). Slurm 22.05 discards a message of
// job_modify, so the user sees only the text of the error code (such as
// "Access/permission denied"); the script records why in
// STATE/refusals/JOBID.json (job/state_layout.h), written by slurmctld's
// user, and `pilot explain JOBID` shows it (pilot(1)).
//
// The writer is etc/job_submit.lua; this is the strict reader, the field
// list below the one place that names the keys (pilot-files(5) documents
// them).
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/base/status.h"

namespace pilot::job {

inline constexpr char kRefusalSchema[] = "slurm-pilot/refusal/1";

struct ChangeRefusal {
  std::string schema;
  int64_t job_id = 0;
  std::optional<int64_t> pilot_job;  // the pilot whose grant the job is held to; none for a
                                     // job that is not bound (a longer time limit refused)
  std::string user;                  // the job's user
  int64_t uid = 0;                   // who asked for the change
  std::string refused_at;            // RFC 3339 UTC, slurmctld's clock
  std::string change;                // what was asked, in scontrol's words ("MinNodes=2")
  std::string reason;                // one sentence
};

// Reads a record. Errors: kCorrupt (not JSON, an unknown or missing key, a
// wrong type, another schema), with `label` in front.
Result<ChangeRefusal> ParseChangeRefusal(std::string_view text, const std::string& label);

}  // namespace pilot::job
