// Command line shared by pilot-prolog and pilot-epilog. Slurm runs both
// without arguments (Prolog=/Epilog= take a path only); the flags exist for
// wrappers and tests and override the policy file:
//   --policy FILE     site policy (default: the build's sysconfdir pilot.conf)
//   --state-dir DIR   overrides the policy's state_dir
//   --runner PATH     overrides the policy's runner_path
//   --version, --help
#pragma once

#include <string>

#include "core/policy.h"
#include "core/status.h"

namespace pilot::jobscript {

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

}  // namespace pilot::jobscript
