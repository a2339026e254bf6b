// Strict reading of the site's TOML files (pilot.conf, hardware.toml): the
// primitives the records' TOML backend (core/records/record_toml.h) drives from a
// field list, and that a reader uses directly for what a field list cannot
// say (the [gpu.NAME] sections named by their keys). Internal to pilot_core: the header pulls in
// TOML++, which is a private dependency of the library.
//
// Every reader of TOML in pilot_core includes TOML++ through this header and
// parses with ParseToml: pilot.toml's loader (core/config/load.cc) words
// its own messages over the same parse, key lines and numbers.
//
// Every problem becomes one Status of kind kInvalid whose `what` is
// "FILE:LINE: key" (the key's full dotted name) and whose detail says what
// is wrong, e.g.
//   pilot: /etc/slurm-pilot/pilot.conf:12: thresholds.memory_headrom: unknown key
//   HINT: did you mean thresholds.memory_headroom?
// Syntax errors (including duplicate keys) come from the parser with their
// line. The first problem wins.
//
// Thread-safety: a reader is used by one thread.
#pragma once

// TOML++ asserts on some malformed input (e.g. "[[}x]") in builds without
// NDEBUG; its release path reports a parse error there. A reader of a file a
// user or a site writes must never abort on it, so the asserts are off in
// every build.
#define TOML_ASSERT(expr) static_cast<void>(0)
#include <toml++/toml.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/status.h"

namespace pilot {

// A syntax error as TOML++ reports it: the line it names (0 for none) and
// its description, unchanged.
struct TomlSyntaxError {
  int line = 0;
  std::string description;
};

// Parses TOML text; `file` is the source name TOML++ records. On a syntax
// error (duplicate keys included) returns nullopt and fills *error.
std::optional<toml::table> ParseToml(std::string_view text, const std::string& file,
                                     TomlSyntaxError* error);

// Parses TOML text; `file` is used in messages. Errors: kInvalid
// "FILE:LINE: syntax error: ..." (duplicate keys included).
Result<toml::table> ParseTomlText(std::string_view text, const std::string& file);

// The line a key, value or table starts on (0 when TOML++ knows none).
int TomlLine(const toml::source_region& r);

// A number: a float's value, or an integer's as a double; nullopt for a
// value of any other type.
std::optional<double> TomlNumber(const toml::node& n);

// How a message names a value: by its type alone, or by its type and, for
// a scalar, its value.
enum class TomlNaming { kType, kTypeAndValue };

// A value's name in a message. kType: "a string", "an integer", "a float",
// "a boolean", "an array", "a table", "a date/time" (the site's files);
// kTypeAndValue: "string \"x\"", "integer 5", "float 1.5", "true", "false",
// "an array", "a table", "a date", "a time", "a date-time" (pilot.toml).
std::string TomlTypeName(const toml::node& n, TomlNaming naming = TomlNaming::kType);

class TomlReader {
 public:
  enum Need { kRequired, kOptional };

  // `prefix`: dotted name of this table ("" at the root).
  TomlReader(const toml::table& table, std::string file, std::string prefix);

  TomlReader& Str(std::string_view key, std::string* out, Need need = kOptional);
  TomlReader& Int(std::string_view key, int* out, int64_t lo, int64_t hi, Need need = kOptional);
  TomlReader& Int64(std::string_view key, int64_t* out, int64_t lo, int64_t hi,
                    Need need = kOptional);
  // Accepts integers too. lo/hi inclusive.
  TomlReader& Num(std::string_view key, double* out, double lo, double hi, Need need = kOptional);
  TomlReader& Bool(std::string_view key, bool* out, Need need = kOptional);
  TomlReader& StrList(std::string_view key, std::vector<std::string>* out, Need need = kOptional);
  // A string that must be one of `allowed`.
  TomlReader& Enum(std::string_view key, std::string* out, const std::vector<std::string>& allowed,
                   Need need = kOptional);
  // A sub-table read by `fn` with its own reader (errors propagate).
  TomlReader& Table(std::string_view key, const std::function<void(TomlReader&)>& fn,
                    Need need = kOptional);
  // Calls fn(name, reader) for every sub-table of this table, in file order
  // (for "[gpu.NAME]" style sections). Non-table values are errors.
  TomlReader& EachTable(const std::function<void(const std::string&, TomlReader&)>& fn);

  // Records a problem with `key`'s value found by the caller.
  void Fail(std::string_view key, const std::string& detail);
  bool ok() const { return error_.ok(); }
  // The first error, else the first key nobody read ("unknown key", with a
  // did-you-mean hint), else OK.
  Status Finish();

  // Line of `key` in the file (0 when absent).
  int LineOf(std::string_view key) const;
  std::string Name(std::string_view key) const;

 private:
  const toml::node* Get(std::string_view key, Need need);
  void Absorb(const Status& s) {
    if (error_.ok() && !s.ok()) error_ = s;
  }
  Status Error(std::string_view key, const std::string& detail) const;

  const toml::table* table_;
  std::string file_;
  std::string prefix_;
  std::set<std::string, std::less<>> seen_;
  Status error_;
};

}  // namespace pilot
