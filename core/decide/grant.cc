#include "core/decide/grant.h"

#include <algorithm>
#include <cctype>
#include <charconv>

#include "core/base/crypto.h"
#include "core/base/json_util.h"
#include "core/base/rfc3339.h"

namespace pilot {
namespace {

// Non-negative integer of the whole of `s`, or nullopt.
std::optional<int64_t> Number(std::string_view s) {
  if (s.empty() || s.size() > 9) return std::nullopt;
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v < 0) return std::nullopt;
  return v;
}

}  // namespace

Result<int64_t> ParseDurationMinutes(std::string_view text) {
  auto bad = [&] {
    return Status::Invalid("duration '" + std::string(text) + "'",
                           "expected MINUTES, D-HH[:MM[:SS]], HH:MM:SS, Nd or Nh");
  };
  if (text.empty()) return bad();
  char unit = text.back();
  if (unit == 'd' || unit == 'h') {
    auto n = Number(text.substr(0, text.size() - 1));
    if (!n || *n == 0) return bad();
    return unit == 'd' ? *n * 1440 : *n * 60;
  }
  int64_t days = 0;
  std::string_view rest = text;
  if (size_t dash = text.find('-'); dash != std::string_view::npos) {
    auto d = Number(text.substr(0, dash));
    if (!d) return bad();
    days = *d;
    rest = text.substr(dash + 1);
  }
  std::vector<int64_t> parts;
  while (true) {
    size_t colon = rest.find(':');
    auto n = Number(rest.substr(0, colon));
    if (!n) return bad();
    parts.push_back(*n);
    if (colon == std::string_view::npos) break;
    rest = rest.substr(colon + 1);
  }
  int64_t minutes = 0;
  const bool has_days = text.find('-') != std::string_view::npos;
  if (!has_days && parts.size() == 1) {
    minutes = parts[0];  // plain minutes, as scontrol reads them
  } else if (has_days && parts.size() <= 3) {
    minutes = days * 1440 + parts[0] * 60 + (parts.size() > 1 ? parts[1] : 0) +
              (parts.size() > 2 && parts[2] > 0 ? 1 : 0);
  } else if (!has_days && parts.size() == 3) {
    minutes = parts[0] * 60 + parts[1] + (parts[2] > 0 ? 1 : 0);
  } else {
    return bad();
  }
  if (minutes <= 0) return bad();
  return minutes;
}

int TermDays(const std::string& term) {
  if (term == "7-day") return 7;
  if (term == "30-day") return 30;
  return 0;
}

std::vector<std::string> GrantRefusals(const Verdict& v, const Status& signature,
                                       const GrantRequest& r, int64_t now) {
  std::vector<std::string> why;
  if (!signature.ok()) why.push_back("signature: " + signature.Message());
  if (v.decision != Decision::kGo) {
    std::string failed;
    for (const Check& c : v.checks) {
      if (c.status == CheckStatus::kFail) failed += (failed.empty() ? "" : ", ") + c.name;
    }
    why.push_back("the verdict is NO-GO" + (failed.empty() ? "" : " (failed: " + failed + ")"));
  }
  Result<int64_t> expires = ParseRfc3339(v.expires);
  if (!expires.ok()) {
    why.push_back("the verdict's expiry '" + v.expires + "' is unreadable");
  } else if (*expires <= now) {
    why.push_back("the verdict expired at " + v.expires + ": run a new pilot");
  }
  if (!v.binding) why.push_back("the verdict is not binding: the pilot ran a smaller shape");
  for (const Check& c : v.checks) {
    // A program's work measured by root is what tells its losses from
    // made-up ones: a verdict without that measure admits no long run.
    if (c.name == "busy" && c.status == CheckStatus::kSkip) {
      why.push_back("root did not measure the program's work (busy: " + c.detail +
                    "): a grant needs it; pilot at least 2 s of steps in a phase");
    }
  }
  if (!r.user.empty() && r.user != v.job.user) {
    why.push_back("the verdict belongs to user " + v.job.user + ", not " + r.user);
  }
  if (v.job.user.empty()) why.push_back("the verdict names no user");
  const int term = TermDays(v.budget.term);
  if (v.budget.days <= 0) {
    // No estimate at all: the budget check says why (decide.cc).
    std::string reason = "the pilot measured nothing to estimate the run from";
    for (const Check& c : v.checks) {
      if (c.name == "budget" && !c.detail.empty()) reason = c.detail;
    }
    why.push_back("the verdict has no budget (" + reason + "): a grant needs one");
  } else if (term == 0) {
    why.push_back("the budget recommends no term (" + v.budget.term +
                  "): the run does not fit a 30-day reservation");
  } else if (r.duration_minutes && *r.duration_minutes > int64_t{term} * 1440) {
    why.push_back("duration " + std::to_string(*r.duration_minutes) + " minutes exceeds the " +
                  v.budget.term + " term the verdict recommends (" +
                  std::to_string(int64_t{term} * 1440) + " minutes)");
  }
  if (r.nodes < 1) why.push_back("--nodes must be at least 1");
  return why;
}

std::string ReservationName(int64_t job_id) { return "pilot_" + std::to_string(job_id); }

std::vector<std::string> ScontrolArgv(const std::string& scontrol_path, const Verdict& v,
                                      const GrantRequest& r) {
  const int64_t minutes = r.duration_minutes.value_or(int64_t{TermDays(v.budget.term)} * 1440);
  std::vector<std::string> argv = {scontrol_path,
                                   "create",
                                   "reservation",
                                   "ReservationName=" + ReservationName(r.job_id),
                                   "StartTime=" + r.start,
                                   "Duration=" + std::to_string(minutes),
                                   "NodeCnt=" + std::to_string(r.nodes),
                                   "Users=" + v.job.user};
  if (!r.partition.empty()) argv.push_back("PartitionName=" + r.partition);
  return argv;
}

