// The TOML backend of records (core/records/record.h): a record's field list drives
// TomlReader, so the site's TOML files (hardware.toml, pilot.conf) are read
// from the same one-line-per-key lists as the JSON formats.
//
// Internal to pilot_core, like core/base/toml_reader.h (TOML++ is a private
// dependency of the library).
//
// Mapping: a nested record is a [section] (TomlReader::Table); std::string,
// int, int64_t, double (integers accepted), bool and
// std::vector<std::string> are values. Attributes: kMayBeAbsent (a missing
// key keeps the member's default; without it the key is required: "missing
// (required)"), IntRange / NumRange (bounds, "must be between LO and HI, got
// V"; a number without NumRange must still be finite), OneOf ("must be one
// of ..."), Validate (after the value's own checks), Doc (ignored). Unknown
// keys and sections are refused with a did-you-mean hint by
// TomlReader::Finish, which the caller runs on the reader it passed in.
//
// Messages are TomlReader's: "FILE:LINE: dotted.key: problem".
//
// Thread-safety: as TomlReader (one thread per reader).
#pragma once

#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "core/records/record.h"
#include "core/base/toml_reader.h"

namespace pilot {

namespace record_internal {

struct TomlFieldReader {
  TomlReader* r;

  template <class T, class... As>
  void operator()(const char* key, T& value, const As&... attrs) {
    const TomlReader::Need need =
        kHasAttr<MayBeAbsent, As...> ? TomlReader::kOptional : TomlReader::kRequired;
    const IntRange* ir = FindAttr<IntRange>(attrs...);
    const NumRange* nr = FindAttr<NumRange>(attrs...);
    if constexpr (std::is_same_v<T, std::string>) {
      if (const OneOf* o = FindAttr<OneOf>(attrs...)) {
        r->Enum(key, &value, std::vector<std::string>(o->names.begin(), o->names.end()), need);
      } else {
        r->Str(key, &value, need);
      }
      if (r->ok()) {
        std::string bad = RunChecks(value, attrs...);
        if (!bad.empty()) r->Fail(key, bad);
      }
    } else if constexpr (std::is_same_v<T, bool>) {
      r->Bool(key, &value, need);
    } else if constexpr (std::is_same_v<T, int>) {
      r->Int(key, &value, ir ? ir->lo : std::numeric_limits<int>::min(),
             ir ? ir->hi : std::numeric_limits<int>::max(), need);
    } else if constexpr (std::is_same_v<T, int64_t>) {
      r->Int64(key, &value, ir ? ir->lo : std::numeric_limits<int64_t>::min(),
               ir ? ir->hi : std::numeric_limits<int64_t>::max(), need);
    } else if constexpr (std::is_same_v<T, double>) {
      r->Num(key, &value, nr ? nr->lo : std::numeric_limits<double>::lowest(),
             nr ? nr->hi : std::numeric_limits<double>::max(), need);
    } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
      r->StrList(key, &value, need);
    } else {
      static_assert(HasFields<T>, "no TOML mapping for this member type");
      r->Table(
          key, [&](TomlReader& sub) { ReadTomlRecord(sub, &value); }, need);
    }
  }

  template <class T>
  static void ReadTomlRecord(TomlReader& sub, T* out) {
    TomlFieldReader v{&sub};
    Fields(v, *out, std::type_identity<T>{});
  }
};

}  // namespace record_internal

// Reads the keys of record T from the table behind `r` into `*out` (which
// holds the defaults). Errors are recorded in `r`; call r.Finish() after
// any further keys of the same table have been read.
template <class T>
void ReadTomlRecord(TomlReader& r, T* out) {
  record_internal::TomlFieldReader::ReadTomlRecord(r, out);
}

}  // namespace pilot
