// Splitting a line at a separator: every field, empty ones included
// ("a,,b" -> "a", "", "b"; "" -> one empty field), views into `text`.
// Callers trim or drop empty fields as their format says.
//
// Thread-safety: pure.
#pragma once

#include <string_view>
#include <vector>

namespace pilot {

inline std::vector<std::string_view> SplitOn(std::string_view text, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(sep, start);
    if (end == std::string_view::npos) end = text.size();
    out.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

}  // namespace pilot
