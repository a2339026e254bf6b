// Device memory as the driver sees it, sampled by the supervisor while the
// workload runs: NVML (libnvidia-ml.so.1, loaded at run time, so the
// supervisor runs on machines without NVIDIA's driver too), the peak of
// "used" per device over the samples; and each device's utilization (the
// share of time a kernel ran) every 500 ms, for whether a program's GPUs
// were busy while it reported steps.
//
// Thread-safety: one sampler per thread.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "core/records/results.h"

namespace pilot::supervisor {

// The samples of the devices `list` (JobGpuList, supervisor/workload_env.h)
// names by index ("0,3"; spaces around a word are ignored, a word that names
// no device is skipped), or `all` when the list is "" (a job without GPUs
// through GRES: every device of the node).
std::vector<DeviceMemorySample> SamplesOf(const std::vector<DeviceMemorySample>& all,
                                          const std::string& list);

class DeviceMemorySampler {
 public:
  // Loads NVML and lists the devices; source() says why not when it cannot.
  DeviceMemorySampler();
  ~DeviceMemorySampler();
  DeviceMemorySampler(const DeviceMemorySampler&) = delete;
  DeviceMemorySampler& operator=(const DeviceMemorySampler&) = delete;

  // Takes one sample of every device (cheap: one driver call each).
  void Sample();
  // "nvml", or the reason there are no samples.
  const std::string& source() const { return source_; }
  const std::vector<DeviceMemorySample>& peaks() const { return peaks_; }
  // The driver's version as NVML gives it ("580.95.05"); "" without NVML.
  const std::string& driver_version() const { return driver_version_; }
  // The mean utilization (0..1) of `job_devices` (by index) over the
  // samples taken between `from` and `to`; nullopt without such samples.
  std::optional<double> MeanUtilization(std::chrono::steady_clock::time_point from,
                                        std::chrono::steady_clock::time_point to,
                                        const std::vector<DeviceMemorySample>& job_devices) const;

 private:
  struct Api;
  Api* api_ = nullptr;
  void* lib_ = nullptr;
  std::vector<void*> devices_;
  std::string source_;
  std::string driver_version_;
  std::vector<DeviceMemorySample> peaks_;
  struct UtilizationSample {
    std::chrono::steady_clock::time_point at;
    std::vector<int> gpu_percent;  // per device, -1 when not read
  };
  std::vector<UtilizationSample> utilization_;
};

}  // namespace pilot::supervisor
