#include "core/records/verdict.h"

#include "core/base/atomic_file.h"
#include "core/base/crypto.h"
#include "core/records/record.h"
#include "core/base/rfc3339.h"

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
                                                "supervisor", "workload_compared"};
  return k;
}

const char* DecisionName(Decision d) { return EnumNames(std::type_identity<Decision>{})[static_cast<size_t>(d)].c_str(); }
const char* CheckStatusName(CheckStatus s) {
  return EnumNames(std::type_identity<CheckStatus>{})[static_cast<size_t>(s)].c_str();
}
const char* VerifiedByName(VerifiedBy v) {
  return EnumNames(std::type_identity<VerifiedBy>{})[static_cast<size_t>(v)].c_str();
}

// ---- field lists (core/records/record.h) --------------------------------------------
// The signatures cover CanonicalJson of what these lists write (less
// "signature" and "signature_ed25519"): a field added here enters the signed
// bytes, and a verdict signed before it existed would no longer verify once
// read back with a default for it. A new field therefore comes with a new
// schema version, and kOnlyInV2 lists the fields a /1 verdict lacks.

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
  v("identity", s.identity, kOmitIfUnset);
  v("decision", s.decision);
  v("binding", s.binding);
  v("checks", s.checks);
  v("hardware", s.hardware);
  v("budget", s.budget);
  v("issued", s.issued, Validate{&CheckRfc3339});
  v("expires", s.expires, Validate{&CheckRfc3339});
  v("key_id", s.key_id);
  v("signature", s.signature);
  v("public_key_id", s.public_key_id, kMayBeAbsent);
  v("signature_ed25519", s.signature_ed25519, kMayBeAbsent);
}

namespace {

// The members schema /2 added; a /1 verdict has none of them.
constexpr const char* kOnlyInV2[] = {"instance", "identity", "public_key_id", "signature_ed25519"};

}  // namespace

Json VerdictToJsonValue(const Verdict& v, bool with_signature) {
  Json j = RecordToJson(v);
  if (v.schema == kVerdictSchemaV1) {
    for (const char* key : kOnlyInV2) j.erase(key);
  }
  if (!with_signature) {
    j.erase("signature");
    j.erase("signature_ed25519");
  }
  return j;
}

std::string VerdictToJson(const Verdict& v) { return DumpJson(VerdictToJsonValue(v), 2) + "\n"; }

Result<Verdict> ParseVerdict(std::string_view text, const std::string& label) {
  PILOT_ASSIGN_OR_RETURN(Json j, ParseJsonText(text, label, kMaxVerdictBytes));
  const bool v1 = j.is_object() && j.contains("schema") && j["schema"] == kVerdictSchemaV1;
  if (v1) {
    for (const char* key : kOnlyInV2) {
      if (j.contains(key)) return Status::Corrupt(label + ": " + key, "unknown field");
    }
  } else {
    PILOT_RETURN_IF_ERROR(CheckJsonSchema(j, label, kVerdictSchema));
  }
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

Status SignVerdict(Verdict* v, std::string_view hmac_key, std::string_view ed25519_private) {
  v->signature.clear();
  v->signature_ed25519.clear();
  v->key_id = hmac_key.empty() ? "" : KeyId(hmac_key);
  v->public_key_id.clear();
  if (!ed25519_private.empty()) {
    if (v->schema == kVerdictSchemaV1) {
      v->key_id.clear();
      return Status::Invalid("verdict for job " + std::to_string(v->job.id),
                             std::string("schema ") + kVerdictSchemaV1 +
                                 " has no Ed25519 signature");
    }
    Result<std::string> public_key = Ed25519PublicKeyOf(ed25519_private);
    if (!public_key.ok()) {
      v->key_id.clear();
      return public_key.status();
    }
    v->public_key_id = KeyId(*public_key);
  }
  const std::string canonical = CanonicalVerdict(*v);
  if (!ed25519_private.empty()) {
    Result<std::string> sig = Ed25519SignHex(ed25519_private, canonical);
    if (!sig.ok()) {
      v->key_id.clear();
      v->public_key_id.clear();
      return sig.status();
    }
    v->signature_ed25519 = *sig;
  }
  if (!hmac_key.empty()) v->signature = HmacSha256Hex(hmac_key, canonical);
  return Status::Ok();
}

Status VerifyVerdictEd25519(const Verdict& v, std::string_view public_key) {
  const std::string what = "verdict for job " + std::to_string(v.job.id);
  if (v.signature_ed25519.empty()) return Status::Permission(what, "no ed25519 signature");
  const std::string id = KeyId(public_key);
  if (v.public_key_id != id) {
    return Status::Permission(what, "ed25519 signature by another key (public_key_id " +
                                        v.public_key_id + ", this key is " + id + ")");
  }
  if (!Ed25519Verify(public_key, CanonicalVerdict(v), v.signature_ed25519)) {
    return Status::Permission(what,
                              "ed25519 signature mismatch: the verdict was changed after signing");
  }
  return Status::Ok();
}

Status VerifyVerdictHmac(const Verdict& v, std::string_view key) {
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
