// lock.json (core/records/lock.h ParseLock), read back from its own writing.
#include "core/records/lock.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  pilot::fuzz::RoundTrip(
      pilot::fuzz::Text(data, size), [](std::string_view t) { return pilot::ParseLock(t); },
      [](const pilot::Lock& l) { return pilot::LockToJson(l); });
  return 0;
}
