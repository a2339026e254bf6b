#include "spank_plugin/plugin_args.h"

#include <filesystem>

#include "core/base/strings.h"
#include "job/state_layout.h"

namespace pilot::spank {

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
