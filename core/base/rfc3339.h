// RFC 3339 timestamps (UTC) as used in lock.json and verdict.json.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/base/status.h"

namespace pilot {

// "YYYY-MM-DDTHH:MM:SSZ" for a Unix time (UTC).
std::string FormatRfc3339(int64_t unix_seconds);
// Inverse of FormatRfc3339; also accepts "t"/"z", fractional seconds
// (dropped) and a numeric offset ("+02:00"). Errors: kInvalid.
Result<int64_t> ParseRfc3339(std::string_view text);
// "" when ParseRfc3339 accepts `text`, else "expected RFC 3339 time" (a
// record field Check, core/records/record.h).
std::string CheckRfc3339(const std::string& text);

}  // namespace pilot
