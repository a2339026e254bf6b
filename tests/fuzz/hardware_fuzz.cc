// hardware.toml, the hardware catalog (core/records/hardware.h ParseHardwareCatalog).
#include "core/records/hardware.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)pilot::ParseHardwareCatalog(pilot::fuzz::Text(data, size), "hardware.toml");
  return 0;
}
