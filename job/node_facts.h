// What a node is, as root's parts read it: Yama's ptrace scope (the
// supervisor records it in results.json; `pilot doctor` checks it) and the
// GPU inventory through nvidia-smi, NVML's own tool (the prolog pins it into
// the lock; `pilot doctor` looks each GPU up in the hardware catalog). One
// reader each, so what a node check says is what a pilot will record.
//
// Thread-safety: plain functions; GpuInventory forks (RunCommand).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/base/status.h"
#include "core/records/lock.h"
#include "job/subprocess.h"

namespace pilot::job {

inline constexpr char kPtraceScopeFile[] = "/proc/sys/kernel/yama/ptrace_scope";

// kernel.yama.ptrace_scope (0..3) read from `file`, or -1 without Yama (no
// such file) or when it does not hold one digit 0..3.
int PtraceScope(const std::string& file = kPtraceScopeFile);

// The GPUs nvidia-smi lists, and the driver's version.
struct GpuInventory {
  std::vector<LockGpu> gpus;
  std::string driver_version;  // "" when no GPU was listed
};

// nvidia-smi's answer to the query GpuInventoryArgv() asks, one line per
// GPU "index, name, uuid, memory MiB, driver"; a line of fewer fields is
// skipped.
GpuInventory ParseGpuInventory(std::string_view csv);

// The arguments after nvidia-smi's path.
std::vector<std::string> GpuInventoryArgv();

// nvidia-smi run as the caller with a clean environment and `timeout`
// seconds, through `run` (RunCommand, or a test's stand-in). Errors:
// kUnavailable when nvidia-smi is not installed (a node without NVIDIA's
// driver), kIoError naming how it ended otherwise.
Result<GpuInventory> ReadGpuInventory(const CommandRunner& run, double timeout_seconds);

}  // namespace pilot::job
