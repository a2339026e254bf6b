#include "job/flags.h"

#include <cstdio>

#include "pilot/version.h"

namespace pilot::job {

Result<ScriptFlags> ParseScriptFlags(int argc, char** argv) {
  ScriptFlags f;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--version") {
      f.version = true;
      continue;
    }
    if (a == "--help" || a == "-h") {
      f.help = true;
      continue;
    }
    std::string* slot = nullptr;
    std::string value;
    size_t eq = a.find('=');
    std::string name = eq == std::string::npos ? a : a.substr(0, eq);
    if (name == "--policy") slot = &f.policy_path;
    if (name == "--state-dir") slot = &f.state_dir;
    if (name == "--runner") slot = &f.runner;
    if (slot == nullptr) {
      return Status::Invalid(a, "unknown flag").WithHint("flags: --policy, --state-dir, --runner");
    }
    if (eq != std::string::npos) {
      value = a.substr(eq + 1);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      return Status::Invalid(name, "needs a value");
    }
    if (value.empty() || value[0] != '/') {
      return Status::Invalid(name, "must be an absolute path, got \"" + value + "\"");
    }
    *slot = value;
  }
  return f;
}

Result<Policy> EffectivePolicy(const ScriptFlags& flags) {
  bool named = !flags.policy_path.empty();
  PILOT_ASSIGN_OR_RETURN(
      Policy p, LoadPolicy(named ? flags.policy_path : DefaultPolicyPath(), !named));
  if (!flags.state_dir.empty()) p.state_dir = flags.state_dir;
  if (!flags.runner.empty()) p.runner_path = flags.runner;
  p.runner_path = ResolveRunnerPath(p);
  return p;
}

std::optional<ScriptStart> StartScript(const char* name, const char* slurm_setting, int argc,
                                       char** argv, int* exit_code, bool bound_runs) {
  *exit_code = 0;
  Result<ScriptFlags> flags = ParseScriptFlags(argc, argv);
  if (!flags.ok()) {
    std::fprintf(stderr, "%s\n", flags.status().ToString().c_str());
    *exit_code = 1;
    return std::nullopt;
  }
  if (flags->version) {
    std::printf("%s %s\n", name, PILOT_VERSION_STRING);
    return std::nullopt;
  }
  if (flags->help) {
    std::printf("usage: %s [--policy FILE] [--state-dir DIR] [--runner PATH]\n"
                "Run by slurmd as %s=; see %s(8).\n",
                name, slurm_setting, name);
    return std::nullopt;
  }
  Result<JobEnv> job = ReadJobEnv(ProcessLookup());
  if (!job.ok()) {
    std::fprintf(stderr, "%s\n", job.status().ToString().c_str());
    *exit_code = 1;
    return std::nullopt;
  }
  // Not ours (cost: one getenv scan). A job bound to a pilot's grant is the
  // prolog's too (job/binding.h), never the epilog's.
  if (!job->is_pilot && !(bound_runs && job->pilot_run != 0)) return std::nullopt;
  Result<Policy> policy = EffectivePolicy(*flags);
  if (!policy.ok()) {
    std::fprintf(stderr, "%s\n", policy.status().ToString().c_str());
    *exit_code = 1;
    return std::nullopt;
  }
  return ScriptStart{std::move(*flags), std::move(*job), std::move(*policy)};
}

}  // namespace pilot::job
