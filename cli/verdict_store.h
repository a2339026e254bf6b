// The verdict store as the `pilot` commands see it: the policy (for
// state_dir and key_file), the stored verdicts, and the caller.
//
// Thread-safety: single-threaded (command-line program).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "core/policy.h"
#include "core/status.h"
#include "core/verdict.h"

namespace pilot::cli {

// The policy named by --policy, else $PILOT_POLICY, else the build's default
// (missing default file = built-in defaults).
Result<Policy> LoadCliPolicy(const std::string& flag_value);

struct StoredVerdict {
  int64_t job_id = 0;
  std::string path;
  Verdict verdict;
};

// Every parseable STATE/verdicts/JOBID.json, by job id. Files that do not
// parse are reported in `skipped` ("path: problem"). Errors: kIoError when
// the folder cannot be listed (a missing folder is an empty store).
Result<std::vector<StoredVerdict>> ListStoredVerdicts(const std::string& state_dir,
                                                      std::vector<std::string>* skipped);

// What `pilot verdict` and `pilot list` open first: the policy and every
// stored verdict.
struct Store {
  Policy policy;
  std::vector<StoredVerdict> verdicts;
  std::vector<std::string> skipped;
};
// Fills *out, or says why on inv.err and returns the exit status: usage
// (the policy) or kExitNo (the store cannot be listed).
std::optional<int> OpenStore(const Invocation& inv, const std::string& policy_flag, Store* out);

// The calling user's name (from the real uid).
std::string CallerName();

}  // namespace pilot::cli
