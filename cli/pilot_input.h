// What `pilot plan` and `pilot report` read: a pilot's results.json and
// config, the site policy and the hardware catalog.
//
// The source is a JOBID (STATE/jobs/JOBID/work/results.json and the copy of
// the config the prolog made, STATE/jobs/JOBID/config.toml; the stored
// verdict when there is one) or the path of a results.json (its config from
// --config, else the results' config_path).
//
// A job's folder belongs to its user, who may have put links there: files
// of a JOBID, and any file inside STATE/jobs/ when the effective uid is 0,
// are read with job::ReadFileBeneath (no link followed, regular files only).
// For root, a results.json inside STATE/jobs/JOBID/ also takes its config
// from that job's config.toml, not from the config_path its user wrote.
//
// Thread-safety: single-threaded (command-line program).
#pragma once

#include <optional>
#include <string>

#include "core/config/config.h"
#include "core/records/hardware.h"
#include "core/records/policy.h"
#include "core/records/results.h"
#include "core/base/status.h"
#include "core/records/verdict.h"

namespace pilot::cli {

struct PilotInput {
  std::string label;  // "job 4242" or the results path
  std::string results_path;
  std::string metrics_path;  // metrics.jsonl beside results.json
  bool from_job = false;     // the source was a JOBID
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

// The bytes of `path`, a file a pilot wrote (results.json, metrics.jsonl),
// at most `max_bytes`. Inside the policy's STATE/jobs/ or its work_root it
// is read without following links (job::ReadFileBeneath from that folder)
// when `from_job` or the effective uid is 0; anything else is read as
// ReadFileLimited reads it.
// Errors: those of job::ReadFileBeneath and ReadFileLimited.
Result<std::string> ReadPilotFile(const Policy& policy, const std::string& path, size_t max_bytes,
                                  bool from_job);

// ReadPilotFile and ParseResults: the strict reader on the bytes read.
Result<Results> ReadPilotResults(const Policy& policy, const std::string& path, bool from_job);

}  // namespace pilot::cli
