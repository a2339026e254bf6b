// A program's standard error read for the error that ended it and the
// frameworks' hints (core/records/python_error.h): any bytes, the whole
// text and, as an `srun --label` step of a few tasks (the first byte says
// how many), one task's lines. What comes back is valid UTF-8 within its
// caps.
#include "core/base/utf8.h"
#include "core/records/python_error.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

void Check(const std::optional<pilot::PythonError>& e) {
  if (!e) return;
  using pilot::fuzz::Require;
  Require(pilot::IsValidUtf8(e->type) && pilot::IsValidUtf8(e->message) &&
              pilot::IsValidUtf8(e->file) && pilot::IsValidUtf8(e->function) &&
              pilot::IsValidUtf8(e->source) && pilot::IsValidUtf8(e->caller_file) &&
              pilot::IsValidUtf8(e->caller_function),
          "a field is not UTF-8", e->message);
  Require(e->message.size() <= pilot::kMaxErrorText + 3, "a message over kMaxErrorText",
          e->message);
  Require(e->file.size() <= pilot::kMaxErrorText + 3, "a file over kMaxErrorText", e->file);
  Require(!e->type.empty(), "an error without a type");
  (void)pilot::DescribePythonError(*e);
  (void)pilot::IsOutOfMemoryError(*e);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = pilot::fuzz::Text(data, size);
  Check(pilot::ParsePythonError(text));
  if (size > 0) {
    const int tasks = 1 + data[0] % 4;
    Check(pilot::ParsePythonErrorOfSrunTask(text.substr(1), data[0] / 4 % tasks, tasks));
  }
  for (const std::string& hint : pilot::StderrHints(text)) {
    pilot::fuzz::Require(hint.rfind("hint: ", 0) == 0, "a hint without its word", hint);
  }
  return 0;
}
