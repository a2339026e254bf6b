// hardware.toml, the hardware catalog (core/hardware.h ParseHardwareCatalog).
#include "core/hardware.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)pilot::ParseHardwareCatalog(pilot::fuzz::Text(data, size), "hardware.toml");
  return 0;
}
