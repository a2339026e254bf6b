// The admin gate: may a verdict be turned into a Slurm reservation, and the
// scontrol command and grant record that do it. Pure; cli/grant.cc reads the
// store and the key, runs scontrol and writes the record.
//
// A grant is refused (every reason listed, not just the first) when:
//   - the verdict's signature does not verify under the site key (an
//     unsigned or edited verdict);
//   - the decision is NO-GO;
//   - the verdict has expired (expires <= now) or its expiry is unreadable;
//   - the verdict is not binding (the pilot ran a smaller shape);
//   - the requested user differs from the verdict's user;
//   - the budget's term is "none", or the requested duration exceeds the
//     recommended term (7-day: 7 days; 30-day: 30 days);
//   - nodes < 1.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/status.h"
#include "core/records/verdict.h"

namespace pilot {

inline constexpr char kGrantSchema[] = "slurm-pilot/grant/1";

struct GrantRequest {
  int64_t job_id = 0;
  int nodes = 0;
  std::string partition;                    // "" = none given
  std::optional<int64_t> duration_minutes;  // nullopt = the recommended term
  std::string start = "now";                // scontrol StartTime
  std::string user;                         // "" = the verdict's user
};

// Minutes from a Slurm-style duration: "MINUTES", "MM:SS" is not accepted
// (ambiguous); "D-HH", "D-HH:MM", "D-HH:MM:SS", "HH:MM:SS", or "Nd"/"Nh".
// Errors: kInvalid.
Result<int64_t> ParseDurationMinutes(std::string_view text);

// Days of a term: "7-day" -> 7, "30-day" -> 30, else 0.
int TermDays(const std::string& term);

// The reasons to refuse (empty = may grant). `signature` is the result of
// VerifyVerdictEd25519 or VerifyVerdictHmac (checked by the caller, who holds
// the keys).
std::vector<std::string> GrantRefusals(const Verdict& v, const Status& signature,
                                       const GrantRequest& r, int64_t now);

// "pilot_<jobid>"
std::string ReservationName(int64_t job_id);

// argv for `scontrol create reservation ...` (argv[0] = scontrol_path).
// REQUIRES: GrantRefusals(...) was empty.
std::vector<std::string> ScontrolArgv(const std::string& scontrol_path, const Verdict& v,
                                      const GrantRequest& r);

// The record <state_dir>/grants/<jobid>.json (pretty JSON, newline). It
// carries the verdict's run identity (what a long job under the grant must
// be: job/binding.h); null for a verdict that has none.
std::string GrantRecordJson(const Verdict& v, const GrantRequest& r, const std::string& granted_by,
                            int64_t now);

// The Ed25519 signature of a grant record, so that its user (anyone with
// the site's public key) can check what was granted: the bytes signed are
// CanonicalJson (core/records/verdict.h) of the record without the members
// "public_key_id" and "signature_ed25519", which SignGrantRecord adds
// (pretty JSON, newline). Errors: kCorrupt (not a JSON object), the
// signer's. VerifyGrantRecord: kPermission when unsigned, signed by another
// key or not matching; kCorrupt for a text that is no record.
Result<std::string> SignGrantRecord(std::string_view record_json, std::string_view private_key);
Status VerifyGrantRecord(std::string_view record_json, std::string_view public_key);

// What a long job is checked against, read back from a grant record.
struct GrantRecord {
  int64_t job_id = 0;
  std::string user;
  int nodes = 0;
  int64_t duration_minutes = 0;
  std::optional<LockIdentity> identity;
};
// Errors: kCorrupt (not JSON, another schema, a field of the wrong type).
Result<GrantRecord> ParseGrantRecord(std::string_view text, const std::string& label);

}  // namespace pilot
