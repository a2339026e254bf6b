#include "spank_plugin/plugin_args.h"

#include <filesystem>

#include "core/base/strings.h"
#include "job/state_layout.h"

namespace pilot::spank {

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

bool IsValidStage(const std::string& stage) {
  return stage == "single" || stage == "node" || stage == "all";
}

std::string ResolvePilotOut(const std::string& out, const std::string& base) {
  std::filesystem::path p(out);
  if (p.is_relative()) p = std::filesystem::path(base.empty() ? "/" : base) / p;
  std::string normal = p.lexically_normal().string();
  while (normal.size() > 1 && normal.back() == '/') normal.pop_back();
  return normal;
}

std::vector<std::string> SupervisorArgv(const PluginArgs& args, const PilotRequest& request,
                                        const TaskIdentity& task, int channel_fd, int env_fd) {
  const std::string cwd = task.cwd.empty() || task.cwd[0] != '/' ? "/" : task.cwd;
  std::vector<std::string> argv = {
      args.supervisor, "--job",       std::to_string(task.job_id), "--uid",   std::to_string(task.uid),
      "--gid",         std::to_string(task.gid),                    "--policy", args.policy,
      "--state-dir",   args.state_dir, "--runner",                  args.runner,
      "--stage",       request.stage};
  if (!request.out.empty()) {
    argv.push_back("--out");
    argv.push_back(ResolvePilotOut(request.out, cwd));
  }
  for (const std::string& a : {std::string("--cwd"), cwd,
                               std::string("--channel"), std::to_string(channel_fd),
                               std::string("--job-env"), std::to_string(env_fd)}) {
    argv.push_back(a);
  }
  return argv;
}

}  // namespace pilot::spank
