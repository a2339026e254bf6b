// verdict.json: the signed GO / NO-GO the epilog issues for a pilot job.
//
// Written by pilot-epilog (root) to <state_dir>/verdicts/<jobid>.json, posted
// to the site's receiver, read by `pilot verdict` and checked by `pilot
// grant`. Documented field by field in docs/formats.md and pilot-files(5).
//
// Signing: signature = hex HMAC-SHA256(key, CanonicalVerdict(v)), where
// CanonicalVerdict is the verdict as JSON without the "signature" member,
// keys sorted by byte value, no whitespace (see CanonicalJson). key_id
// names the key (KeyId() in crypto.h) so a rotated key is recognised.
//
// Thread-safety: plain values and pure functions.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/json_util.h"
#include "core/status.h"

namespace pilot {

inline constexpr char kVerdictSchema[] = "slurm-pilot/verdict/1";
inline constexpr size_t kMaxVerdictBytes = 4u << 20;  // 4 MiB

enum class Decision { kGo, kNoGo };
enum class CheckStatus { kPass, kWarn, kFail, kSkip };
// Who established a check: the epilog (recomputed it from files after the
// job), the supervisor (root, in the job: saw it through its own pipes,
// clock and process table), the prolog (pinned it before the job), or only
// the workload (the job's own processes said so: the user could have
// changed it). kSelfReported is the name verdicts of schema 1 used for
// kWorkload; it is read, never written.
enum class VerifiedBy { kEpilog, kSelfReported, kProlog, kWorkload, kSupervisor };

// "GO" / "NO-GO"; "pass" | "warn" | "fail" | "skip"; "epilog" |
// "self_reported" | "prolog" | "workload" | "supervisor".
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
  std::string instance;  // lock.json's instance: which start of the job this judges
  Decision decision = Decision::kNoGo;
  bool binding = false;  // false when the pilot ran a smaller shape
  std::vector<Check> checks;
  std::vector<HardwareFit> hardware;
  Budget budget;
  std::string issued;     // RFC 3339 UTC
  std::string expires;    // RFC 3339 UTC
  std::string key_id;     // KeyId(key) of the signing key; "" when unsigned
  std::string signature;  // hex HMAC-SHA256 of CanonicalVerdict; "" when unsigned
};

// The verdict as a JSON value; with_signature=false omits "signature".
Json VerdictToJsonValue(const Verdict& v, bool with_signature = true);
// Pretty JSON (2-space indent, sorted keys) ending in a newline.
std::string VerdictToJson(const Verdict& v);
// Strict parse of at most kMaxVerdictBytes; `label` names the input.
// Errors: kCorrupt naming the field path.
Result<Verdict> ParseVerdict(std::string_view text, const std::string& label = "verdict.json");
Result<Verdict> ReadVerdict(const std::string& path);

// The canonical form: compact JSON with object keys sorted by their UTF-8
// bytes, no insignificant whitespace, strings escaped only where JSON
// requires (", \, control characters), integers in decimal, other numbers in
// the shortest form that reads back to the same double.
std::string CanonicalJson(const Json& j);
// The bytes that are signed: CanonicalJson(VerdictToJsonValue(v, false)).
std::string CanonicalVerdict(const Verdict& v);

// Sets key_id and signature. REQUIRES: key not empty.
void SignVerdict(Verdict* v, std::string_view key);
// OK when v.signature is the HMAC of CanonicalVerdict(v) under `key`.
// Errors: kPermission ("not signed", "signed with another key (key_id ...)",
// "signature mismatch: the verdict was changed after signing").
Status VerifyVerdict(const Verdict& v, std::string_view key);

}  // namespace pilot
