// pilot verify-verdict FILE [--public-key FILE]: check a verdict copied out of
// the store against the site's Ed25519 public key, with no access to the
// store or any secret.
#include <ctime>

#include "cli/options.h"
#include "cli/verdict_store.h"
#include "core/base/atomic_file.h"
#include "core/base/crypto.h"
#include "core/base/rfc3339.h"
#include "core/base/utf8.h"
#include "core/records/verdict.h"

namespace pilot::cli {

int RunVerifyVerdict(const Invocation& inv) {
  CommandLine cl("pilot verify-verdict [--public-key FILE] [--policy FILE] FILE",
                 "Check the Ed25519 signature of the verdict in FILE (a copy of\n"
                 "STATE/verdicts/JOBID.json) against a public key: the policy's\n"
                 "public_key_file unless --public-key. Prints the decision, job, expiry, key id\n"
                 "and the result. Exit 0 valid, 1 invalid, unsigned or signed by another key,\n"
                 "2 usage or a file that cannot be read.");
  cl.options.add_options()
      ("public-key", po::value<std::string>(),
       "the Ed25519 public key (PEM) to check against")
      ("policy", PolicyValue(), PolicyHelp("public_key_file").c_str());
  cl.hidden.add_options()("file", po::value<std::string>(), "verdict file");
  cl.positional.add("file", 1);
  po::variables_map vm;
  if (auto rc = ParseCommandArgs(inv, cl, vm)) return *rc;
  if (!vm.count("file")) return UsageError(inv, "expected a verdict FILE");
  const std::string file = vm["file"].as<std::string>();

  std::string key_path;
  if (vm.count("public-key")) {
    key_path = vm["public-key"].as<std::string>();
  } else {
    Result<Policy> policy = LoadCliPolicy(vm["policy"].as<std::string>());
    if (!policy.ok()) {
      inv.err << policy.status().ToString() << "\n";
      return kExitUsage;
    }
    key_path = policy->public_key_file;
  }
  // ReadVerdict: a regular file of at most kMaxVerdictBytes, opened without
  // blocking on a FIFO, parsed strictly.
  Result<Verdict> v = ReadVerdict(file);
  if (!v.ok()) {
    inv.err << v.status().ToString() << "\n";
    return kExitUsage;
  }
  Result<std::string> pub = ReadEd25519PublicKeyFile(key_path);
  if (!pub.ok()) {
    inv.err << pub.status().ToString() << "\n";
    return kExitUsage;
  }
  const Verdict& verdict = *v;
  // The file is anyone's copy: every text from it is shown through
  // VisibleText.
  const auto shown = [](std::string_view s) { return VisibleText(s); };
  std::string expires = shown(verdict.expires);
  if (Result<int64_t> t = ParseRfc3339(verdict.expires);
      t.ok() && *t <= static_cast<int64_t>(std::time(nullptr))) {
    expires += " (expired)";
  }
  inv.out << "verdict    " << shown(file) << "\n"
          << "schema     " << shown(verdict.schema) << "\n"
          << "job        " << verdict.job.id << "  " << shown(verdict.job.user) << "  "
          << shown(verdict.job.run) << "\n"
          << "decision   " << DecisionName(verdict.decision)
          << (verdict.binding ? "" : " (not binding)") << "\n"
          << "issued     " << shown(verdict.issued) << "\n"
          << "expires    " << expires << "\n"
          << "key        "
          << (verdict.public_key_id.empty() ? "(none)" : shown(verdict.public_key_id))
          << "  (checked against " << KeyId(*pub) << ", " << shown(key_path) << ")\n";
  Status s = VerifyVerdictEd25519(verdict, *pub);
  if (!s.ok()) {
    const std::string state = verdict.signature_ed25519.empty() ? "unsigned" : "INVALID";
    inv.out << "signature  " << state << " (ed25519): " << shown(s.detail()) << "\n";
    inv.err << s.Context(file).ToString() << "\n";
    return kExitNo;
  }
  inv.out << "signature  valid (ed25519, key " << shown(verdict.public_key_id) << ")\n";
  return kExitOk;
}

}  // namespace pilot::cli
