// Device queries: with alloc_trace.cc, the only file that speaks CUDA and
// NVML directly.
#include "runner/train/device.h"

#include <dlfcn.h>
#include <unistd.h>

#include <torch/version.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <new>
#include <fstream>
#include <sstream>

#ifdef PILOT_RUNNER_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime_api.h>
#endif

#include "core/base/strings.h"
#include "runner/train/alloc_trace.h"
#include "runner/train/format.h"

namespace pilot::runner {
namespace {

// "VmHWM:    1234 kB" -> bytes.
std::optional<int64_t> ProcStatusBytes(const char* key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  const size_t n = std::strlen(key);
  while (std::getline(f, line)) {
    if (line.compare(0, n, key) == 0 && line.size() > n && line[n] == ':') {
      return static_cast<int64_t>(std::stoll(line.substr(n + 1))) * 1024;
    }
  }
  return std::nullopt;
}

#ifdef PILOT_RUNNER_CUDA
// NVML, loaded on first use. Only the calls needed for this process's use.
struct Nvml {
  using InitFn = int (*)();
  using HandleFn = int (*)(const char*, void**);
  struct ProcInfo {
    unsigned int pid;
    unsigned long long used;
    unsigned int gpu_instance;
    unsigned int compute_instance;
  };
  using ProcsFn = int (*)(void*, unsigned int*, ProcInfo*);
  bool ok = false;
  HandleFn by_pci = nullptr;
  ProcsFn procs = nullptr;

  Nvml() {
    void* lib = ::dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return;
    auto init = reinterpret_cast<InitFn>(::dlsym(lib, "nvmlInit_v2"));
    by_pci = reinterpret_cast<HandleFn>(::dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2"));
    procs = reinterpret_cast<ProcsFn>(::dlsym(lib, "nvmlDeviceGetComputeRunningProcesses_v3"));
    ok = init && by_pci && procs && init() == 0;
  }

  std::optional<int64_t> ProcessBytes(int device) {
    if (!ok) return std::nullopt;
    char bus[64] = {0};
    if (cudaDeviceGetPCIBusId(bus, sizeof(bus), device) != cudaSuccess) return std::nullopt;
    void* handle = nullptr;
    if (by_pci(bus, &handle) != 0) return std::nullopt;
    ProcInfo info[64];
    unsigned int count = 64;
    if (procs(handle, &count, info) != 0) return std::nullopt;
    const unsigned int me = static_cast<unsigned int>(::getpid());
    for (unsigned int i = 0; i < count; ++i) {
      if (info[i].pid == me) return static_cast<int64_t>(info[i].used);
    }
    return std::nullopt;  // e.g. another PID namespace
  }
};

Nvml& GetNvml() {
  static Nvml nvml;
  return nvml;
}
#endif

}  // namespace

bool CudaAvailable() {
#ifdef PILOT_RUNNER_CUDA
  return c10::cuda::device_count() > 0;
#else
  return false;
#endif
}

Result<at::Device> ResolveDevice(const std::string& wanted) {
  if (wanted == "cpu") return at::Device(at::kCPU);
  if (wanted == "cuda" || wanted == "auto") {
    // The current device: 0, or a rank's own GPU (its local rank, made
    // current before the session is built).
#ifdef PILOT_RUNNER_CUDA
    if (CudaAvailable()) return at::Device(at::kCUDA, c10::cuda::current_device());
#endif
    if (wanted == "cuda") {
      return Status::Invalid("training.device", "\"cuda\" asked for, but no CUDA device is usable")
          .WithHint("run on a GPU node, or set training.device = \"cpu\"");
    }
    return at::Device(at::kCPU);
  }
  return Status::Invalid("training.device", "unknown \"" + wanted + "\"");
}

std::optional<int64_t> DeviceTotalBytes(const at::Device& dev) {
#ifdef PILOT_RUNNER_CUDA
  if (dev.is_cuda()) {
    c10::cuda::CUDAGuard guard(dev.index());
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) return static_cast<int64_t>(total_b);
  }
#else
  (void)dev;
#endif
  return std::nullopt;
}

void Synchronize(const at::Device& dev) {
#ifdef PILOT_RUNNER_CUDA
  if (dev.is_cuda()) c10::cuda::device_synchronize();
#else
  (void)dev;
#endif
}

void ResetPeak(const at::Device& dev) {
#ifdef PILOT_RUNNER_CUDA
  if (dev.is_cuda()) {
    c10::cuda::CUDACachingAllocator::resetPeakStats(dev.index());
    return;
  }
#endif
  (void)dev;
  // Linux: writing 5 to clear_refs resets VmHWM to the current RSS.
  std::ofstream f("/proc/self/clear_refs");
  if (f) f << "5";
}

#ifdef PILOT_RUNNER_CUDA
namespace {

int IndexOf(const at::Device& dev) { return dev.has_index() ? dev.index() : c10::cuda::current_device(); }

// "host/pci-bus-id": the device, whatever CUDA_VISIBLE_DEVICES says, and
// not a device of the same bus id on another node.
std::string DeviceKey(int index) {
  char id[64] = {0};
  if (cudaDeviceGetPCIBusId(id, static_cast<int>(sizeof(id)) - 1, index) != cudaSuccess) return "";
  std::string s = AsciiLower(id);
  char host[256] = {0};
  ::gethostname(host, sizeof(host) - 1);
  return std::string(host) + "/" + s;
}

std::optional<int64_t> UsedOnDevice(int index) {
  c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(index));
  size_t free_b = 0, total_b = 0;
  if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) return std::nullopt;
  return static_cast<int64_t>(total_b - free_b);
}

