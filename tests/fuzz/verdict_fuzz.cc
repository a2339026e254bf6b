// verdict.json (core/records/verdict.h ParseVerdict), read back from its own writing;
// the signatures' canonical form of what was read.
#include "core/records/verdict.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = pilot::fuzz::Text(data, size);
  pilot::fuzz::RoundTrip(
      text, [](std::string_view t) { return pilot::ParseVerdict(t); },
      [](const pilot::Verdict& v) { return pilot::VerdictToJson(v); });
  auto v = pilot::ParseVerdict(text);
  if (v.ok()) (void)pilot::CanonicalVerdict(*v);
  return 0;
}
