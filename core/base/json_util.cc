#include "core/base/json_util.h"

namespace pilot {

Result<Json> ParseJsonText(std::string_view text, const std::string& label, size_t max_bytes) {
  if (text.size() > max_bytes) {
    return Status::Corrupt(label, "larger than " + std::to_string(max_bytes) + " bytes");
  }
  // nlohmann reports parse errors by exception; none leaves this function.
  try {
    return Json::parse(text.begin(), text.end(), /*cb=*/nullptr, /*allow_exceptions=*/true,
                       /*ignore_comments=*/false);
  } catch (const Json::parse_error& e) {
    std::string what = e.what();
    // "[json.exception.parse_error.101] parse error at line 1, column 2: ..."
    size_t pos = what.find("] ");
    if (pos != std::string::npos) what = what.substr(pos + 2);
    return Status::Corrupt(label, "not valid JSON: " + what);
  } catch (const std::exception& e) {
    return Status::Corrupt(label, std::string("not valid JSON: ") + e.what());
  }
}

std::string DumpJson(const Json& j, int indent) {
  return j.dump(indent, ' ', /*ensure_ascii=*/false, Json::error_handler_t::replace);
}

Status CheckSchema(const std::string& label, const std::string& found,
                   const std::string& expected) {
  if (found == expected) return Status::Ok();
  // Same family, other version: say which one this build reads.
  size_t slash = expected.find_last_of('/');
  if (slash != std::string::npos && found.compare(0, slash + 1, expected, 0, slash + 1) == 0) {
    return Status::Corrupt(label + ": schema", "unsupported version \"" + found +
                                                   "\" (this build reads \"" + expected + "\")")
        .WithHint("read it with the slurm-pilot version that wrote it");
  }
  return Status::Corrupt(label + ": schema",
                         "expected \"" + expected + "\", got \"" + found + "\"");
}

}  // namespace pilot
