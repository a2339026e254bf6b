// The hardware catalog (etc/hardware.toml): GPU types a site can offer,
// with the figures the verdict's hardware fit and budget use.
//
// Format (TOML; documented in pilot.conf(5), section HARDWARE CATALOG):
//   currency = "USD"
//   [gpu.H100-80]
//   memory_bytes = 85520809984
//   hbm_tb_per_s = 3.35
//   bf16_tflops = 989
//   link = "NVLink 4"
//   link_gb_per_s = 900
//   stack = "cuda"            # "cuda" | "rocm"
//   price_per_gpu_hour = 3.00
//   source = "..."            # where the figures come from
//   as_of = "2026-11"
//   example = true            # figures are examples, not the site's own
// Loading is strict (unknown keys, wrong types, out-of-range values:
// "FILE:LINE: gpu.NAME.key: problem"). The keys of a [gpu.NAME] section, with
// their bounds, are one field list in hardware.cc (core/records/record.h), which
// drives both the reader and KnownHardwareKeys().
//
// Thread-safety: plain values.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/base/status.h"

namespace pilot {

struct GpuType {
  std::string name;               // "[A-Za-z0-9._-]+", e.g. "H100-80"
  int64_t memory_bytes = 0;       // device memory usable by a process
  double hbm_tb_per_s = 0;        // memory bandwidth, TB/s (1e12 B/s)
  double bf16_tflops = 0;         // dense BF16 tensor throughput
  std::string link;               // intra-node GPU link name
  double link_gb_per_s = 0;       // its bandwidth per GPU, GB/s
  std::string stack = "cuda";     // "cuda" | "rocm"
  double price_per_gpu_hour = 0;  // in the catalog's currency; 0 = unknown
  std::string source;
  std::string as_of;
  bool example = false;
};

struct HardwareCatalog {
  std::string path;
  std::string currency = "USD";
  std::vector<GpuType> gpus;  // in file order
  // The type named `name` (exact match), or nullptr.
  const GpuType* Find(const std::string& name) const;
  std::vector<std::string> Names() const;
};

// The type a device of this name is ("NVIDIA H100 80GB HBM3"): the first
// catalog name whose part before '-' ("H100" of "H100-80") occurs in it;
// nullptr when none does. How the hardware fit finds the GPU a pilot ran on
// and `pilot doctor` a node's GPUs.
const GpuType* GpuTypeOfDevice(const HardwareCatalog& cat, std::string_view device_name);

// Errors: kNotFound, kIoError, kInvalid ("FILE:LINE: key: problem";
// also "FILE: no [gpu.NAME] sections").
Result<HardwareCatalog> LoadHardwareCatalog(const std::string& path);
Result<HardwareCatalog> ParseHardwareCatalog(std::string_view text, const std::string& path);

// Keys of one [gpu.NAME] section, for the man-page check.
const std::vector<std::string>& KnownHardwareKeys();

}  // namespace pilot
