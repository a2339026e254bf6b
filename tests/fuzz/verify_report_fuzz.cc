// The verify report pilot-runner verify writes for the epilog
// (core/records/verify_report.h ParseVerifyReport), read back from its own writing.
#include "core/records/verify_report.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  pilot::fuzz::RoundTrip(
      pilot::fuzz::Text(data, size), [](std::string_view t) { return pilot::ParseVerifyReport(t); },
      [](const pilot::VerifyReport& v) { return pilot::VerifyReportToJson(v); });
  return 0;
}
