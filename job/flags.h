// Command line shared by pilot-prolog and pilot-epilog. Slurm runs both
// without arguments (Prolog=/Epilog= take a path only); the flags exist for
// wrappers and tests and override the policy file:
//   --policy FILE     site policy (default: the build's sysconfdir pilot.conf)
//   --state-dir DIR   overrides the policy's state_dir
//   --runner PATH     overrides the policy's runner_path
//   --version, --help
#pragma once

#include <optional>
#include <string>

#include "core/records/policy.h"
#include "core/base/status.h"
#include "job/job_env.h"

namespace pilot::job {

struct ScriptFlags {
  std::string policy_path;  // "" = DefaultPolicyPath()
  std::string state_dir;
  std::string runner;
  bool version = false;
  bool help = false;
};

// Errors: kInvalid (unknown flag, missing value, relative path).
Result<ScriptFlags> ParseScriptFlags(int argc, char** argv);

// The policy with the flags applied; a missing default policy file gives the
// built-in defaults, a missing file named with --policy is an error.
// runner_path is resolved (ResolveRunnerPath) when empty.
Result<Policy> EffectivePolicy(const ScriptFlags& flags);

// What both scripts do first: parse the flags, answer --version ("NAME
// VERSION") and --help (the usage, naming the slurm.conf setting that runs
// NAME), read the job's environment and, for a pilot job, the effective
// policy. Returns them when the script has work to do; otherwise nullopt
// with *exit_code set: 0 after --version or --help and for a job without
// --pilot, 1 (message on stderr) for a bad flag, an unreadable job
// environment or a broken policy (which breaks every pilot job on the node).
// `bound_runs`: a job that names a pilot run (--pilot-run) is work too (the
// prolog's binding check), though it is no pilot.
struct ScriptStart {
  ScriptFlags flags;
  JobEnv job;
  Policy policy;
};
std::optional<ScriptStart> StartScript(const char* name, const char* slurm_setting, int argc,
                                       char** argv, int* exit_code, bool bound_runs = false);

}  // namespace pilot::job
