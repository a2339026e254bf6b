// pilot verdict [JOBID] [--json] [--all]: show a pilot job's verdict (and
// the ones it replaced) with its signatures as the caller can check them.
#include <unistd.h>

#include <iomanip>
#include <sstream>

#include "cli/options.h"
#include "cli/verdict_store.h"
#include "core/base/atomic_file.h"
#include "core/base/json_util.h"
#include "core/base/strings.h"
#include "core/base/utf8.h"
#include "core/records/verdict.h"
#include "job/binding.h"
#include "job/state_layout.h"

namespace pilot::cli {
namespace {

std::string PadVerdict(const std::string& s, size_t width) {
  return s.size() >= width ? s + " " : s + std::string(width - s.size(), ' ');
}

void PrintTable(std::ostream& out, const StoredVerdict& sv, const SignatureCheck& sig,
                const std::vector<job::RunRecord>& runs) {
  // Every text below may be a program's or a user's bytes: each is shown
  // through VisibleText before it is padded, so columns stay columns.
  const auto shown = [](std::string_view s) { return VisibleText(s); };
  const Verdict& v = sv.verdict;
  out << "job " << v.job.id << "  " << shown(v.job.user) << "  " << shown(v.job.run) << "  "
      << DecisionName(v.decision) << "  (" << shown(sig.Summary(v));
  if (!v.expires.empty()) out << ", expires " << shown(v.expires);
  out << ")\n";
  if (!v.binding) out << "  note: the pilot ran a smaller shape than the run (not binding)\n";
  size_t w = 11;
  for (const Check& c : v.checks) w = std::max(w, shown(c.name).size() + 2);
  out << "  " << PadVerdict("signature", w) << shown(sig.Ed25519Line(v)) << "\n";
  out << "  " << PadVerdict("hmac", w) << shown(sig.HmacLine(v)) << "\n";
  const std::string detail_indent = "  " + std::string(w, ' ') + "       ";
  for (const Check& c : v.checks) {
    std::string what = shown(c.measured);
    if (!c.threshold.empty()) {
      what += (what.empty() ? "" : "  ") + ("(need " + shown(c.threshold) + ")");
    }
    out << "  " << PadVerdict(shown(c.name), w) << PadVerdict(CheckStatusName(c.status), 6) << " " << what;
    // Who established it: the reader must see which lines are only the
    // workload's word.
    switch (c.verified_by) {
      case VerifiedBy::kEpilog: out << "  (verified by epilog)"; break;
      case VerifiedBy::kSupervisor: out << "  (seen by supervisor)"; break;
      case VerifiedBy::kWorkloadCompared: out << "  (workload's figures, compared by supervisor)"; break;
      case VerifiedBy::kProlog: out << "  (pinned by prolog)"; break;
      case VerifiedBy::kWorkload:
      case VerifiedBy::kSelfReported: out << "  (workload's figure)"; break;
    }
    out << "\n";
    if (!c.detail.empty() && c.status != CheckStatus::kPass) {
      // A standard error tail keeps its lines, each under the first.
      out << detail_indent << VisibleLines(c.detail, detail_indent) << "\n";
    }
  }
  for (size_t i = 0; i < v.hardware.size(); ++i) {
    const HardwareFit& h = v.hardware[i];
    std::ostringstream p;
    p << shown(h.gpu_type) << (h.fits ? " fits" : " does not fit") << " (" << std::fixed
      << std::setprecision(0) << h.headroom * 100 << "% headroom)";
    if (!h.note.empty()) p << "; " << shown(h.note);
    out << "  " << PadVerdict(i == 0 ? "hardware" : "", w) << "       " << p.str() << "\n";
  }
  if (v.budget.days > 0 || v.budget.term != "none") {
    std::ostringstream b;
    b << std::fixed << std::setprecision(1) << v.budget.days << " days, "
      << std::setprecision(0) << v.budget.gpu_hours << " GPU-hours -> " << shown(v.budget.term)
      << " reservation";
    out << "  " << PadVerdict("budget", w) << "       " << b.str() << "\n";
  }
  if (v.identity) {
    // The run identity, signed with the rest: what the long run must be.
    out << "  " << PadVerdict("identity", w) << "       sha256 " << shown(v.identity->sha256) << "\n";
    for (const std::string& line : v.identity->lines) {
      out << "  " << PadVerdict("", w) << "         " << shown(line) << "\n";
    }
  }
  // The long jobs that named this pilot (--pilot-run) and what the node
  // found: the piloted run, or what differed.
  for (size_t i = 0; i < runs.size(); ++i) {
    const job::RunRecord& r = runs[i];
    out << "  " << PadVerdict(i == 0 ? "runs" : "", w) << "       job " << r.job_id << " " << shown(r.decision) << " on "
        << shown(r.host) << " at " << shown(r.checked_at) << "\n";
    for (const std::string& why : r.reasons) {
      out << "  " << PadVerdict("", w) << "         " << shown(why) << "\n";
    }
  }
  out << "  issued " << shown(v.issued);
  if (!v.instance.empty()) out << "  instance " << shown(v.instance);
  out << "  " << shown(sv.path) << "\n";
}

// The stored file as it is, plus the members "signature_check" and "runs"
// (the long jobs' run records, job/binding.h; not signed).
Result<Json> JsonWithCheck(const StoredVerdict& sv, const SignatureCheck& sig,
                           const std::vector<job::RunRecord>& runs) {
  PILOT_ASSIGN_OR_RETURN(std::string text, ReadFileLimited(sv.path, kMaxVerdictBytes));
  PILOT_ASSIGN_OR_RETURN(Json j, ParseJsonText(text, sv.path, kMaxVerdictBytes));
  Json check = sig.ToJson();
  check["file"] = sv.path;
  j["signature_check"] = std::move(check);
  Json list = Json::array();
  for (const job::RunRecord& r : runs) list.push_back(job::RunRecordJson(r));
  j["runs"] = std::move(list);
  return j;
}

}  // namespace

int RunVerdict(const Invocation& inv) {
  CommandLine cl("pilot verdict [--json] [--all] [--policy FILE] [JOBID]",
                 "Show the verdict of pilot job JOBID (default: your latest): decision,\n"
                 "checks, hardware fit, budget and whether its signatures are valid (the\n"
                 "Ed25519 one for anyone, the HMAC one for root). Exit 0 when shown, 1 when\n"
                 "there is none or a signature shown is invalid.");
  cl.options.add_options()
      ("json", po::bool_switch(),
       "print the stored verdict.json with the member signature_check added")
      ("all", po::bool_switch(), "also the verdicts it replaced, oldest first")
      ("policy", PolicyValue(), PolicyHelp().c_str());
  cl.hidden.add_options()("job", po::value<std::string>(), "job id");
  cl.positional.add("job", 1);
  po::variables_map vm;
  if (auto rc = ParseCommandArgs(inv, cl, vm)) return *rc;

  Store store;
  if (auto rc = OpenStore(inv, vm["policy"].as<std::string>(), &store)) return *rc;
  const std::vector<StoredVerdict>& all = store.verdicts;
  const job::StateLayout layout(store.policy.state_dir);
  const StoredVerdict* found = nullptr;
  std::string path;
  if (vm.count("job")) {
    const std::string id = vm["job"].as<std::string>();
    const std::optional<int64_t> job_id = job::StateLayout::ParseJobId(id);
    if (!job_id) return UsageError(inv, "JOBID must be a number, got " + Quote(id));
    path = layout.VerdictFile(*job_id);
    for (const StoredVerdict& sv : all) {
      if (sv.path == path) found = &sv;
    }
    if (found == nullptr) {
      // Not listed: missing, or present but unreadable/invalid; say which.
      Result<Verdict> v = ReadVerdict(path);
      Status s = v.ok() ? Status::NotFound(path) : v.status();
      if (s.code() == Code::kNotFound) {
        s = Status::NotFound("job " + id, "no verdict in " + layout.VerdictsDir())
                .WithHint("the epilog writes it when the pilot job ends; see 'pilot list'");
      }
      inv.err << s.ToString() << "\n";
      return kExitNo;
    }
  } else {
    const std::string me = CallerName();
    for (const StoredVerdict& sv : all) {
      if (sv.verdict.job.user == me) found = &sv;
    }
    if (found == nullptr) {
      inv.err << Status::NotFound("verdict",
                                  "no verdict of user " + me + " in " + layout.VerdictsDir())
                     .WithHint("pass a JOBID, or see 'pilot list'")
                     .ToString()
              << "\n";
      return kExitNo;
    }
  }
  std::vector<StoredVerdict> shown;
  if (vm["all"].as<bool>()) {
    std::vector<std::string> skipped;
    Result<std::vector<StoredVerdict>> history =
        ListVerdictHistory(store.policy.state_dir, found->job_id, &skipped);
    if (!history.ok()) {
      inv.err << history.status().ToString() << "\n";
      return kExitNo;
    }
    shown = std::move(history).value();
    for (const std::string& s : skipped) inv.err << "pilot: verdict: skipped " << s << "\n";
  }
  shown.push_back(*found);
  const bool json = vm["json"].as<bool>();
  Json array = Json::array();
  bool bad = false;
  for (size_t i = 0; i < shown.size(); ++i) {
    const StoredVerdict& sv = shown[i];
    const SignatureCheck sig = CheckSignatures(sv.verdict, store.policy);
    // Runs name a pilot job, not one of its instances: shown with the latest.
    const std::vector<job::RunRecord> runs =
        i + 1 == shown.size() ? job::RunsOfPilot(layout.RunsDir(), sv.job_id) : std::vector<job::RunRecord>{};
    if (json) {
      Result<Json> j = JsonWithCheck(sv, sig, runs);
      if (!j.ok()) {
        inv.err << j.status().ToString() << "\n";
        return kExitNo;
      }
      array.push_back(std::move(j).value());
    } else {
      if (i > 0) inv.out << "\n";
      PrintTable(inv.out, sv, sig, runs);
    }
    if (sig.Bad()) {
      bad = true;
      inv.err << Status::Permission(sv.path, sig.Summary(sv.verdict)).ToString() << "\n";
    }
  }
  if (json) {
    inv.out << VisibleJsonText(DumpJson(vm["all"].as<bool>() ? array : array.back(), 2)) << "\n";
  }
  if (bad) return kExitNo;
  return kExitOk;
}

}  // namespace pilot::cli
