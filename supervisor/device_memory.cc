#include "supervisor/device_memory.h"

#include <dlfcn.h>

#include <algorithm>

#include "core/base/strings.h"

namespace pilot::supervisor {

std::vector<DeviceMemorySample> SamplesOf(const std::vector<DeviceMemorySample>& all,
                                          const std::string& list) {
  if (Trim(list).empty()) return all;
  std::vector<DeviceMemorySample> out;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    if (comma == std::string::npos) comma = list.size();
    const std::string word(Trim(std::string_view(list).substr(start, comma - start)));
    for (const DeviceMemorySample& s : all) {
      if (std::to_string(s.index) == word) out.push_back(s);
    }
    start = comma + 1;
  }
  return out;
}
namespace {

// The few NVML declarations used (nvml.h is not installed everywhere).
struct NvmlMemory {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
using NvmlDevice = void*;
using InitFn = int (*)();
using ShutdownFn = int (*)();
using CountFn = int (*)(unsigned int*);
using HandleFn = int (*)(unsigned int, NvmlDevice*);
using MemoryFn = int (*)(NvmlDevice, NvmlMemory*);
using UuidFn = int (*)(NvmlDevice, char*, unsigned int);
struct NvmlUtilization {
  unsigned int gpu;     // percent of the last sample period a kernel ran
  unsigned int memory;  // percent of it the memory was read or written
};
using UtilizationFn = int (*)(NvmlDevice, NvmlUtilization*);
using DriverVersionFn = int (*)(char*, unsigned int);

constexpr size_t kMaxUtilizationSamples = 200000;  // one per 500 ms: over a day

}  // namespace

struct DeviceMemorySampler::Api {
  InitFn init = nullptr;
  ShutdownFn shutdown = nullptr;
  CountFn count = nullptr;
  HandleFn handle = nullptr;
  MemoryFn memory = nullptr;
  UuidFn uuid = nullptr;
  UtilizationFn utilization = nullptr;  // optional
  DriverVersionFn driver_version = nullptr;  // optional
};

DeviceMemorySampler::DeviceMemorySampler() {
  lib_ = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib_ == nullptr) {
    source_ = "unavailable: no NVIDIA driver library (libnvidia-ml.so.1)";
    return;
  }
  api_ = new Api;
  api_->init = reinterpret_cast<InitFn>(dlsym(lib_, "nvmlInit_v2"));
  api_->shutdown = reinterpret_cast<ShutdownFn>(dlsym(lib_, "nvmlShutdown"));
  api_->count = reinterpret_cast<CountFn>(dlsym(lib_, "nvmlDeviceGetCount_v2"));
  api_->handle = reinterpret_cast<HandleFn>(dlsym(lib_, "nvmlDeviceGetHandleByIndex_v2"));
  api_->memory = reinterpret_cast<MemoryFn>(dlsym(lib_, "nvmlDeviceGetMemoryInfo"));
  api_->uuid = reinterpret_cast<UuidFn>(dlsym(lib_, "nvmlDeviceGetUUID"));
  api_->utilization = reinterpret_cast<UtilizationFn>(dlsym(lib_, "nvmlDeviceGetUtilizationRates"));
  api_->driver_version = reinterpret_cast<DriverVersionFn>(dlsym(lib_, "nvmlSystemGetDriverVersion"));
  if (!api_->init || !api_->shutdown || !api_->count || !api_->handle || !api_->memory ||
      !api_->uuid) {
    source_ = "unavailable: libnvidia-ml.so.1 lacks the functions used";
    return;
  }
  if (api_->init() != 0) {
    source_ = "unavailable: nvmlInit failed";
    api_->shutdown = nullptr;
    return;
  }
  if (api_->driver_version != nullptr) {
    char version[96] = {};
    if (api_->driver_version(version, sizeof(version) - 1) == 0) driver_version_ = version;
  }
  unsigned int n = 0;
  if (api_->count(&n) != 0 || n == 0) {
    source_ = "unavailable: no devices";
    return;
  }
  for (unsigned int i = 0; i < n && i < 1024; ++i) {
    NvmlDevice d = nullptr;
    if (api_->handle(i, &d) != 0) continue;
    char uuid[96] = {};
    api_->uuid(d, uuid, sizeof(uuid));
    devices_.push_back(d);
    DeviceMemorySample s;
    s.index = static_cast<int>(i);
    s.uuid = uuid;
    peaks_.push_back(s);
  }
  source_ = devices_.empty() ? "unavailable: no device handles" : "nvml";
}

DeviceMemorySampler::~DeviceMemorySampler() {
  if (api_ != nullptr && api_->shutdown != nullptr && !devices_.empty()) api_->shutdown();
  delete api_;
  if (lib_ != nullptr) dlclose(lib_);
}

void DeviceMemorySampler::Sample() {
  for (size_t i = 0; i < devices_.size(); ++i) {
    NvmlMemory m{};
    if (api_->memory(devices_[i], &m) != 0) continue;
    peaks_[i].total_bytes = static_cast<int64_t>(m.total);
    peaks_[i].peak_used_bytes = std::max(peaks_[i].peak_used_bytes, static_cast<int64_t>(m.used));
  }
  const auto now = std::chrono::steady_clock::now();
  if (api_ == nullptr || api_->utilization == nullptr || devices_.empty() ||
      utilization_.size() >= kMaxUtilizationSamples ||
      (!utilization_.empty() && now - utilization_.back().at < std::chrono::milliseconds(500))) {
    return;
  }
  UtilizationSample u;
  u.at = now;
  u.gpu_percent.assign(devices_.size(), -1);
  for (size_t i = 0; i < devices_.size(); ++i) {
    NvmlUtilization r{};
    if (api_->utilization(devices_[i], &r) == 0) u.gpu_percent[i] = static_cast<int>(r.gpu);
  }
  utilization_.push_back(std::move(u));
}

std::optional<double> DeviceMemorySampler::MeanUtilization(
    std::chrono::steady_clock::time_point from, std::chrono::steady_clock::time_point to,
    const std::vector<DeviceMemorySample>& job_devices) const {
  double sum = 0;
  int n = 0;
  for (const UtilizationSample& u : utilization_) {
    if (u.at < from || u.at > to) continue;
    for (size_t i = 0; i < peaks_.size() && i < u.gpu_percent.size(); ++i) {
      const bool job = std::any_of(job_devices.begin(), job_devices.end(),
                                   [&](const DeviceMemorySample& d) { return d.index == peaks_[i].index; });
      if (!job || u.gpu_percent[i] < 0) continue;
      sum += u.gpu_percent[i];
      ++n;
    }
  }
  if (n == 0) return std::nullopt;
  return sum / n / 100.0;
}

}  // namespace pilot::supervisor
