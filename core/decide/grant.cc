#include "core/decide/grant.h"

#include <cctype>
#include <charconv>

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
  if (!r.user.empty() && r.user != v.job.user) {
    why.push_back("the verdict belongs to user " + v.job.user + ", not " + r.user);
  }
  if (v.job.user.empty()) why.push_back("the verdict names no user");
  const int term = TermDays(v.budget.term);
  if (term == 0) {
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
      {"granted_at", FormatRfc3339(now)}};
  return DumpJson(j, 2) + "\n";
}

}  // namespace pilot
