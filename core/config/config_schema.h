// The pilot.toml key table, private to the config loader (config*.cc).
//
// One KeySpec per key: where the value lives in Config, its type (from the
// field), its range or allowed values, and how strings are checked. The
// loader, the JSON/table printers and KnownConfigKeys() all walk this table,
// so a key added here is parsed, printed and listed at once (and the man-page
// test then demands its documentation).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "core/config/config.h"

namespace pilot::config_internal {

// Pointer to the field a key fills; the alternative is the key's type.
using FieldPtr = std::variant<std::string*, int*, int64_t*, double*, bool*,
                              std::vector<std::string>*, std::map<std::string, std::string>*>;

// Extra checks for string keys.
enum class StringKind {
  kPlain,   // any string (choices, if given, still apply)
  kPath,    // $VARS expanded, relative paths resolved
  kSha256,  // "" or 64 hex characters (stored lower case)
  kImage,   // container reference or a local image file (then like kPath)
  kName,    // [A-Za-z0-9._-]{1,64}
  kAllocConf,  // "" or the caching allocator's key:value[,key:value] list
  kRegex,      // "" or a regular expression RE2 accepts with one group (LossPattern)
  kPinPath,    // array elements: PinPathProblem() finds none
  kHubRef,     // array elements: ParseHubRef() accepts them
  kMount,      // array elements: a bind mount (core/config/mounts.h)
};

struct KeySpec {
  const char* section;
  const char* key;
  FieldPtr (*field)(Config&);
  // Integer keys: inclusive range.
  int64_t ilo = 0;
  int64_t ihi = std::numeric_limits<int>::max();
  // Floating-point keys: range, each end inclusive unless marked open.
  double dlo = 0;
  double dhi = 0;
  bool dlo_open = false;
  bool dhi_open = false;
  // String keys: allowed values (empty = any) and extra checks.
  std::vector<std::string> choices = {};
  StringKind kind = StringKind::kPlain;
  bool required = false;
  // Integer key that also accepts a float with a whole value (2.6e10).
  bool float_ok = false;
  // Array keys: a command line (elements may repeat) rather than a set.
  bool argv = false;
  // Array keys: [] is a value (no elements) rather than a mistake.
  bool may_be_empty = false;

  std::string Name() const { return std::string(section) + "." + key; }
};

// Every key, in documentation order (the order of core/config/config.h).
const std::vector<KeySpec>& Schema();
// Section names in documentation order.
const std::vector<std::string>& SectionNames();
// The spec of section.key, or null.
const KeySpec* FindKey(std::string_view section, std::string_view key);
// Keys of one section ("layers", "d_model", ...).
std::vector<std::string> KeysOf(std::string_view section);
// The keys of [model], [data], [training], [checkpoint], [eval] and
// [parallel] that keep their meaning with a user's program (pilot-program(7));
// the others describe the builtin model and are refused with [program].
const std::vector<std::string>& KeysKeptForAProgram();

// Where keys came from, for messages after parsing (cross-field rules).
struct Origins {
  std::string file;                              // as given to the loader
  std::map<std::string, int> section_lines;      // "run" -> line of [run]
  std::map<std::string, std::string> overrides;  // "a.b" -> "a.b=value" as given

  // The `what` of a message about `key`: "--set a.b=v" for an override,
  // "FILE:LINE: a.b" for a key in the file, and for a key left at its
  // default the line of its section header (1 when the section is absent).
  std::string Where(const Config& c, const std::string& key) const;
  // Of `keys`, the first one set in the file or by --set; else the first.
  std::string Blame(const Config& c, std::initializer_list<const char*> keys) const;
};

// Cross-field rules and derived defaults (training.seq_len from run.seq_len,
// checkpoint.at_step = steps / 2, ...), after every key passed its own checks.
// Returns the first rule broken, as one kInvalid Status.
Status ResolveAndValidate(Config& c, const Origins& origins);

}  // namespace pilot::config_internal

namespace pilot {

// Every known key as "section.key", in documentation order (for man-page
// checks and `pilot check`).
const std::vector<std::string>& KnownConfigKeys();

}  // namespace pilot
