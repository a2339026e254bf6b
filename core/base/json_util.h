// JSON text in and out for the project's file formats.
//
// The formats themselves are records (core/records/record.h): their field lists
// drive the strict readers and the writers. What lives here is the text
// around them: parsing untrusted text with a size limit into a value,
// serialising a value with sorted keys, and the check of a "schema" member.
// Errors are kCorrupt and name the input:
//   pilot: lock.json: not valid JSON: parse error at line 1, column 2: ...
//   pilot: verdict.json: duplicate key "decision"
// Every JSON text the project reads goes through ParseJsonText and every
// one it writes through DumpJson: no reader takes one of two values of a
// key another reader would not, and no byte a program wrote makes a writer
// throw.
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
// input in messages ("lock.json", or a path; "" for none). An object that
// names a key twice is refused, at any depth: RFC 8259 leaves its meaning
// open, and a reader that takes the first value would see another document
// than one that takes the last (a verdict's "decision" signed as one value
// and read as another). Errors: kCorrupt ("label: not valid JSON: ...",
// "label: duplicate key \"k\"" with " in PATH" when nested, e.g.
// `in "stages.single"`, or "label: larger than N bytes"). Linear in the
// text, as nlohmann's own parser. Never throws.
Result<Json> ParseJsonText(std::string_view text, const std::string& label,
                           size_t max_bytes = kMaxJsonBytes);

// Serialises `j`. indent < 0: compact, no whitespace at all (the canonical
// form); else pretty-printed with `indent` spaces. Strings are written as
// UTF-8; bytes in them that are not UTF-8 (a program's latin-1 byte, a
// character cut in half) are written as U+FFFD instead of throwing, so a
// value that is valid UTF-8 gives the bytes nlohmann's dump(indent) gives.
// Never throws for a value made of strings and finite or non-finite
// numbers (NaN and infinities are written as null, as nlohmann does).
std::string DumpJson(const Json& j, int indent = -1);
// The same for a value that keeps its keys in insertion order (the
// field-list order of records/record.h's writers).
std::string DumpJson(const nlohmann::ordered_json& j, int indent = -1);

// Checks a "schema" value "slurm-pilot/<name>/<version>" against the one
// this build reads. Errors: kCorrupt "label: schema: ...": for another
// version of the same format "unsupported version ..." with a hint, else
// "expected \"<expected>\", got \"<found>\"".
Status CheckSchema(const std::string& label, const std::string& found, const std::string& expected);

}  // namespace pilot
