// What the harnesses of tests/fuzz share: the input as text, and the check
// that a record read back from its own writer's output is the same record.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace pilot::fuzz {

inline std::string_view Text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Stops the run (a finding) when `ok` is false.
inline void Require(bool ok, const char* what, const std::string& detail = "") {
  if (ok) return;
  std::fprintf(stderr, "pilot: fuzz: %s%s%s\n", what, detail.empty() ? "" : ": ", detail.c_str());
  std::abort();
}

// A record the strict reader accepted is written, read again and written
// again: both writings must agree (the reader and the writer share one
// field list, core/records/record.h).
template <typename Parse, typename Write>
void RoundTrip(std::string_view text, Parse parse, Write write) {
  auto first = parse(text);
  if (!first.ok()) return;
  const std::string once = write(*first);
  auto second = parse(once);
  Require(second.ok(), "its own writing does not read back", second.ok() ? "" : second.status().ToString());
  Require(write(*second) == once, "a second writing differs from the first", once);
}

}  // namespace pilot::fuzz
