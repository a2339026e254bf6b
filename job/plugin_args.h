// The plugin's arguments on its plugstack.conf line, read by the plugin
// (spank_plugin/) when slurmd loads it and by `pilot doctor` when it checks
// a node's plugstack: one reader, so the two cannot disagree about a line.
//
// Thread-safety: pure functions over values.
#pragma once

#include <string>
#include <vector>

#include "core/base/status.h"
#include "core/records/policy.h"

namespace pilot::job {

// Arguments from the plugin's line in plugstack.conf, `key=value` each:
//   state_dir=DIR   per-job folders, verdicts, outbox (default below)
//   runner=PATH     the pilot-runner executable the supervisor starts
//   supervisor=PATH the pilot-supervisor the plugin starts in the task
//   policy=PATH     the site policy file (pilot.conf)
// A key left out takes the build's default: state_dir, runner and
// supervisor then come from the policy file (its state_dir, runner_path,
// supervisor_path) when it sets them.
struct PluginArgs {
  std::string state_dir = "/var/lib/slurm-pilot";
  std::string runner = PILOT_DEFAULT_RUNNER;   // <bindir>/pilot-runner
  std::string supervisor = PILOT_DEFAULT_SUPERVISOR;  // <sbindir>/pilot-supervisor
  std::string policy = PILOT_DEFAULT_POLICY;   // <sysconfdir>/slurm-pilot/pilot.conf
  bool state_dir_given = false;
  bool runner_given = false;
  bool supervisor_given = false;
};

// Parses argv from plugstack.conf. Defaults first, then each argument.
// Errors (kInvalid): an argument without '=', an unknown key ("did you
// mean"), an empty or relative path.
Result<PluginArgs> ParsePluginArgs(const std::vector<std::string>& argv);

// What the plugin takes from the site policy (its `policy=` file) for a key
// its line leaves out: state_dir, runner_path and supervisor_path when the
// policy sets them.
void ApplyPolicyDefaults(const Policy& policy, PluginArgs* args);

}  // namespace pilot::job
