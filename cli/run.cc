// pilot run PILOT [-- SBATCH_OPTION...]: submit the run a pilot's grant
// binds (spank_pilot(8), BINDING). Its batch script is job/binding.h's
// BoundRunScript, the only one job_submit.lua admits for a job naming a
// pilot; on the node the plugin runs the pilot's program.command in its
// place. sbatch reads the script from its standard input.

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "cli/child.h"
#include "cli/options.h"
#include "cli/verdict_store.h"
#include "core/base/atomic_file.h"
#include "core/base/strings.h"
#include "core/base/utf8.h"
#include "core/decide/grant.h"
#include "job/binding.h"
#include "job/state_layout.h"

namespace pilot::cli {
namespace {

bool GivesReservation(const std::vector<std::string>& sbatch) {
  for (const std::string& a : sbatch) {
    if (a == "--reservation" || StartsWith(a, "--reservation=")) return true;
  }
  return false;
}

}  // namespace

int RunRun(const Invocation& inv) {
  // What follows "--" is sbatch's.
  std::vector<std::string> own = inv.args, sbatch;
  if (auto dash = std::find(own.begin(), own.end(), "--"); dash != own.end()) {
    sbatch.assign(dash + 1, own.end());
    own.erase(dash, own.end());
  }
  const Invocation mine{inv.name, own, inv.out, inv.err};
  CommandLine cl("pilot run [OPTIONS] PILOT [-- SBATCH_OPTION...]",
                 "Submit the run the grant of pilot job PILOT binds: sbatch --pilot-run=PILOT,\n"
                 "in the reservation pilot_PILOT when the pilot's grant is the caller's (unless\n"
                 "an option names one), with the options after --. Its tasks run the pilot's\n"
                 "program.command from its pinned config, not a script of their own\n"
                 "(spank_pilot(8), BINDING). Exit: sbatch's status.");
  cl.options.add_options()("dry-run", po::bool_switch(),
                           "print the sbatch command and the script, submit nothing")(
      "policy", PolicyValue(), PolicyHelp("state_dir").c_str());
  cl.hidden.add_options()("job", po::value<std::string>(), "pilot job id");
  cl.positional.add("job", 1);
  po::variables_map vm;
  if (auto rc = ParseCommandArgs(mine, cl, vm)) return *rc;
  if (!vm.count("job")) return UsageError(inv, "expected the pilot's JOBID");
  const std::string id = vm["job"].as<std::string>();
  const std::optional<int64_t> pilot = job::StateLayout::ParseJobId(id);
  if (!pilot) return UsageError(inv, "PILOT must be a job id, got '" + id + "'");
  std::vector<std::string> argv = {"sbatch", "--pilot-run=" + id};
  if (!GivesReservation(sbatch)) {
    Result<Policy> policy = LoadCliPolicy(vm["policy"].as<std::string>());
    if (!policy.ok()) {
      inv.err << policy.status().ToString() << "\n";
      return kExitUsage;
    }
    // The grant's reservation when the grant is the caller's.
    const std::string path = job::StateLayout(policy->state_dir).GrantFile(*pilot);
    Result<std::string> text = ReadFileLimited(path, 1 << 20);
    Result<GrantRecord> grant =
        text.ok() ? ParseGrantRecord(*text, path) : Result<GrantRecord>(text.status());
    if (grant.ok() && grant->user == CallerName())
      argv.push_back("--reservation=" + ReservationName(*pilot));
  }
  argv.insert(argv.end(), sbatch.begin(), sbatch.end());
  const std::string script = job::BoundRunScript(*pilot);
  if (vm["dry-run"].as<bool>()) {
    inv.out << VisibleText(Join(argv, " ")) << " <<'EOF'\n" << script << "EOF\n";
    return kExitOk;
  }
  inv.out.flush();
  std::string error;
  const int rc = RunChild(argv, &script, "run", &error);
  if (rc < 0) {
    inv.err << Status::Unavailable("run", error).ToString() << "\n";
    return kExitNo;
  }
  return rc;
}

}  // namespace pilot::cli
