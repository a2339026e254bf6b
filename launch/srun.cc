#include "launch/srun.h"

namespace pilot::launch {
namespace {

// Each task's shell (see TorchrunTaskCommand).
constexpr const char* kTorchrunFromSrun =
    "export RANK=\"$SLURM_PROCID\" LOCAL_RANK=\"$SLURM_LOCALID\" GROUP_RANK=\"$SLURM_NODEID\" "
    "NODE_RANK=\"$SLURM_NODEID\"; "
    "if [ -n \"$SLURM_LAUNCH_NODE_IPADDR\" ]; then export "
    "MASTER_ADDR=\"$SLURM_LAUNCH_NODE_IPADDR\"; fi; "
    "if [ -n \"$PILOT_METRICS\" ]; then exec 3>&1 1>&2; export PILOT_METRICS=/proc/self/fd/3; fi; "
    "exec \"$@\"";

}  // namespace

std::vector<std::string> SrunStepArgv(const SrunStep& step) {
  std::vector<std::string> a = {step.srun};
  if (step.nodes > 0) a.push_back("--nodes=" + std::to_string(step.nodes));
  a.push_back("--ntasks=" + std::to_string(step.tasks));
  if (step.nodes > 0) {
    a.push_back("--ntasks-per-node=" + std::to_string(step.tasks / step.nodes));
    a.push_back("--distribution=block");
  }
  a.push_back("--kill-on-bad-exit=1");
  a.push_back("--wait=60");
  if (step.label) a.push_back("--label");
  a.insert(a.end(), step.options.begin(), step.options.end());
  a.insert(a.end(), step.command.begin(), step.command.end());
  return a;
}

std::vector<std::string> TorchrunTaskCommand(const std::vector<std::string>& command) {
  std::vector<std::string> a = {"/bin/sh", "-c", kTorchrunFromSrun, "pilot-rank"};
  a.insert(a.end(), command.begin(), command.end());
  return a;
}

std::optional<FailedTask> FirstFailedTask(
    const std::vector<SrunTaskLine>& lines, int passes,
    const std::function<bool(int pass, const SrunTaskLine& line, int task)>& accept) {
  for (int pass = 0; pass < passes; ++pass) {
    for (const SrunTaskLine& l : lines) {
      for (int t : l.tasks) {
        if (accept(pass, l, t)) return FailedTask{&l, t};
      }
    }
  }
  return std::nullopt;
}

std::optional<FailedTask> FailedTaskBySrunWords(const std::vector<SrunTaskLine>& lines) {
  return FirstFailedTask(lines, 3, [](int pass, const SrunTaskLine& l, int task) {
    if (task != l.tasks.front()) return false;
    const bool terminated = l.what == "Terminated";
    const bool exited = l.what.rfind("Exited", 0) == 0;
    return !((pass == 0 && (terminated || exited)) || (pass == 1 && terminated));
  });
}

}  // namespace pilot::launch