// What the starting process held on this device, when the environment says
// so for this device's key. Neither changes during the process: worked out
// once per device, not at every snapshot.
int64_t DeviceBaseline(int index) {
  static std::map<int, int64_t> known;
  auto it = known.find(index);
  if (it != known.end()) return it->second;
  int64_t bytes = 0;
  if (const char* v = std::getenv(kDeviceBaselineEnv)) {
    const std::string s(v);
    const size_t eq = s.rfind('=');
    if (eq != std::string::npos && s.substr(0, eq) == DeviceKey(index)) {
      bytes = std::max<int64_t>(0, std::strtoll(s.c_str() + eq + 1, nullptr, 10));
    }
  }
  known.emplace(index, bytes);
  return bytes;
}

}  // namespace
#endif

Status LimitDeviceMemory(const at::Device& dev, int64_t cap_bytes) {
#ifdef PILOT_RUNNER_CUDA
  if (dev.is_cuda() && cap_bytes > 0) {
    const int index = IndexOf(dev);
    c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(index));
    // The allocator sets itself up at its first allocation.
    (void)at::empty({1}, at::TensorOptions().dtype(at::kByte).device(dev));
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess || total_b == 0) {
      return Status::IoError("training.memory_cap_mb", "cannot read the device's memory");
    }
    // What the runtime holds outside the allocator (its context, modules),
    // less what other processes of the pilot held on this device at start.
    const auto stats =
        c10::cuda::CUDACachingAllocator::getDeviceStats(static_cast<c10::DeviceIndex>(index));
    const int64_t runtime = std::max<int64_t>(
        0, static_cast<int64_t>(total_b - free_b) - DeviceBaseline(index) - stats.reserved_bytes[0].current);
    const int64_t allowed = std::min<int64_t>(cap_bytes, static_cast<int64_t>(total_b)) - runtime;
    if (allowed <= 0) {
      return Status::Invalid("training.memory_cap_mb",
                             FormatBytes(static_cast<double>(cap_bytes)) + " is less than the CUDA runtime's own " +
                                 FormatBytes(static_cast<double>(runtime)))
          .WithHint("raise the cap, or set it to 0 for the device's memory");
    }
    c10::cuda::CUDACachingAllocator::setMemoryFraction(
        static_cast<double>(allowed) / static_cast<double>(total_b), static_cast<c10::DeviceIndex>(index));
    NoteAllocTrace("limit " + std::to_string(allowed) + " runtime " + std::to_string(runtime));
  }
#else
  (void)dev;
  (void)cap_bytes;
#endif
  return Status::Ok();
}

std::string DeviceBaselineFor(const at::Device& dev) {
#ifdef PILOT_RUNNER_CUDA
  if (dev.is_cuda()) {
    const int index = IndexOf(dev);
    const std::string id = DeviceKey(index);
    const std::optional<int64_t> used = UsedOnDevice(index);
    if (!id.empty() && used) return id + "=" + std::to_string(*used);
  }
#else
  (void)dev;
#endif
  return "";
}

