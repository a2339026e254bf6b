// A safetensors file's header as the runner reads it
// (runner/ckpt/safetensors_header.h): the input is the whole file, its
// first 8 bytes the header's length.
#include "runner/ckpt/safetensors_header.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view file = pilot::fuzz::Text(data, size);
  const auto file_size = static_cast<int64_t>(size);
  auto n = pilot::runner::SafetensorsHeaderLength(file.substr(0, 8), file_size, "x.safetensors");
  if (!n.ok()) return 0;
  auto h = pilot::runner::ParseSafetensorsHeader(file.substr(8, static_cast<size_t>(*n)), file_size,
                                                 "x.safetensors");
  if (!h.ok()) return 0;
  for (const auto& e : h->entries) {
    pilot::fuzz::Require(e.begin >= 0 && e.end >= e.begin && h->data_start + e.end <= file_size,
                         "an accepted entry lies outside the file", e.name);
  }
  return 0;
}
