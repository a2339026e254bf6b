#include "core/verdict.h"

#include "core/atomic_file.h"
#include "core/crypto.h"
#include "core/rfc3339.h"

namespace pilot {
namespace {

const std::vector<std::string>& DecisionNames() {
  static const std::vector<std::string> k = {"GO", "NO-GO"};
  return k;
}
const std::vector<std::string>& StatusNames() {
  static const std::vector<std::string> k = {"pass", "warn", "fail", "skip"};
  return k;
}
const std::vector<std::string>& VerifiedNames() {
  static const std::vector<std::string> k = {"epilog", "self_reported", "prolog"};
  return k;
}

template <typename E>
E FromName(const std::vector<std::string>& names, const std::string& s) {
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == s) return static_cast<E>(i);
  }
  return static_cast<E>(0);  // unreachable after Enum() validation
}

}  // namespace

const char* DecisionName(Decision d) { return DecisionNames()[static_cast<int>(d)].c_str(); }
const char* CheckStatusName(CheckStatus s) { return StatusNames()[static_cast<int>(s)].c_str(); }
const char* VerifiedByName(VerifiedBy v) { return VerifiedNames()[static_cast<int>(v)].c_str(); }

Json VerdictToJsonValue(const Verdict& v, bool with_signature) {
  Json j;
  j["schema"] = v.schema;
  j["job"] = {{"id", v.job.id},
              {"user", v.job.user},
              {"run", v.job.run},
              {"config_sha256", v.job.config_sha256}};
  j["decision"] = DecisionName(v.decision);
  j["binding"] = v.binding;
  j["checks"] = Json::array();
  for (const auto& c : v.checks) {
    j["checks"].push_back({{"name", c.name},
                           {"status", CheckStatusName(c.status)},
                           {"measured", c.measured},
                           {"threshold", c.threshold},
                           {"detail", c.detail},
                           {"verified_by", VerifiedByName(c.verified_by)}});
  }
  j["hardware"] = Json::array();
  for (const auto& h : v.hardware) {
    j["hardware"].push_back({{"gpu_type", h.gpu_type},
                             {"fits", h.fits},
                             {"predicted_peak_bytes", h.predicted_peak_bytes},
                             {"memory_bytes", h.memory_bytes},
                             {"headroom", h.headroom},
                             {"note", h.note}});
  }
  j["budget"] = {{"term", v.budget.term},           {"days", v.budget.days},
                 {"gpu_hours", v.budget.gpu_hours}, {"cost", v.budget.cost},
                 {"currency", v.budget.currency},   {"breakdown", v.budget.breakdown}};
  j["issued"] = v.issued;
  j["expires"] = v.expires;
  j["key_id"] = v.key_id;
  if (with_signature) j["signature"] = v.signature;
  return j;
}

std::string VerdictToJson(const Verdict& v) { return DumpJson(VerdictToJsonValue(v), 2) + "\n"; }

Result<Verdict> ParseVerdict(std::string_view text, const std::string& label) {
  PILOT_ASSIGN_OR_RETURN(Json j, ParseJsonText(text, label, kMaxVerdictBytes));
  Verdict v;
  using R = ObjectReader;
  R r(j, label, "");
  r.Str("schema", &v.schema);
  if (r.ok()) PILOT_RETURN_IF_ERROR(CheckSchema(label, v.schema, kVerdictSchema));
  r.Object("job", [&](R& o) {
    o.Int("id", &v.job.id).Str("user", &v.job.user).Str("run", &v.job.run);
    o.Str("config_sha256", &v.job.config_sha256);
  });
  std::string s;
  r.Enum("decision", &s, DecisionNames());
  if (r.ok()) v.decision = FromName<Decision>(DecisionNames(), s);
  r.Bool("binding", &v.binding);
  r.Array<Check>("checks", &v.checks, [](R& o, Check* c) {
    std::string st, vb;
    o.Str("name", &c->name).Enum("status", &st, StatusNames());
    o.Str("measured", &c->measured).Str("threshold", &c->threshold).Str("detail", &c->detail);
    o.Enum("verified_by", &vb, VerifiedNames());
    if (o.ok()) {
      c->status = FromName<CheckStatus>(StatusNames(), st);
      c->verified_by = FromName<VerifiedBy>(VerifiedNames(), vb);
    }
  });
  r.Array<HardwareFit>("hardware", &v.hardware, [](R& o, HardwareFit* h) {
    o.Str("gpu_type", &h->gpu_type).Bool("fits", &h->fits);
    o.Int("predicted_peak_bytes", &h->predicted_peak_bytes).Int("memory_bytes", &h->memory_bytes);
    o.Num("headroom", &h->headroom).Str("note", &h->note);
  });
  r.Object("budget", [&](R& o) {
    o.Enum("term", &v.budget.term, {"7-day", "30-day", "none"});
    o.Num("days", &v.budget.days).Num("gpu_hours", &v.budget.gpu_hours);
    o.Num("cost", &v.budget.cost).Str("currency", &v.budget.currency);
    o.NumMap("breakdown", &v.budget.breakdown);
  });
  r.Str("issued", &v.issued).Str("expires", &v.expires);
  if (r.ok() && !ParseRfc3339(v.issued).ok()) r.Fail("issued", "expected RFC 3339 time");
  if (r.ok() && !ParseRfc3339(v.expires).ok()) r.Fail("expires", "expected RFC 3339 time");
  r.Str("key_id", &v.key_id).Str("signature", &v.signature);
  PILOT_RETURN_IF_ERROR(r.Finish());
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