std::optional<int64_t> PeakAllocatedSoFar(const at::Device& dev) {
#ifdef PILOT_RUNNER_CUDA
  if (dev.is_cuda()) {
    return c10::cuda::CUDACachingAllocator::getDeviceStats(dev.index()).allocated_bytes[0].peak;
  }
#endif
  (void)dev;
  return std::nullopt;
}

MemoryStats Snapshot(const at::Device& dev, int64_t step) {
  MemoryStats m;
  m.step = step;
  m.device = dev.is_cuda() ? "cuda" : "cpu";
  m.process_peak_rss_bytes = ProcStatusBytes("VmHWM");
  m.process_rss_bytes = ProcStatusBytes("VmRSS");
#ifdef PILOT_RUNNER_CUDA
  if (dev.is_cuda()) {
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(dev.index());
    m.peak_allocated_bytes = stats.allocated_bytes[0].peak;
    m.peak_reserved_bytes = stats.reserved_bytes[0].peak;
    m.alloc_retries = stats.num_alloc_retries;
    m.ooms = stats.num_ooms;
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) {
      m.device_used_bytes =
          std::max<int64_t>(0, static_cast<int64_t>(total_b - free_b) - DeviceBaseline(IndexOf(dev)));
      m.device_total_bytes = static_cast<int64_t>(total_b);
      m.runtime_overhead_bytes = *m.device_used_bytes - stats.reserved_bytes[0].current;
    }
    m.process_device_bytes = GetNvml().ProcessBytes(dev.index());
  }
#endif
  return m;
}

void ReleaseCachedMemory(const at::Device& dev) {
#ifdef PILOT_RUNNER_CUDA
  NoteAllocTrace("empty_cache");
  if (dev.is_cuda()) c10::cuda::CUDACachingAllocator::emptyCache();
#else
  (void)dev;
#endif
}

std::string DeviceName(const at::Device& dev) {
#ifdef PILOT_RUNNER_CUDA
  if (dev.is_cuda()) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, dev.index()) == cudaSuccess) return prop.name;
    return "cuda";
  }
#endif
  (void)dev;
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("model name", 0) == 0) {
      auto p = line.find(':');
      if (p != std::string::npos) return line.substr(line.find_first_not_of(" \t", p + 1));
    }
  }
  return "cpu";
}

Versions CollectVersions() {
  Versions v;
  v.torch = TORCH_VERSION;
#ifdef PILOT_RUNNER_CUDA
  int rt = 0, drv = 0;
  if (cudaRuntimeGetVersion(&rt) == cudaSuccess) {
    v.cuda_runtime = std::to_string(rt / 1000) + "." + std::to_string(rt % 1000 / 10);
  }
  if (cudaDriverGetVersion(&drv) == cudaSuccess && drv > 0) {
    v.cuda_driver = std::to_string(drv / 1000) + "." + std::to_string(drv % 1000 / 10);
  }
  try {
    if (CudaAvailable()) {
      const long cudnn = at::detail::getCUDAHooks().versionCuDNN();
      if (cudnn > 0) v.cudnn = std::to_string(cudnn);
    }
  } catch (const std::exception&) {
  }
  using NcclVersionFn = int (*)(int*);
  void* sym = ::dlsym(RTLD_DEFAULT, "ncclGetVersion");
  void* lib = sym ? nullptr : ::dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  if (!sym && lib) sym = ::dlsym(lib, "ncclGetVersion");
  int nccl = 0;
  if (sym && reinterpret_cast<NcclVersionFn>(sym)(&nccl) == 0 && nccl > 0) {
    // NCCL >= 2.9 encodes major*10000 + minor*100 + patch.
    v.nccl = std::to_string(nccl / 10000) + "." + std::to_string(nccl / 100 % 100) + "." +
             std::to_string(nccl % 100);
  }
  const int n = CudaAvailable() ? c10::cuda::device_count() : 0;
  for (int i = 0; i < n; ++i) v.devices.push_back(DeviceName(at::Device(at::kCUDA, i)));
#endif
  if (v.devices.empty()) v.devices.push_back(DeviceName(at::Device(at::kCPU)));
  return v;
}

