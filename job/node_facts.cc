#include "job/node_facts.h"

#include <cstdlib>

#include "core/base/atomic_file.h"
#include "core/base/split.h"
#include "core/base/strings.h"

namespace pilot::job {

int PtraceScope(const std::string& file) {
  Result<std::string> text = ReadFileLimited(file, 64);
  if (!text.ok()) return -1;
  const std::string_view v = Trim(*text);
  return v.size() == 1 && v[0] >= '0' && v[0] <= '3' ? v[0] - '0' : -1;
}

GpuInventory ParseGpuInventory(std::string_view csv) {
  GpuInventory inv;
  for (std::string_view line : SplitLines(csv)) {
    std::vector<std::string> f;
    for (std::string_view cell : SplitOn(line, ',')) f.emplace_back(Trim(cell));
    if (f.size() < 5) continue;
    LockGpu g;
    g.index = std::atoi(f[0].c_str());
    g.name = f[1];
    g.uuid = f[2];
    g.memory_bytes = std::atoll(f[3].c_str()) * (int64_t{1} << 20);  // MiB
    inv.gpus.push_back(g);
    inv.driver_version = f[4];
  }
  return inv;
}

std::vector<std::string> GpuInventoryArgv() {
  return {"--query-gpu=index,name,uuid,memory.total,driver_version",
          "--format=csv,noheader,nounits"};
}

Result<GpuInventory> ReadGpuInventory(const CommandRunner& run, double timeout_seconds) {
  const std::string smi = FindExecutable("nvidia-smi");
  if (smi.empty()) return Status::Unavailable("nvidia-smi", "not installed");
  CommandSpec spec;
  spec.argv = {smi};
  for (std::string& a : GpuInventoryArgv()) spec.argv.push_back(std::move(a));
  spec.env = CleanEnvironment();
  spec.timeout_seconds = timeout_seconds;
  PILOT_ASSIGN_OR_RETURN(CommandResult r, run(spec));
  if (!r.Succeeded()) {
    return Status::IoError("nvidia-smi", r.Describe(timeout_seconds) +
                                             (r.err.empty() ? "" : ": " + FirstLine(r.err)));
  }
  return ParseGpuInventory(r.out);
}

}  // namespace pilot::job
