#include "spank_plugin/plugin_args.h"

#include "core/strings.h"
#include "job/state_layout.h"

namespace pilot::spank {

Result<PluginArgs> ParsePluginArgs(const std::vector<std::string>& argv) {
  static const std::vector<std::string> kKeys = {"state_dir", "runner", "policy"};
  PluginArgs args;
  for (const std::string& arg : argv) {
    size_t eq = arg.find('=');
    if (eq == std::string::npos) {
      return Status::Invalid("plugstack.conf: " + Quote(arg), "expected key=value")
          .WithHint("keys: state_dir, runner, policy");
    }
    std::string key = arg.substr(0, eq);
    std::string value = arg.substr(eq + 1);
    std::string* slot = nullptr;
    if (key == "state_dir") slot = &args.state_dir;
    if (key == "runner") slot = &args.runner;
    if (key == "policy") slot = &args.policy;
    if (slot == nullptr) {
      Status s = Status::Invalid("plugstack.conf: " + Quote(key), "unknown key");
      if (auto m = ClosestMatch(key, kKeys)) return s.WithHint("did you mean " + *m + "?");
      return s.WithHint("keys: state_dir, runner, policy");
    }
    if (value.empty() || value[0] != '/') {
      return Status::Invalid("plugstack.conf: " + key,
                             "must be an absolute path, got " + Quote(value));
    }
    while (value.size() > 1 && value.back() == '/') value.pop_back();
    *slot = value;
    if (key == "state_dir") args.state_dir_given = true;
    if (key == "runner") args.runner_given = true;
  }
  return args;
}

bool IsValidStage(const std::string& stage) {
  return stage == "single" || stage == "node" || stage == "all";
}

std::vector<std::string> RunnerArgv(const PluginArgs& args, const PilotRequest& request,
                                    unsigned long job_id) {
  job::JobPaths p = job::StateLayout(args.state_dir).Job(static_cast<int64_t>(job_id));
  return {args.runner, "run",   "--config", p.config,
          "--lock",    p.lock,  "--out",    request.out.empty() ? p.work : request.out,
          "--stage",   request.stage};
}

}  // namespace pilot::spank
