// What the runner asks of the device: memory statistics, timing, versions.
// The CUDA parts are compiled only when the build found the CUDA toolkit
// (PILOT_RUNNER_CUDA); NVML is loaded at run time (dlopen), so neither the
// build nor a CPU machine needs it.
//
// Memory, as the seed asks, around one step:
//   ResetPeak(dev); ...zero_grad, forward, backward, optimizer...;
//   Synchronize(dev); stats = Snapshot(dev, step);
// On CUDA: allocator peak allocated/reserved (tensors), cudaMemGetInfo's
// device used, NVML's figure for this process, runtime overhead = device
// used - reserved, allocator retries and OOMs. On the CPU: the process's
// peak resident set (VmHWM, reset by ResetPeak through clear_refs where the
// kernel allows) and current resident set (VmRSS).
//
// Thread-safety: call from the training thread.
#pragma once

#include <ATen/ATen.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/records/results.h"

namespace pilot::runner {

// True when this binary has CUDA support compiled in and a device is visible.
bool CudaAvailable();
// "cpu" / "cuda": resolves training.device ("auto" prefers CUDA).
// Errors: kInvalid ("cuda" asked but not available).
Result<at::Device> ResolveDevice(const std::string& wanted);

void Synchronize(const at::Device& dev);
// The device's memory (cudaMemGetInfo's total); nullopt on a CPU.
std::optional<int64_t> DeviceTotalBytes(const at::Device& dev);
// training.memory_cap_mb on a CUDA device: limits the caching allocator so
// that the process's device memory, the runtime's own included (as it
// stands when called), stays within cap_bytes; an allocation past it fails
// with out-of-memory, as on a device of that size (the allocator first
// returns its free cached memory). Nothing on a CPU.
Status LimitDeviceMemory(const at::Device& dev, int64_t cap_bytes);
// Processes the runner starts can share a device with it: the fresh restore
// process starts while the reference process still holds its context, and
// in `--stage all` the ranks start while the single stage's process does.
// The starting process puts DeviceBaselineFor(its device) in the children's
// environment under kDeviceBaselineEnv ("HOST/PCI-BUS-ID=BYTES": what was in
// use on that device then); a child on the same device (same host and PCI
// bus id, which does not depend on CUDA_VISIBLE_DEVICES) leaves it out of
// Snapshot's device figures, so they are its own. "" on the CPU.
inline constexpr const char* kDeviceBaselineEnv = "PILOT_DEVICE_BASELINE";
std::string DeviceBaselineFor(const at::Device& dev);
void ResetPeak(const at::Device& dev);
MemoryStats Snapshot(const at::Device& dev, int64_t step);
// The allocator's peak allocated bytes since ResetPeak, without waiting for
// the device (the allocator counts on the host's timeline). CUDA only.
std::optional<int64_t> PeakAllocatedSoFar(const at::Device& dev);
// Returns cached blocks to the driver (CUDA) so another process can use them.
void ReleaseCachedMemory(const at::Device& dev);
std::string DeviceName(const at::Device& dev);
Versions CollectVersions();

// Makes this process run with the allocator settings `conf`
// (PYTORCH_ALLOC_CONF, and PYTORCH_CUDA_ALLOC_CONF for torch before 2.9).
// torch reads them once, no later than its first device allocation, so a
// process whose environment differs re-executes itself with them set (the
// processes it starts inherit them); "" keeps the environment's. Returns
// the settings in effect ("" = torch's defaults).
// Errors: kInternal when the re-execution fails or did not take effect.
Result<std::string> ApplyAllocConf(const std::string& conf);

// True for c10's out-of-memory errors and CUDA/allocator OOM messages.
bool IsOutOfMemory(const std::exception& e);

// Marks points of a step on the device's timeline (CUDA events; the host
// clock on the CPU, where execution is synchronous) and measures between
// them. Reading a mark waits for it to complete.
class StepTimer {
 public:
  StepTimer(const at::Device& dev, int marks);
  ~StepTimer();
  void Mark(int i);
  double ElapsedMs(int from, int to);
  // From mark `from` of this timer to mark `to` of `later` (same device).
  double ElapsedMsTo(int from, StepTimer& later, int to);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

inline double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace pilot::runner
