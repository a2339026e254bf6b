#include "supervisor/work_on_nodes.h"

#include <unistd.h>

#include <algorithm>

#include "core/base/strings.h"
#include "core/records/srun_lines.h"
#include "supervisor/workload_env.h"

namespace pilot::supervisor {

std::vector<std::string> FailedNodesOf(const std::string& srun_stderr) {
  std::vector<std::string> nodes;
  for (std::string_view line : SplitLines(srun_stderr)) {
    if (auto t = pilot::ParseSrunTaskLine(std::string(line))) {
      if (std::find(nodes.begin(), nodes.end(), t->node) == nodes.end()) nodes.push_back(t->node);
    }
  }
  return nodes;
}

std::string FindInPath(const std::vector<std::string>& env, const std::string& name) {
  const std::string path = EnvValue(env, "PATH");
  size_t start = 0;
  for (size_t i = 0; i <= path.size(); ++i) {
    if (i < path.size() && path[i] != ':') continue;
    const std::string dir = path.substr(start, i - start);
    start = i + 1;
    if (dir.empty() || dir[0] != '/') continue;
    const std::string full = dir + "/" + name;
    if (access(full.c_str(), X_OK) == 0) return full;
  }
  return "";
}

std::optional<std::string> WorkFolderMissing(const WorkOnNodesInput& in,
                                             const std::function<void(const std::string&)>& log) {
  if (in.hosts.size() < 2) return std::nullopt;
  const std::string srun = FindInPath(in.env, "srun");
  if (srun.empty()) {
    log("cannot check the work folder on every node: no srun in PATH " + EnvValue(in.env, "PATH"));
    return std::nullopt;
  }
  job::CommandSpec spec;
  spec.argv = {srun, "--nodes=" + std::to_string(in.hosts.size()), "--ntasks-per-node=1",
               "--ntasks=" + std::to_string(in.hosts.size()), "--kill-on-bad-exit=0", "/bin/sh", "-c",
               "test -d \"$1\" && test -w \"$1\" && test -x \"$1\"", "pilot-work-check", in.work};
  spec.env = in.env;
  spec.run_as = in.run_as;
  spec.timeout_seconds = in.timeout_seconds;
  Result<job::CommandResult> r = job::RunCommand(spec);
  if (!r.ok()) {
    log("cannot check the work folder on every node: " + r.status().Message());
    return std::nullopt;
  }
  if (r->Succeeded()) return std::nullopt;
  const std::vector<std::string> nodes = FailedNodesOf(r->err);
  if (nodes.empty()) {
    log("cannot check the work folder on every node: srun " + r->Describe(spec.timeout_seconds) +
        (r->err.empty() ? "" : ": " + std::string(Trim(r->err)).substr(0, 300)));
    return std::nullopt;
  }
  return "the work folder " + in.work + " is not a folder the job's user can write on " + Join(nodes, ", ") +
         ": a pilot across nodes needs it on a file system every node of the job shares (work_root, "
         "pilot.conf(5))";
}

}  // namespace pilot::supervisor
