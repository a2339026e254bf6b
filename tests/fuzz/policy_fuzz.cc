// pilot.conf, the site policy (core/records/policy.h ParsePolicy).
#include "core/records/policy.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)pilot::ParsePolicy(pilot::fuzz::Text(data, size), "pilot.conf");
  return 0;
}
