// verdict.json: the signed GO / NO-GO the epilog issues for a pilot job.
//
// Written by pilot-epilog (root) to <state_dir>/verdicts/<jobid>.json, posted
// to the site's receiver, read by `pilot verdict` and `pilot verify-verdict`
// and checked by `pilot grant`. Documented field by field in docs/formats.md
// and pilot-files(5).
//
// Signing: both signatures cover the same bytes, CanonicalVerdict(v): the
// verdict as JSON without its "signature" and "signature_ed25519" members,
// keys sorted by byte value, no whitespace (see CanonicalJson).
//   signature         = hex HMAC-SHA256(site key, CanonicalVerdict(v)); only
//                       holders of the root-only key can check it;
//   signature_ed25519 = hex Ed25519(private key, CanonicalVerdict(v)); anyone
//                       with the public key can check it.
// key_id and public_key_id (KeyId() in crypto.h) name the keys so a rotated
// key is recognised; both are inside the signed bytes.
//
// Versions: this build writes schema /2 and reads /1 as well. A /1 verdict
// has no instance, public_key_id or signature_ed25519: they are refused in a
// /1 file and left out of its canonical form, so its HMAC still verifies.
//
// Thread-safety: plain values and pure functions.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/json_util.h"
#include "core/base/status.h"
#include "core/records/lock.h"

namespace pilot {

inline constexpr char kVerdictSchema[] = "slurm-pilot/verdict/2";
// The previous version, still read (verdicts kept in stores).
inline constexpr char kVerdictSchemaV1[] = "slurm-pilot/verdict/1";
inline constexpr size_t kMaxVerdictBytes = 4u << 20;  // 4 MiB

enum class Decision { kGo, kNoGo };
enum class CheckStatus { kPass, kWarn, kFail, kSkip };
// Who established a check: the epilog (recomputed it from files after the
// job), the supervisor (root, in the job: saw it through its own pipes,
// clock and process table), the prolog (pinned it before the job), or only
// the workload (the job's own processes said so: the user could have
// changed it). kSelfReported is the name verdicts of schema 1 used for
// kWorkload; it is read, never written. kWorkloadCompared: figures of the
// workload's own (a program's losses) that the supervisor compared: the
// comparison is root's, the numbers are the program's word.
enum class VerifiedBy { kEpilog, kSelfReported, kProlog, kWorkload, kSupervisor, kWorkloadCompared };

// "GO" / "NO-GO"; "pass" | "warn" | "fail" | "skip"; "epilog" |
// "self_reported" | "prolog" | "workload" | "supervisor" | "workload_compared".
const char* DecisionName(Decision d);
const char* CheckStatusName(CheckStatus s);
const char* VerifiedByName(VerifiedBy v);

struct VerdictJob {
  int64_t id = 0;
  std::string user;
  std::string run;            // [run].name of the config
  std::string config_sha256;  // of the config the pilot ran
};

struct Check {
  std::string name;  // stable identifier, e.g. "restore", "memory_headroom"
  CheckStatus status = CheckStatus::kSkip;
  std::string measured;   // what was found, for people ("61.2 GiB")
  std::string threshold;  // what was required ("<= 72.0 GiB")
  std::string detail;     // one sentence
  VerifiedBy verified_by = VerifiedBy::kWorkload;
  bool operator==(const Check&) const = default;
};

struct HardwareFit {
  std::string gpu_type;  // catalog name, e.g. "H100-80"
  bool fits = false;
  int64_t predicted_peak_bytes = 0;  // device bytes the run needs per GPU
  int64_t memory_bytes = 0;          // the GPU's memory
  double headroom = 0;               // 1 - predicted / memory (may be < 0)
  std::string note;                  // e.g. "needs ROCm qualification"
  bool operator==(const HardwareFit&) const = default;
};

struct Budget {
  std::string term = "none";  // "7-day" | "30-day" | "none" (does not fit 30 days)
  double days = 0;            // wall-clock days including buffer
  double gpu_hours = 0;
  double cost = 0;                          // gpu_hours * price of the wanted GPU type
  std::string currency;                     // from the catalog ("" when no price)
  std::map<std::string, double> breakdown;  // component -> days
  bool operator==(const Budget&) const = default;
};

struct Verdict {
  std::string schema = kVerdictSchema;
  VerdictJob job;
  std::string instance;   // the pilot instance id the prolog wrote into lock.json ("" = none)
  // The run identity the prolog pinned (lock.json's): what a long run must
  // be to be this pilot's. Unset in verdicts written before it existed.
  std::optional<LockIdentity> identity;
  Decision decision = Decision::kNoGo;
  bool binding = false;  // false when the pilot ran a smaller shape
  std::vector<Check> checks;
  std::vector<HardwareFit> hardware;
  Budget budget;
  std::string issued;     // RFC 3339 UTC
  std::string expires;    // RFC 3339 UTC
  std::string key_id;     // KeyId(key) of the HMAC key; "" when not HMAC-signed
  std::string signature;  // hex HMAC-SHA256 of CanonicalVerdict; "" when not HMAC-signed
  std::string public_key_id;      // KeyId(public key) of the Ed25519 pair; "" when unsigned
  std::string signature_ed25519;  // hex Ed25519 of CanonicalVerdict; "" when unsigned
};

// The verdict as a JSON value; with_signature=false omits "signature" and
// "signature_ed25519". A /1 verdict is written without the members /1 lacks.
Json VerdictToJsonValue(const Verdict& v, bool with_signature = true);
// Pretty JSON (2-space indent, sorted keys) ending in a newline.
std::string VerdictToJson(const Verdict& v);
// Strict parse of at most kMaxVerdictBytes of schema /2 or /1; `label` names
// the input. Errors: kCorrupt naming the field path.
Result<Verdict> ParseVerdict(std::string_view text, const std::string& label = "verdict.json");
Result<Verdict> ReadVerdict(const std::string& path);

// The canonical form: compact JSON with object keys sorted by their UTF-8
// bytes, no insignificant whitespace, strings escaped only where JSON
// requires (", \, control characters), integers in decimal, other numbers in
// the shortest form that reads back to the same double.
std::string CanonicalJson(const Json& j);
// The bytes both signatures cover: CanonicalJson(VerdictToJsonValue(v, false)).
std::string CanonicalVerdict(const Verdict& v);

// Signs with each key that is not empty: `hmac_key` sets key_id and
// signature, `ed25519_private` (a raw 32-byte seed, crypto.h) sets
// public_key_id and signature_ed25519; the members of an empty key are
// cleared. The ids are set first, so both signatures cover them.
// Errors: kInvalid (an Ed25519 key not of 32 bytes, or one given for a /1
// verdict, which has no place for it), kInternal (OpenSSL failed); *v is
// then unsigned.
Status SignVerdict(Verdict* v, std::string_view hmac_key, std::string_view ed25519_private = {});
// OK when v.signature is the HMAC of CanonicalVerdict(v) under `key`.
// Errors: kPermission ("not signed", "signed with another key (key_id ...)",
// "signature mismatch: the verdict was changed after signing").
Status VerifyVerdictHmac(const Verdict& v, std::string_view key);
// OK when v.signature_ed25519 is a valid Ed25519 signature of
// CanonicalVerdict(v) under `public_key` (raw 32 bytes). Errors:
// kPermission ("no ed25519 signature", "ed25519 signature by another key
// (public_key_id ..., this key is ...)", "ed25519 signature mismatch: the
// verdict was changed after signing").
Status VerifyVerdictEd25519(const Verdict& v, std::string_view public_key);

}  // namespace pilot
