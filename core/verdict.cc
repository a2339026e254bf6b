#include "core/verdict.h"

#include "core/atomic_file.h"
#include "core/crypto.h"
#include "core/record.h"
#include "core/rfc3339.h"

namespace pilot {

const std::vector<std::string>& EnumNames(std::type_identity<Decision>) {
  static const std::vector<std::string> k = {"GO", "NO-GO"};
  return k;
}
const std::vector<std::string>& EnumNames(std::type_identity<CheckStatus>) {
  static const std::vector<std::string> k = {"pass", "warn", "fail", "skip"};
  return k;
}
const std::vector<std::string>& EnumNames(std::type_identity<VerifiedBy>) {
  static const std::vector<std::string> k = {"epilog", "self_reported", "prolog", "workload",
                                                "supervisor"};
  return k;
}

const char* DecisionName(Decision d) { return EnumNames(std::type_identity<Decision>{})[static_cast<size_t>(d)].c_str(); }
const char* CheckStatusName(CheckStatus s) {
  return EnumNames(std::type_identity<CheckStatus>{})[static_cast<size_t>(s)].c_str();
}
const char* VerifiedByName(VerifiedBy v) {
  return EnumNames(std::type_identity<VerifiedBy>{})[static_cast<size_t>(v)].c_str();
}

// ---- field lists (core/record.h) --------------------------------------------
// The signature covers CanonicalJson of what these lists write (less
// "signature"): a field added here enters the signed bytes, and a verdict
// signed before it existed would no longer verify once read back with a
// default for it. A new field therefore comes with a new schema version.

template <class V, class S>
void Fields(V& v, S& s, std::type_identity<VerdictJob>) {
  v("id", s.id);
  v("user", s.user);
  v("run", s.run);
  v("config_sha256", s.config_sha256);
}

template <class V, class S>
void Fields(V& v, S& s, std::type_identity<Check>) {
  v("name", s.name);
  v("status", s.status);
  v("measured", s.measured);
  v("threshold", s.threshold);
  v("detail", s.detail);
  v("verified_by", s.verified_by);
}

template <class V, class S>
void Fields(V& v, S& s, std::type_identity<HardwareFit>) {
  v("gpu_type", s.gpu_type);
  v("fits", s.fits);
  v("predicted_peak_bytes", s.predicted_peak_bytes);
  v("memory_bytes", s.memory_bytes);
  v("headroom", s.headroom);
  v("note", s.note);
}

template <class V, class S>
void Fields(V& v, S& s, std::type_identity<Budget>) {
  v("term", s.term, OneOf{{"7-day", "30-day", "none"}});
  v("days", s.days);
  v("gpu_hours", s.gpu_hours);
  v("cost", s.cost);
  v("currency", s.currency);
  v("breakdown", s.breakdown);
}

template <class V, class S>
void Fields(V& v, S& s, std::type_identity<Verdict>) {
  v("schema", s.schema);
  v("job", s.job);
  v("instance", s.instance, kMayBeAbsent);
  v("decision", s.decision);
  v("binding", s.binding);
  v("checks", s.checks);
  v("hardware", s.hardware);
  v("budget", s.budget);
  v("issued", s.issued, Validate{&CheckRfc3339});
  v("expires", s.expires, Validate{&CheckRfc3339});
  v("key_id", s.key_id);
  v("signature", s.signature);
}

Json VerdictToJsonValue(const Verdict& v, bool with_signature) {
  Json j = RecordToJson(v);
  if (!with_signature) j.erase("signature");
  return j;
}

std::string VerdictToJson(const Verdict& v) { return DumpJson(VerdictToJsonValue(v), 2) + "\n"; }

Result<Verdict> ParseVerdict(std::string_view text, const std::string& label) {
  PILOT_ASSIGN_OR_RETURN(Json j, ParseJsonText(text, label, kMaxVerdictBytes));
  PILOT_RETURN_IF_ERROR(CheckJsonSchema(j, label, kVerdictSchema));
  Verdict v;
  PILOT_RETURN_IF_ERROR(RecordFromJson(j, &v).Context(label));
  return v;
}

Result<Verdict> ReadVerdict(const std::string& path) {
  auto text = ReadFileLimited(path, kMaxVerdictBytes);
  if (!text.ok()) return text.status();
  return ParseVerdict(*text, path);
}

std::string CanonicalJson(const Json& j) { return DumpJson(j, -1); }

std::string CanonicalVerdict(const Verdict& v) {
  return CanonicalJson(VerdictToJsonValue(v, /*with_signature=*/false));
}

void SignVerdict(Verdict* v, std::string_view key) {
  v->key_id = KeyId(key);
  v->signature = HmacSha256Hex(key, CanonicalVerdict(*v));
}

Status VerifyVerdict(const Verdict& v, std::string_view key) {
  const std::string what = "verdict for job " + std::to_string(v.job.id);
  if (v.signature.empty()) return Status::Permission(what, "not signed");
  if (v.key_id != KeyId(key)) {
    return Status::Permission(
        what, "signed with another key (key_id " + v.key_id + ", this key is " + KeyId(key) + ")");
  }
  if (!HmacVerify(key, CanonicalVerdict(v), v.signature)) {
    return Status::Permission(what, "signature mismatch: the verdict was changed after signing");
  }
  return Status::Ok();
}

}  // namespace pilot
