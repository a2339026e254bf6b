// JSON text in and out for the project's file formats.
//
// The formats themselves are records (core/records/record.h): their field lists
// drive the strict readers and the writers. What lives here is the text
// around them: parsing untrusted text with a size limit into a value,
// serialising a value with sorted keys, and the check of a "schema" member.
// Errors are kCorrupt and name the input:
//   pilot: lock.json: not valid JSON: parse error at line 1, column 2: ...
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/base/status.h"

namespace pilot {

// Keys sorted by their bytes (nlohmann's std::map-backed object): the form
// every sorted-key format is written in, the signed canonical one included.
using Json = nlohmann::json;

// Default input limit for the JSON files the project reads.
constexpr size_t kMaxJsonBytes = 16u << 20;  // 16 MiB

// Parses `text` (at most `max_bytes`) into a JSON value. `label` names the
// input in messages ("lock.json", or a path). Errors: kCorrupt ("label: not
// valid JSON: ..." or "label: larger than N bytes"). Never throws.
Result<Json> ParseJsonText(std::string_view text, const std::string& label,
                           size_t max_bytes = kMaxJsonBytes);

// Serialises with sorted keys. indent < 0: compact, no whitespace at all
// (the canonical form); invalid UTF-8 in strings is replaced by U+FFFD
// instead of throwing.
std::string DumpJson(const Json& j, int indent = -1);

// Checks a "schema" value "slurm-pilot/<name>/<version>" against the one
// this build reads. Errors: kCorrupt "label: schema: ...": for another
// version of the same format "unsupported version ..." with a hint, else
// "expected \"<expected>\", got \"<found>\"".
Status CheckSchema(const std::string& label, const std::string& found, const std::string& expected);

}  // namespace pilot