std::string GrantRecordJson(const Verdict& v, const GrantRequest& r, const std::string& granted_by,
                            int64_t now) {
  Json j = {
      {"schema", kGrantSchema},
      {"job_id", r.job_id},
      {"user", v.job.user},
      {"run", v.job.run},
      {"reservation", ReservationName(r.job_id)},
      {"nodes", r.nodes},
      {"partition", r.partition},
      {"start", r.start},
      {"duration_minutes", r.duration_minutes.value_or(int64_t{TermDays(v.budget.term)} * 1440)},
      {"term", v.budget.term},
      {"verdict_expires", v.expires},
      {"verdict_signature", v.signature},
      {"granted_by", granted_by},
      {"granted_at", FormatRfc3339(now)},
      {"identity", nullptr}};
  if (v.identity) j["identity"] = {{"sha256", v.identity->sha256}, {"lines", v.identity->lines}};
  return DumpJson(j, 2) + "\n";
}

namespace {

// The record as a JSON object, without its signature members.
Result<Json> UnsignedGrant(std::string_view text) {
  PILOT_ASSIGN_OR_RETURN(Json j, ParseJsonText(text, "grant record", 1 << 20));
  if (!j.is_object()) return Status::Corrupt("grant record", "not a JSON object");
  j.erase("public_key_id");
  j.erase("signature_ed25519");
  return j;
}

}  // namespace

Result<std::string> SignGrantRecord(std::string_view record_json, std::string_view private_key) {
  PILOT_ASSIGN_OR_RETURN(Json j, UnsignedGrant(record_json));
  PILOT_ASSIGN_OR_RETURN(std::string pub, Ed25519PublicKeyOf(private_key));
  PILOT_ASSIGN_OR_RETURN(std::string sig, Ed25519SignHex(private_key, CanonicalJson(j)));
  j["public_key_id"] = KeyId(pub);
  j["signature_ed25519"] = sig;
  return DumpJson(j, 2) + "\n";
}

Status VerifyGrantRecord(std::string_view record_json, std::string_view public_key) {
  PILOT_ASSIGN_OR_RETURN(Json signed_j, ParseJsonText(record_json, "grant record", 1 << 20));
  if (!signed_j.is_object()) return Status::Corrupt("grant record", "not a JSON object");
  const Json& sig = signed_j.contains("signature_ed25519") ? signed_j["signature_ed25519"] : Json();
  if (!sig.is_string() || sig.get<std::string>().empty()) {
    return Status::Permission("grant record", "unsigned (no signature_ed25519)");
  }
  const std::string key_id = signed_j.contains("public_key_id") && signed_j["public_key_id"].is_string()
                                 ? signed_j["public_key_id"].get<std::string>()
                                 : "";
  if (key_id != KeyId(public_key)) {
    return Status::Permission("grant record", "signed by key " + key_id + ", not by " + KeyId(public_key));
  }
  PILOT_ASSIGN_OR_RETURN(Json j, UnsignedGrant(record_json));
  if (!Ed25519Verify(public_key, CanonicalJson(j), sig.get<std::string>())) {
    return Status::Permission("grant record", "signature mismatch (ed25519, key " + key_id + ")");
  }
  return Status::Ok();
}

Result<GrantRecord> ParseGrantRecord(std::string_view text, const std::string& label) {
  PILOT_ASSIGN_OR_RETURN(Json j, ParseJsonText(text, label, 1 << 20));
  auto bad = [&](const std::string& what) { return Status::Corrupt(label, what); };
  if (!j.is_object()) return bad("not a JSON object");
  if (!j.contains("schema") || !j["schema"].is_string()) return bad("no schema");
  PILOT_RETURN_IF_ERROR(CheckSchema(label, j["schema"].get<std::string>(), kGrantSchema));
  GrantRecord g;
  if (!j.contains("job_id") || !j["job_id"].is_number_integer()) return bad("job_id: not an integer");
  if (!j.contains("user") || !j["user"].is_string()) return bad("user: not a string");
  if (!j.contains("nodes") || !j["nodes"].is_number_integer()) return bad("nodes: not an integer");
  if (!j.contains("duration_minutes") || !j["duration_minutes"].is_number_integer()) {
    return bad("duration_minutes: not an integer");
  }
  g.job_id = j["job_id"].get<int64_t>();
  g.user = j["user"].get<std::string>();
  g.nodes = static_cast<int>(std::clamp<int64_t>(j["nodes"].get<int64_t>(), 0, 1 << 20));
  g.duration_minutes = j["duration_minutes"].get<int64_t>();
  if (j.contains("identity") && !j["identity"].is_null()) {
    const Json& id = j["identity"];
    if (!id.is_object() || !id.contains("sha256") || !id["sha256"].is_string() || !id.contains("lines") ||
        !id["lines"].is_array()) {
      return bad("identity: expected {\"sha256\": string, \"lines\": [strings]}");
    }
    LockIdentity li;
    li.sha256 = id["sha256"].get<std::string>();
    for (const Json& line : id["lines"]) {
      if (!line.is_string()) return bad("identity.lines: not a string");
      li.lines.push_back(line.get<std::string>());
    }
    g.identity = std::move(li);
  }
  return g;
}

}  // namespace pilot
