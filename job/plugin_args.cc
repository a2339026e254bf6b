#include "job/plugin_args.h"

#include "core/base/strings.h"

namespace pilot::job {

Result<PluginArgs> ParsePluginArgs(const std::vector<std::string>& argv) {
  static const std::vector<std::string> kKeys = {"state_dir", "runner", "supervisor", "policy"};
  PluginArgs args;
  for (const std::string& arg : argv) {
    size_t eq = arg.find('=');
    if (eq == std::string::npos) {
      return Status::Invalid("plugstack.conf: " + Quote(arg), "expected key=value")
          .WithHint("keys: state_dir, runner, supervisor, policy");
    }
    std::string key = arg.substr(0, eq);
    std::string value = arg.substr(eq + 1);
    std::string* slot = nullptr;
    if (key == "state_dir") slot = &args.state_dir;
    if (key == "runner") slot = &args.runner;
    if (key == "supervisor") slot = &args.supervisor;
    if (key == "policy") slot = &args.policy;
    if (slot == nullptr) {
      Status s = Status::Invalid("plugstack.conf: " + Quote(key), "unknown key");
      if (auto m = ClosestMatch(key, kKeys)) return s.WithHint("did you mean " + *m + "?");
      return s.WithHint("keys: state_dir, runner, supervisor, policy");
    }
    if (value.empty() || value[0] != '/') {
      return Status::Invalid("plugstack.conf: " + key,
                             "must be an absolute path, got " + Quote(value));
    }
    while (value.size() > 1 && value.back() == '/') value.pop_back();
    *slot = value;
    if (key == "state_dir") args.state_dir_given = true;
    if (key == "runner") args.runner_given = true;
    if (key == "supervisor") args.supervisor_given = true;
  }
  return args;
}

void ApplyPolicyDefaults(const Policy& policy, PluginArgs* args) {
  if (!args->state_dir_given) args->state_dir = policy.state_dir;
  if (!args->runner_given && !policy.runner_path.empty()) args->runner = policy.runner_path;
  if (!args->supervisor_given && !policy.supervisor_path.empty()) {
    args->supervisor = policy.supervisor_path;
  }
}

}  // namespace pilot::job
