// results.json (core/records/results.h ParseResults), read back from its own writing.
#include "core/records/results.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  pilot::fuzz::RoundTrip(
      pilot::fuzz::Text(data, size),
      [](std::string_view t) { return pilot::ParseResults(std::string(t)); },
      [](const pilot::Results& r) { return pilot::ResultsToJson(r); });
  return 0;
}
