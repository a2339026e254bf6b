// What `pilot plan` and `pilot report` read: a pilot's results.json and
// config, the site policy and the hardware catalog.
//
// The source is a JOBID (STATE/jobs/JOBID/work/results.json and the copy of
// the config the prolog made, STATE/jobs/JOBID/config.toml; the stored
// verdict when there is one) or the path of a results.json (its config from
// --config, else the results' config_path).
//
// Thread-safety: single-threaded (command-line program).
#pragma once

#include <optional>
#include <string>

#include "core/config.h"
#include "core/hardware.h"
#include "core/policy.h"
#include "core/results.h"
#include "core/status.h"
#include "core/verdict.h"

namespace pilot::cli {

struct PilotInput {
  std::string label;  // "job 4242" or the results path
  std::string results_path;
  std::string metrics_path;  // metrics.jsonl beside results.json
  Results results;
  std::optional<Config> config;
  std::string config_error;        // why config is nullopt
  std::optional<Verdict> verdict;  // the stored verdict of a JOBID
  Policy policy;
  HardwareCatalog catalog;
};

// Errors: kInvalid (bad arguments, unreadable policy or catalog), kNotFound
// (no results), kCorrupt. A config that cannot be read is not an error: it
// is reported in config_error (`plan` needs it, `report` does without).
Result<PilotInput> LoadPilotInput(const std::string& source, const std::string& config_flag,
                                  const std::string& policy_flag);

}  // namespace pilot::cli
