// Git's index as a pin's dirtiness reads it (job/pins.h ParseGitIndex): a
// work tree's user writes that file, so no bytes may crash or hang the
// reader, and what it accepts is one entry per path of stage 0.
#include "job/pins.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(pilot::fuzz::Text(data, size));
  auto index = pilot::job::ParseGitIndex(bytes);
  if (index.ok()) {
    for (const auto& [path, entry] : *index) {
      pilot::fuzz::Require(entry.sha1.size() == 40, "an object name that is not 40 hex digits");
      pilot::fuzz::Require(path.size() <= bytes.size(), "a path longer than the index");
    }
  }
  return 0;
}