Result<std::string> ApplyAllocConf(const std::string& conf) {
  auto env = [](const char* name) {
    const char* v = std::getenv(name);
    return v ? std::string(v) : std::string();
  };
  static constexpr const char* kGuard = "PILOT_ALLOC_CONF_APPLIED";
  if (conf.empty()) {
    const std::string now = env("PYTORCH_ALLOC_CONF");
    return now.empty() ? env("PYTORCH_CUDA_ALLOC_CONF") : now;
  }
  if (env("PYTORCH_ALLOC_CONF") == conf && env("PYTORCH_CUDA_ALLOC_CONF") == conf) return conf;
  if (env(kGuard) == conf) {
    return Status::Internal("training.alloc_conf", "the re-executed process lost its environment");
  }
  // argv as the kernel has it: NUL-separated.
  std::ifstream f("/proc/self/cmdline", std::ios::binary);
  std::string raw((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::vector<std::string> args;
  for (size_t at = 0; at < raw.size();) {
    const size_t end = raw.find('\0', at);
    args.push_back(raw.substr(at, end == std::string::npos ? std::string::npos : end - at));
    if (end == std::string::npos) break;
    at = end + 1;
  }
  if (args.empty()) return Status::Internal("training.alloc_conf", "cannot read /proc/self/cmdline");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  ::setenv("PYTORCH_ALLOC_CONF", conf.c_str(), 1);
  ::setenv("PYTORCH_CUDA_ALLOC_CONF", conf.c_str(), 1);
  ::setenv(kGuard, conf.c_str(), 1);
  std::fflush(nullptr);
  ::execv("/proc/self/exe", argv.data());
  return Status::Internal("training.alloc_conf",
                          std::string("cannot re-execute with the allocator settings: ") +
                              std::strerror(errno));
}

bool IsOutOfMemory(const std::exception& e) {
  const char* msg = e.what();
  // CPU: libtorch's allocator says "can't allocate memory" (ENOMEM) or "not
  // enough memory"; plain new throws std::bad_alloc. They happen for real
  // under a memory limit (ulimit -v, a job's memory cgroup).
  if (dynamic_cast<const std::bad_alloc*>(&e) != nullptr) return true;
  return std::strstr(msg, "out of memory") != nullptr ||
         std::strstr(msg, "not enough memory") != nullptr ||
         std::strstr(msg, "can't allocate memory") != nullptr ||
         std::strstr(msg, "CUDA error: out of memory") != nullptr ||
         std::strstr(msg, "OutOfMemoryError") != nullptr;
}

// ---- StepTimer -------------------------------------------------------------------

struct StepTimer::Impl {
  bool cuda = false;
  std::vector<std::chrono::steady_clock::time_point> host;
#ifdef PILOT_RUNNER_CUDA
  std::vector<std::unique_ptr<at::cuda::CUDAEvent>> events;
#endif
};

StepTimer::StepTimer(const at::Device& dev, int marks) : impl_(new Impl) {
  impl_->host.resize(marks);
#ifdef PILOT_RUNNER_CUDA
  impl_->cuda = dev.is_cuda();
  if (impl_->cuda) {
    for (int i = 0; i < marks; ++i) {
      impl_->events.push_back(std::make_unique<at::cuda::CUDAEvent>(cudaEventDefault));
    }
  }
#else
  (void)dev;
#endif
}

StepTimer::~StepTimer() = default;

void StepTimer::Mark(int i) {
#ifdef PILOT_RUNNER_CUDA
  if (impl_->cuda) {
    impl_->events[i]->record();
    return;
  }
#endif
  impl_->host[i] = std::chrono::steady_clock::now();
}

double StepTimer::ElapsedMs(int from, int to) {
#ifdef PILOT_RUNNER_CUDA
  if (impl_->cuda) {
    impl_->events[to]->synchronize();
    return impl_->events[from]->elapsed_time(*impl_->events[to]);
  }
#endif
  return std::chrono::duration<double, std::milli>(impl_->host[to] - impl_->host[from]).count();
}

double StepTimer::ElapsedMsTo(int from, StepTimer& later, int to) {
#ifdef PILOT_RUNNER_CUDA
  if (impl_->cuda && later.impl_->cuda) {
    later.impl_->events[to]->synchronize();
    return impl_->events[from]->elapsed_time(*later.impl_->events[to]);
  }
#endif
  return std::chrono::duration<double, std::milli>(later.impl_->host[to] - impl_->host[from]).count();
}

}  // namespace pilot::runner
