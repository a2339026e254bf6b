// Strict JSON reading for the project's file formats (lock.json,
// verdict.json, results.json, ...).
//
// Files written by users' jobs are untrusted: they are parsed with a size
// limit, and every field is read through ObjectReader, which checks types,
// required fields and unknown keys, and reports the first problem as one
// Status naming the file and the field path:
//   pilot: lock.json: gpus[0].memory_bytes: expected integer
// Errors carry Code::kCorrupt.
//
// Thread-safety: values; an ObjectReader is used by one thread.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace pilot {

using Json = nlohmann::json;

// Default input limit for the JSON files the project reads.
constexpr size_t kMaxJsonBytes = 16u << 20;  // 16 MiB

// Parses `text` (at most `max_bytes`) into a JSON value. `label` names the
// input in messages ("lock.json", or a path). Errors: kCorrupt ("label: not
// valid JSON: ..." or "label: larger than N bytes").
Result<Json> ParseJsonText(std::string_view text, const std::string& label,
                           size_t max_bytes = kMaxJsonBytes);
// ReadFileLimited + ParseJsonText. A file larger than the limit is kCorrupt
// too; a missing file is kNotFound.
Result<Json> ReadJsonFile(const std::string& path, const std::string& label,
                          size_t max_bytes = kMaxJsonBytes);

// Serialises with sorted keys. indent < 0: compact, no whitespace at all
// (the canonical form); invalid UTF-8 in strings is replaced by U+FFFD
// instead of throwing.
std::string DumpJson(const Json& j, int indent = -1);

// Reads one JSON object field by field. Each accessor records the first
// error and becomes a no-op afterwards; Finish() returns it, or an error for
// the first key that no accessor asked for (unknown keys are refused unless
// AllowUnknownKeys()).
//
//   ObjectReader r(j, "lock.json", "");
//   r.Str("schema", &lock.schema).Int("created", &x, ObjectReader::kOptional);
//   r.Array<Gpu>("gpus", &lock.gpus, [](ObjectReader& e, Gpu* g) { ... });
//   PILOT_RETURN_IF_ERROR(r.Finish());
class ObjectReader {
 public:
  enum Need { kRequired, kOptional };

  // `label`: the file in messages; `path`: this object's field path ("" for
  // the root, e.g. "gpus[0]"). A non-object `value` is an error at once.
  ObjectReader(const Json& value, std::string label, std::string path);

  ObjectReader& Str(std::string_view key, std::string* out, Need need = kRequired);
  ObjectReader& Int(std::string_view key, int64_t* out, Need need = kRequired);
  ObjectReader& Int(std::string_view key, int* out, Need need = kRequired);
  ObjectReader& Uint(std::string_view key, uint32_t* out, Need need = kRequired);
  ObjectReader& Num(std::string_view key, double* out, Need need = kRequired);  // finite
  ObjectReader& Bool(std::string_view key, bool* out, Need need = kRequired);
  ObjectReader& StrList(std::string_view key, std::vector<std::string>* out, Need need = kRequired);
  ObjectReader& StrMap(std::string_view key, std::map<std::string, std::string>* out,
                       Need need = kRequired);
  ObjectReader& NumMap(std::string_view key, std::map<std::string, double>* out,
                       Need need = kRequired);
  // A string that must be one of `allowed`.
  ObjectReader& Enum(std::string_view key, std::string* out,
                     const std::vector<std::string>& allowed, Need need = kRequired);
  // A nested object; `fn` reads it with its own reader (whose errors
  // propagate here).
  ObjectReader& Object(std::string_view key, const std::function<void(ObjectReader&)>& fn,
                       Need need = kRequired);
  // An array of objects; `fn` reads element i into (*out)[i].
  template <typename T>
  ObjectReader& Array(std::string_view key, std::vector<T>* out,
                      const std::function<void(ObjectReader&, T*)>& fn, Need need = kRequired) {
    const Json* arr = Lookup(key, need, Json::value_t::array, "array");
    if (arr == nullptr) return *this;
    out->clear();
    out->resize(arr->size());
    for (size_t i = 0; i < arr->size() && error_.ok(); ++i) {
      ObjectReader e((*arr)[i], label_, FieldPath(key) + "[" + std::to_string(i) + "]");
      if (e.error_.ok()) fn(e, &(*out)[i]);
      Absorb(e.Finish());
    }
    return *this;
  }
  // Accepts `key` without reading it.
  ObjectReader& Ignore(std::string_view key);
  ObjectReader& AllowUnknownKeys();

  // Records a problem with `key`'s value found by the caller (e.g. a range
  // check): "label: path.key: detail".
  void Fail(std::string_view key, const std::string& detail);
  bool ok() const { return error_.ok(); }
  // The first error, else the first unknown key, else OK.
  Status Finish();

  // "path.key" (or "key" at the root).
  std::string FieldPath(std::string_view key) const;

 private:
  // The value of `key` if present and of `type` (number types: see .cc);
  // nullptr when absent (error if required) or on a type error.
  const Json* Lookup(std::string_view key, Need need, Json::value_t type, const char* type_name);
  void Absorb(const Status& s) {
    if (error_.ok() && !s.ok()) error_ = s;
  }

  const Json* value_;
  std::string label_;
  std::string path_;
  std::set<std::string, std::less<>> seen_;
  bool allow_unknown_ = false;
  Status error_;
};

// Checks a "schema" value "slurm-pilot/<name>/<version>" against the one
// this build reads. Errors name the label and say what was found.
Status CheckSchema(const std::string& label, const std::string& found, const std::string& expected);

}  // namespace pilot
