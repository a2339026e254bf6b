// The SPANK plugin's pure parts: plugstack.conf arguments, the pilot options
// a job carries, and the runner command line the batch step is replaced
// with. No Slurm header here, so unit tests can link this without Slurm.
// Only the plugin's implementation (spank_pilot_impl.so) links it.
//
// Thread-safety: pure functions over values.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"

namespace pilot::spank {

// Arguments from the plugin's line in plugstack.conf, `key=value` each:
//   state_dir=DIR   per-job folders, verdicts, outbox (default below)
//   runner=PATH     the pilot-runner executable started in the batch step
//   policy=PATH     the site policy file (pilot.conf)
// A key left out takes the build's default: state_dir and runner then come
// from the policy file (its state_dir / runner_path) when it sets them.
struct PluginArgs {
  std::string state_dir = "/var/lib/slurm-pilot";
  std::string runner = PILOT_DEFAULT_RUNNER;   // <bindir>/pilot-runner
  std::string policy = PILOT_DEFAULT_POLICY;   // <sysconfdir>/slurm-pilot/pilot.conf
  bool state_dir_given = false;
  bool runner_given = false;
};

// Parses argv from plugstack.conf. Defaults first, then each argument.
// Errors (kInvalid): an argument without '=', an unknown key ("did you
// mean"), an empty or relative path.
Result<PluginArgs> ParsePluginArgs(const std::vector<std::string>& argv);

// The pilot stages --pilot-stage accepts.
bool IsValidStage(const std::string& stage);

// What the user asked for with --pilot / --pilot-stage / --pilot-out (or
// their environment fallbacks PILOT_CONFIG, PILOT_STAGE, PILOT_OUT).
struct PilotRequest {
  std::string config;          // as given; "" = no pilot
  std::string stage = "all";   // single | node | all
  std::string out;             // "" = the job's work folder
};

// The runner command that replaces the pilot job's first task:
//   RUNNER run --config CONFIG --lock LOCK --out OUT --stage STAGE
// with the job's copy of the config, its lock and, unless request.out is
// given, its work folder (job/state_layout.h).
std::vector<std::string> RunnerArgv(const PluginArgs& args, const PilotRequest& request,
                                    unsigned long job_id);

}  // namespace pilot::spank
