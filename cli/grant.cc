// pilot grant JOBID --nodes N [...]: turn a GO verdict into a Slurm
// reservation (root). Refuses with every reason; records the grant.
#include "core/decide/grant.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>

#include "cli/child.h"
#include "cli/options.h"
#include "cli/verdict_store.h"
#include "core/base/atomic_file.h"
#include "core/base/crypto.h"
#include "core/base/utf8.h"
#include "job/state_layout.h"

namespace pilot::cli {
namespace {

// Exit status when scontrol itself failed (documented in pilot(1)).
constexpr int kExitScontrol = 4;

// pilot grant --verify JOBID: the recorded grant, its signature checked
// with the public key.
int VerifyGrant(const Invocation& inv, const std::string& policy_path, int64_t job_id) {
  Result<Policy> policy = LoadCliPolicy(policy_path);
  if (!policy.ok()) {
    inv.err << policy.status().ToString() << "\n";
    return kExitUsage;
  }
  const std::string path = job::StateLayout(policy->state_dir).GrantFile(job_id);
  Result<std::string> text = ReadFileLimited(path, 1 << 20);
  Result<GrantRecord> g = text.ok() ? ParseGrantRecord(*text, path) : Result<GrantRecord>(text.status());
  if (!g.ok()) {
    inv.err << g.status().ToString() << "\n";
    return kExitNo;
  }
  Result<std::string> pub = ReadEd25519PublicKeyFile(policy->public_key_file);
  Status sig = pub.ok() ? VerifyGrantRecord(*text, *pub) : pub.status();
  inv.out << "grant of job " << job_id << ": " << ReservationName(job_id) << " for " << VisibleText(g->user) << ", "
          << g->nodes << " node(s), " << g->duration_minutes << " minutes; identity "
          << (g->identity ? VisibleText(g->identity->sha256) : std::string("none")) << "\n"
          << "  signature " << (sig.ok() ? "valid (ed25519, key " + KeyId(*pub) + ")" : VisibleText(sig.Message()))
          << "\n  " << path << "\n";
  return sig.ok() ? kExitOk : kExitNo;
}

}  // namespace

int RunGrant(const Invocation& inv) {
  CommandLine cl("pilot grant [OPTIONS] JOBID --nodes N",
                 "Create the Slurm reservation pilot_JOBID for the user of a GO verdict (root).\n"
                 "Checks the signature (Ed25519, else HMAC), GO, expiry, the user, and that\n"
                 "the duration does not exceed the term the budget recommends; then runs\n"
                 "scontrol create reservation and records the grant in STATE/grants/JOBID.json,\n"
                 "signed (Ed25519) with the site's key. --verify checks a recorded grant (anyone).\n"
                 "Exit 0 granted, 1 refused, 2 usage, 4 scontrol failed.");
  cl.options.add_options()("nodes", po::value<int>(), "nodes to reserve (required)")(
      "partition", po::value<std::string>()->default_value(""), "partition of the reservation")(
      "duration", po::value<std::string>()->default_value(""),
      "length: MINUTES, D-HH[:MM[:SS]], Nd or Nh (default: the recommended term)")(
      "start", po::value<std::string>()->default_value("now"), "scontrol StartTime")(
      "user", po::value<std::string>()->default_value(""),
      "the user the reservation is for; must be the verdict's user")(
      "dry-run", po::bool_switch(), "check and print the scontrol command, create nothing")(
      "verify", po::bool_switch(),
      "check the recorded grant's signature with the public key and show it (any user)")(
      "policy", PolicyValue(), PolicyHelp().c_str());
  cl.hidden.add_options()("job", po::value<std::string>(), "job id");
  cl.positional.add("job", 1);
  po::variables_map vm;
  if (auto rc = ParseCommandArgs(inv, cl, vm)) return *rc;
  if (!vm.count("job")) return UsageError(inv, "expected a JOBID");
  const std::string id = vm["job"].as<std::string>();
  const std::optional<int64_t> job_id = job::StateLayout::ParseJobId(id);
  if (!job_id) {
    return UsageError(inv, "JOBID must be a number, got '" + id + "'");
  }
  if (vm["verify"].as<bool>()) return VerifyGrant(inv, vm["policy"].as<std::string>(), *job_id);
  if (!vm.count("nodes")) return UsageError(inv, "--nodes is required");
  GrantRequest req;
  req.job_id = *job_id;
  req.nodes = vm["nodes"].as<int>();
  req.partition = vm["partition"].as<std::string>();
  req.start = vm["start"].as<std::string>();
  req.user = vm["user"].as<std::string>();
  for (const std::string* v : {&req.partition, &req.start, &req.user}) {
    if (v->find_first_of(" \t\n=,") != std::string::npos) {
      return UsageError(inv, "'" + *v + "' must not contain spaces, '=' or ','");
    }
  }
  if (req.start.empty()) return UsageError(inv, "--start must not be empty");
  if (const std::string d = vm["duration"].as<std::string>(); !d.empty()) {
    Result<int64_t> m = ParseDurationMinutes(d);
    if (!m.ok()) return UsageError(inv, m.status().Message());
    req.duration_minutes = *m;
  }
  const bool dry = vm["dry-run"].as<bool>();
  if (!dry && getuid() != 0) {
    inv.err << Status::Permission("grant", "only root may create reservations")
                   .WithHint("run it with sudo, or use --dry-run to check a verdict")
                   .ToString()
            << "\n";
    return kExitNo;
  }
  Result<Policy> policy = LoadCliPolicy(vm["policy"].as<std::string>());
  if (!policy.ok()) {
    inv.err << policy.status().ToString() << "\n";
    return kExitUsage;
  }
  const job::StateLayout layout(policy->state_dir);
  const std::string path = layout.VerdictFile(req.job_id);
  Result<Verdict> v = ReadVerdict(path);
  if (!v.ok()) {
    inv.err << v.status().ToString() << "\n";
    return kExitNo;
  }
  // A valid Ed25519 signature (public_key_file) or, as before it existed, a
  // valid HMAC (key_file) admits the verdict; the message names each check.
  std::string checked;
  Status sig = Status::Ok();
  Result<std::string> pub = ReadEd25519PublicKeyFile(policy->public_key_file);
  Status ed25519 = pub.ok() ? VerifyVerdictEd25519(*v, *pub) : pub.status();
  if (ed25519.ok()) {
    checked = "valid (ed25519, key " + v->public_key_id + ")";
  } else {
    Result<std::string> key = ReadKeyFile(policy->key_file);
    Status hmac = key.ok() ? VerifyVerdictHmac(*v, *key) : key.status();
    if (hmac.ok()) {
      checked = "valid (hmac-sha256, key " + v->key_id + "; ed25519: " + ed25519.detail() + ")";
    } else {
      sig = Status::Permission("no valid signature", "ed25519: " + ed25519.Message() +
                                                         "; hmac-sha256: " + hmac.Message());
    }
  }
  const int64_t now = static_cast<int64_t>(std::time(nullptr));
  std::vector<std::string> why = GrantRefusals(*v, sig, req, now);
  const std::string record = layout.GrantFile(req.job_id);
  struct stat st {};
  if (stat(record.c_str(), &st) == 0) {
    why.push_back("job " + id + " was already granted (" + record + ")");
  }
  if (!why.empty()) {
    inv.err << "pilot: grant: refused for job " << id << ":\n";
    for (const std::string& w : why) inv.err << "  - " << VisibleText(w) << "\n";
    inv.err << "HINT: see 'pilot verdict " << id << "' and pilot(1)\n";
    return kExitNo;
  }
  std::vector<std::string> argv = ScontrolArgv(policy->scontrol_path, *v, req);
  std::string shown;
  for (const std::string& a : argv) shown += (shown.empty() ? "" : " ") + a;
  inv.out << "signature " << VisibleText(checked) << "\n";
  if (dry) {
    inv.out << VisibleText(shown) << "\n";
    return kExitOk;
  }
  std::string error;
  const int rc = RunChild(argv, nullptr, "grant", &error);
  if (rc != 0) {
    inv.err << Status::Unavailable(
                   "grant", rc < 0 ? error : argv[0] + " exited with status " + std::to_string(rc))
                   .WithHint("command: " + shown)
                   .ToString()
            << "\n";
    return kExitScontrol;
  }
  mkdir(layout.GrantsDir().c_str(), 0755);
  // Signed with the verdicts' key, so that the user can check the grant
  // (--verify); without the key it is recorded unsigned, and said so.
  std::string text = GrantRecordJson(*v, req, CallerName(), now);
  Result<std::string> key = ReadEd25519PrivateKeyFile(policy->signing_key_file);
  Result<std::string> signed_text = key.ok() ? SignGrantRecord(text, *key) : Result<std::string>(key.status());
  if (signed_text.ok()) {
    text = std::move(signed_text).value();
  } else {
    inv.err << "pilot: grant: recorded unsigned: " << signed_text.status().Message() << "\n";
  }
  Status s = WriteFileAtomic(record, text, 0644);
  if (!s.ok()) {
    inv.err << s.ToString() << "\n"
            << "pilot: grant: the reservation " << ReservationName(req.job_id)
            << " exists, but the grant was not recorded\n";
    return kExitNo;
  }
  inv.out << "granted " << ReservationName(req.job_id) << " to " << VisibleText(v->job.user)
          << ": " << req.nodes << " node(s), " << VisibleText(v->budget.term)
          << " term; recorded in " << record << "\n";
  return kExitOk;
}

}  // namespace pilot::cli
