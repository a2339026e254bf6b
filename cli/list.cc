// pilot list [--user U] [--all]: the verdicts in the store, one a line.
#include <unistd.h>

#include "cli/options.h"
#include "cli/verdict_store.h"
#include "core/base/utf8.h"

namespace pilot::cli {

int RunList(const Invocation& inv) {
  CommandLine cl("pilot list [--user USER | --all] [--policy FILE]",
                 "List stored verdicts, oldest job first: job, user, run, decision, issued,\n"
                 "expires. Default: your own verdicts.");
  cl.options.add_options()
      ("user", po::value<std::string>(), "only this user's verdicts")
      ("all", po::bool_switch(), "every user's verdicts")
      ("policy", PolicyValue(), PolicyHelp().c_str());
  po::variables_map vm;
  if (auto rc = ParseCommandArgs(inv, cl, vm)) return *rc;
  if (vm.count("user") && vm["all"].as<bool>()) {
    return UsageError(inv, "--user and --all exclude each other");
  }
  Store store;
  if (auto rc = OpenStore(inv, vm["policy"].as<std::string>(), &store)) return *rc;
  const std::vector<StoredVerdict>& all = store.verdicts;
  std::string user = vm.count("user") ? vm["user"].as<std::string>() : CallerName();
  bool every = vm["all"].as<bool>();
  inv.out << "JOB       USER         RUN                  DECISION  ISSUED                "
             "EXPIRES\n";
  // A column of text that may be anyone's bytes: shown through
  // VisibleText, then cut on a character boundary.
  auto col = [](const std::string& text, size_t w) {
    const std::string s = VisibleText(text);
    return s.size() >= w ? std::string(Utf8Head(s, w - 1)) + " " : s + std::string(w - s.size(), ' ');
  };
  for (const StoredVerdict& sv : all) {
    const Verdict& v = sv.verdict;
    if (!every && v.job.user != user) continue;
    inv.out << col(std::to_string(sv.job_id), 10) << col(v.job.user, 13) << col(v.job.run, 21)
            << col(DecisionName(v.decision), 10) << col(v.issued, 22) << VisibleText(v.expires)
            << (v.signature.empty() ? "  (unsigned)" : "") << "\n";
  }
  for (const std::string& s : store.skipped) inv.err << "pilot: list: skipped " << s << "\n";
  return kExitOk;
}

}  // namespace pilot::cli
