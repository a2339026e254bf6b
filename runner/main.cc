// pilot-runner: the pilot itself. Thin main: parse, dispatch, and make sure
// no exception leaves the process (exit status 4 when one tries).
#include <c10/util/Exception.h>

#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pilot/version.h"
#include "core/base/guarded_main.h"
#include "core/base/json_util.h"
#include "core/records/exit_codes.h"
#include "runner/app/cli.h"
#include "runner/app/fatal_signal.h"
#include "runner/app/pilot.h"
#include "runner/ckpt/program_verify.h"
#include "runner/ckpt/verify.h"
#include "runner/train/device.h"

namespace pilot::runner {
namespace {

void PrintVersions(bool json) {
  Versions v = CollectVersions();
  v.runner = PILOT_VERSION_STRING;
  if (json) {
    nlohmann::ordered_json j = {{"runner", v.runner},           {"libtorch", v.torch},
                                {"cuda_runtime", v.cuda_runtime}, {"cuda_driver", v.cuda_driver},
                                {"cudnn", v.cudnn},             {"nccl", v.nccl},
                                {"devices", v.devices}};
    std::printf("%s\n", DumpJson(j, 2).c_str());
    return;
  }
  std::printf("pilot-runner %s\nlibtorch %s\n", v.runner.c_str(), v.torch.c_str());
  if (!v.cuda_runtime.empty()) {
    std::printf("cuda runtime %s, driver %s, cudnn %s, nccl %s\n", v.cuda_runtime.c_str(),
                v.cuda_driver.c_str(), v.cudnn.c_str(), v.nccl.c_str());
  }
  for (const auto& d : v.devices) std::printf("device %s\n", d.c_str());
}

int Dispatch(const std::vector<std::string>& args) {
  Result<Command> cmd = ParseCommandLine(args);
  if (!cmd.ok()) {
    std::fprintf(stderr, "%s\n", cmd.status().ToString().c_str());
    return kExitUsage;
  }
  switch (cmd->kind) {
    case Command::kRun:
      return RunPilot(cmd->run);
    case Command::kVerify:
      return cmd->verify.program_checkpoint.empty() ? RunVerify(cmd->verify)
                                                    : RunProgramVerify(cmd->verify);
    case Command::kVersions:
      PrintVersions(cmd->json);
      return kExitOk;
    case Command::kVersion:
      std::printf("pilot-runner %s\n", PILOT_VERSION_STRING);
      return kExitOk;
    case Command::kHelp:
      std::printf("%s", cmd->help.c_str());
      return kExitOk;
  }
  return kExitUsage;
}

}  // namespace
}  // namespace pilot::runner

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  pilot::runner::InstallFatalSignalReport();
  return pilot::GuardedMain("", pilot::kExitError, [&] {
    try {
      return pilot::runner::Dispatch(args);
    } catch (const c10::Error& e) {
      // libtorch's own type: its message without the C++ backtrace.
      std::fprintf(stderr, "pilot: libtorch: %s\n", e.what_without_backtrace());
      return static_cast<int>(pilot::kExitError);
    }
  });
}
