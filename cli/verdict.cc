// pilot verdict [JOBID] [--json]: show a pilot job's verdict.
#include <unistd.h>

#include <iomanip>
#include <sstream>

#include "cli/options.h"
#include "cli/verdict_store.h"
#include "core/atomic_file.h"
#include "core/crypto.h"
#include "core/strings.h"
#include "core/verdict.h"
#include "job/state_layout.h"

namespace pilot::cli {
namespace {

// "signature valid", "signature INVALID: ...", or why it was not checked.
// *bad is set when the check ran and failed.
std::string SignatureState(const Verdict& v, const Policy& policy, bool* bad) {
  *bad = false;
  if (v.signature.empty()) {
    *bad = true;
    return "UNSIGNED";
  }
  Result<std::string> key = ReadKeyFile(policy.key_file);
  if (!key.ok()) {
    if (key.status().code() == Code::kNotFound && getuid() == 0) {
      *bad = true;
      return "signed with key " + v.key_id + ", cannot check: " + key.status().Message();
    }
    return "signed with key " + v.key_id + " (only root can check the signature)";
  }
  Status s = VerifyVerdict(v, *key);
  if (!s.ok()) {
    *bad = true;
    return "signature INVALID: " + s.Message();
  }
  return "signature valid";
}

std::string Pad(const std::string& s, size_t width) {
  return s.size() >= width ? s + " " : s + std::string(width - s.size(), ' ');
}

void PrintTable(std::ostream& out, const StoredVerdict& sv, const std::string& sig) {
  const Verdict& v = sv.verdict;
  out << "job " << v.job.id << "  " << v.job.user << "  " << v.job.run << "  "
      << DecisionName(v.decision) << "  (" << sig;
  if (!v.expires.empty()) out << ", expires " << v.expires;
  out << ")\n";
  if (!v.binding) out << "  note: the pilot ran a smaller shape than the run (not binding)\n";
  size_t w = 10;
  for (const Check& c : v.checks) w = std::max(w, c.name.size() + 2);
  for (const Check& c : v.checks) {
    std::string what = c.measured;
    if (!c.threshold.empty()) what += (what.empty() ? "" : "  ") + ("(need " + c.threshold + ")");
    out << "  " << Pad(c.name, w) << Pad(CheckStatusName(c.status), 6) << " " << what;
    if (c.verified_by == VerifiedBy::kEpilog) out << "  (verified by epilog)";
    if (c.verified_by == VerifiedBy::kProlog) out << "  (pinned by prolog)";
    out << "\n";
    if (!c.detail.empty() && c.status != CheckStatus::kPass) {
      out << "  " << std::string(w, ' ') << "       " << c.detail << "\n";
    }
  }
  for (size_t i = 0; i < v.hardware.size(); ++i) {
    const HardwareFit& h = v.hardware[i];
    std::ostringstream p;
    p << h.gpu_type << (h.fits ? " fits" : " does not fit") << " (" << std::fixed
      << std::setprecision(0) << h.headroom * 100 << "% headroom)";
    if (!h.note.empty()) p << "; " << h.note;
    out << "  " << Pad(i == 0 ? "hardware" : "", w) << "       " << p.str() << "\n";
  }
  if (v.budget.days > 0 || v.budget.term != "none") {
    std::ostringstream b;
    b << std::fixed << std::setprecision(1) << v.budget.days << " days, "
      << std::setprecision(0) << v.budget.gpu_hours << " GPU-hours -> " << v.budget.term
      << " reservation";
    out << "  " << Pad("budget", w) << "       " << b.str() << "\n";
  }
  out << "  issued " << v.issued << "  " << sv.path << "\n";
}

}  // namespace

int RunVerdict(const Invocation& inv) {
  CommandLine cl("pilot verdict [--json] [--policy FILE] [JOBID]",
                 "Show the verdict of pilot job JOBID (default: your latest): decision,\n"
                 "checks, hardware fit, budget and whether the signature is valid.\n"
                 "Exit 0 when shown, 1 when there is none or its signature is invalid.");
  cl.options.add_options()
      ("json", po::bool_switch(), "print the stored verdict.json as it is")
      ("policy", po::value<std::string>()->default_value(""),
       "site policy (default: $PILOT_POLICY, else the installed pilot.conf)");
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
  bool bad = false;
  std::string sig = SignatureState(found->verdict, store.policy, &bad);
  if (vm["json"].as<bool>()) {
    Result<std::string> text = ReadFileLimited(found->path, kMaxVerdictBytes);
    if (!text.ok()) {
      inv.err << text.status().ToString() << "\n";
      return kExitNo;
    }
    inv.out << *text;
  } else {
    PrintTable(inv.out, *found, sig);
  }
  if (bad) {
    inv.err << Status::Permission(found->path, sig).ToString() << "\n";
    return kExitNo;
  }
  return kExitOk;
}

}  // namespace pilot::cli
