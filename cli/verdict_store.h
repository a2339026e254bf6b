// The verdict store as the `pilot` commands see it: the policy (for
// state_dir and the keys), the stored verdicts and their history, the
// signatures as the caller can check them, and the caller.
//
// Thread-safety: single-threaded (command-line program).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "core/records/policy.h"
#include "core/base/status.h"
#include "core/records/verdict.h"

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

// The verdicts of job_id that later ones replaced (STATE/verdicts/history/),
// oldest issued first, then by file name. Files that do not parse are
// reported in `skipped`. Errors: kIoError when the folder cannot be listed
// (a missing folder: no history).
Result<std::vector<StoredVerdict>> ListVerdictHistory(const std::string& state_dir, int64_t job_id,
                                                      std::vector<std::string>* skipped);

// What the caller can tell of a verdict's two signatures. Each state is
// "valid", "invalid", "unsigned" or "unchecked" (the key could not be read:
// the HMAC key is root's; the public key may be missing), with the reason
// in *_detail for the last two.
struct SignatureCheck {
  std::string ed25519 = "unsigned";
  std::string ed25519_detail;
  std::string hmac = "unsigned";
  std::string hmac_detail;
  bool root = false;  // checked by root, who can read every key

  // A signature failed, nothing signed the verdict, or root verified none.
  bool Bad() const;
  // "signature valid", "signature INVALID: ...", "UNSIGNED", or what was
  // signed and why it could not be checked: the summary of a table header.
  std::string Summary(const Verdict& v) const;
  // The table's lines: "valid (ed25519, key K)", "INVALID (ed25519, key K):
  // why", "unsigned", "not checked (ed25519, key K): why"; and the same for
  // the HMAC without the algorithm's name.
  std::string Ed25519Line(const Verdict& v) const;
  std::string HmacLine(const Verdict& v) const;
  // {"ed25519", "ed25519_detail", "hmac", "hmac_detail"}.
  Json ToJson() const;
};
// Checks the Ed25519 signature against policy.public_key_file (any user)
// and the HMAC against policy.key_file (root).
SignatureCheck CheckSignatures(const Verdict& v, const Policy& policy);

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
