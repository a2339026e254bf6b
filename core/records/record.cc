#include "core/records/record.h"

#include "core/base/strings.h"

namespace pilot::record_internal {

Status MakeError(const JsonStyle& s, const std::string& path, const std::string& detail) {
  switch (s.code) {
    case Code::kCorrupt:
      return Status::Corrupt(path, detail);
    case Code::kInvalid:
      return Status::Invalid(path, detail);
    default:
      return Status::Internal(path, detail);
  }
}

std::string Named(const JsonStyle& s, const char* base) {
  const std::string b = base;
  if (!s.articles || b == "null") return b;
  const bool vowel = !b.empty() && std::string_view("aeiou").find(b[0]) != std::string_view::npos;
  return (vowel ? "an " : "a ") + b;
}

std::string ChoiceError(const std::vector<std::string>& allowed, const std::string& got) {
  std::string list;
  for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + ("\"" + a + "\"");
  return "expected one of " + list + ", got \"" + got + "\"";
}

std::string RangeError(double lo, double hi, double got) {
  return "must be between " + FormatDouble(lo) + " and " + FormatDouble(hi) + ", got " +
         FormatDouble(got);
}

std::string RangeError(int64_t lo, int64_t hi, int64_t got) {
  return "must be between " + std::to_string(lo) + " and " + std::to_string(hi) + ", got " +
         std::to_string(got);
}

std::string SubPath(const std::string& path, const char* key) {
  return path.empty() ? std::string(key) : path + "." + key;
}

}  // namespace pilot::record_internal
