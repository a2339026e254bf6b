// Records: one field list per struct drives every writer and strict reader
// of the project's file formats (results.json, lock.json, verdict.json, the
// verify report, checkpoint metadata, rank reports; hardware.toml and
// pilot.conf through core/records/record_toml.h), so a reader cannot drift from its
// writer.
//
// Declaring a record. Beside the struct (or in the .cc that owns its
// format), write one function template that names every member once:
//
//   template <class V, class S>
//   void Fields(V& v, S& s, std::type_identity<LockGpu>) {
//     v("index", s.index);
//     v("name", s.name);
//     v("uuid", s.uuid, kMayBeAbsent);
//     v("memory_bytes", s.memory_bytes, IntRange{0, int64_t{1} << 50});
//   }
//
// `S` is the struct, const when writing; `V` is a visitor (writer, reader,
// key lister) called as v("key", member, attributes...). Fields must be
// found by argument-dependent lookup, i.e. live in the struct's namespace.
//
// Member types: bool, int, int64_t, uint32_t, uint64_t, double,
// std::string, enums with names (below), other records (nested objects),
// std::vector<T> (arrays), std::map<std::string, T> (objects with free
// keys), std::optional<T> (null when unset).
//
// Attributes (any order, any number):
//   kMayBeAbsent       the key may be missing: the member keeps the value it
//                      had before reading (its default; nullopt for an
//                      optional). Without it, a missing key is an error.
//   kOmitIfUnset       std::optional only: an unset member is not written at
//                      all (instead of null); implies kMayBeAbsent.
//   IntRange{lo, hi}   integers: inclusive bounds, checked when reading.
//   NumRange{lo, hi}   numbers: inclusive bounds, checked when reading.
//   OneOf{{"a", "b"}}  strings: the allowed values.
//   Validate{fn}       strings: fn(value) returns "" or what is wrong
//                      ("must be an absolute path"); every Validate applies.
//   Doc{"..."}         a one-line description, for key listings; readers
//                      and writers ignore it.
//
// Enums: declare, in the enum's namespace,
//   const std::vector<std::string>& EnumNames(std::type_identity<Decision>);
// returning the name of each enumerator by its value (0, 1, ...). Enums are
// written as their names and read back only from them.
//
// What the JSON reader refuses, reporting the first problem as one Status
// "path: detail" (the caller adds the file with Status::Context):
//   - a value of the wrong type: "job.uid: expected integer, got string";
//     integers must be JSON integers that fit the member's type ("integer
//     out of range"); a float is not an integer;
//   - a missing key without kMayBeAbsent: "job.user: missing";
//   - a key no field names: "job.shell: unknown field" (checked after the
//     object's fields, in the object's key order);
//   - a value outside its IntRange/NumRange/OneOf/Validate;
//   - non-finite numbers, unless the style writes them as strings (below).
// Size limits belong to the text, not the record: callers parse with a
// limit (ParseJsonText, ReadFileLimited) before reading.
//
// Styles. The files that pinned and signed formats read (lock.json,
// verdict.json, the verify report) and the measurement files written by
// the runner (results.json, checkpoint state) have always worded their
// errors differently, and people match on these words; a JsonStyle keeps
// each one. Measurement files also record a diverged loss: there NaN and
// infinities are written and read as the strings "nan", "inf", "-inf".
//
// The JSON type decides the key order of what is written:
// nlohmann::json sorts keys (lock, verdict: the signed canonical form
// depends on it), nlohmann::ordered_json keeps the field-list order.
//
// Adding a field to a format is one line in its Fields plus its line in
// the format's documentation (docs/formats.md and the man page that lists
// the format's keys; the man-page test checks the keys it knows). Give the
// line kMayBeAbsent when files written before the field existed must still
// be read.
//
// Thread-safety: pure functions over values.
#pragma once

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/base/json_util.h"
#include "core/base/status.h"

namespace pilot {

// ---- attributes ------------------------------------------------------------

struct MayBeAbsent {};
inline constexpr MayBeAbsent kMayBeAbsent{};
struct OmitIfUnset {};
inline constexpr OmitIfUnset kOmitIfUnset{};
struct IntRange {
  int64_t lo;
  int64_t hi;
};
struct NumRange {
  double lo;
  double hi;
};
struct OneOf {
  std::initializer_list<const char*> names;
};
struct Validate {
  std::string (*fn)(const std::string& value);
};
struct Doc {
  const char* text;
};

namespace record_internal {

template <class A, class B>
const A* AttrPtr(const B& b) {
  if constexpr (std::is_same_v<A, B>) {
    return &b;
  } else {
    return nullptr;
  }
}

}  // namespace record_internal

// The first attribute of type A among `attrs`, or nullptr.
template <class A, class... As>
const A* FindAttr(const As&... attrs) {
  const A* found = nullptr;
  ((found = found != nullptr ? found : record_internal::AttrPtr<A>(attrs)), ...);
  return found;
}
template <class A, class... As>
inline constexpr bool kHasAttr = (std::is_same_v<A, As> || ...);

// "" when every Validate among `attrs` accepts `value`, else the first complaint.
template <class... As>
std::string RunChecks(const std::string& value, const As&... attrs) {
  std::string bad;
  auto one = [&](const auto& a) {
    if constexpr (std::is_same_v<std::decay_t<decltype(a)>, Validate>) {
      if (bad.empty()) bad = a.fn(value);
    }
  };
  (void)one;  // unused when there are no attributes
  (one(attrs), ...);
  return bad;
}

// ---- traits ----------------------------------------------------------------

template <class T>
concept HasFields = requires(int& v, T& s) { Fields(v, s, std::type_identity<T>{}); };

template <class E>
concept NamedEnum =
    std::is_enum_v<E> && requires { EnumNames(std::type_identity<E>{}); };

template <class T>
struct IsOptional : std::false_type {};
template <class T>
struct IsOptional<std::optional<T>> : std::true_type {};
template <class T>
struct IsVector : std::false_type {};
template <class T>
struct IsVector<std::vector<T>> : std::true_type {};
template <class T>
struct IsStringMap : std::false_type {};
template <class T>
struct IsStringMap<std::map<std::string, T>> : std::true_type {};

// ---- key listing -----------------------------------------------------------

struct RecordKey {
  std::string name;  // dotted for nested records: "thresholds.memory_headroom"
  std::string doc;   // the Doc attribute, "" when none
};

namespace record_internal {

// The record an optional or an array holds (void when it holds none).
template <class T>
struct HeldRecord {
  using type = void;
  static constexpr const char* suffix = "";
};
template <class T>
struct HeldRecord<std::optional<T>> {
  using type = std::conditional_t<HasFields<T>, T, void>;
  static constexpr const char* suffix = "";
};
template <class T>
struct HeldRecord<std::vector<T>> {
  using type = std::conditional_t<HasFields<T>, T, void>;
  static constexpr const char* suffix = "[]";
};

struct KeyLister {
  std::string prefix;
  std::vector<RecordKey>* out;
  bool deep = false;  // also into optional records and arrays of records
  template <class T, class... As>
  void operator()(const char* key, T& value, const As&... attrs) {
    using U = std::decay_t<T>;
    using Held = typename HeldRecord<U>::type;
    if constexpr (HasFields<U>) {
      KeyLister sub{prefix + key + ".", out, deep};
      Fields(sub, value, std::type_identity<U>{});
      return;
    } else if constexpr (!std::is_void_v<Held>) {
      if (deep) {
        Held scratch{};
        KeyLister sub{prefix + key + HeldRecord<U>::suffix + ".", out, deep};
        Fields(sub, scratch, std::type_identity<Held>{});
        return;
      }
    }
    const Doc* d = FindAttr<Doc>(attrs...);
    out->push_back({prefix + key, d != nullptr ? d->text : ""});
  }
};

}  // namespace record_internal

// Every key of record T in field-list order; nested records are listed by
// their keys ("section.key"), not by their own name.
template <class T>
std::vector<RecordKey> RecordKeys() {
  std::vector<RecordKey> out;
  T scratch{};
  record_internal::KeyLister v{"", &out};
  Fields(v, scratch, std::type_identity<T>{});
  return out;
}

// As RecordKeys, and the members of the records an optional or an array
// holds take its place: "program.checkpoint_dir",
// "program.processes[].stage" (for the man-page check of a format that
// nests records that way).
template <class T>
std::vector<RecordKey> RecordKeysDeep() {
  std::vector<RecordKey> out;
  T scratch{};
  record_internal::KeyLister v{"", &out, true};
  Fields(v, scratch, std::type_identity<T>{});
  return out;
}

// ---- JSON ------------------------------------------------------------------

struct JsonStyle {
  Code code;               // of every reading error
  bool articles;           // "expected a string, got a number" (else "expected string, got number")
  const char* unknown;     // detail for a key no field names
  bool nonfinite_strings;  // NaN/inf as "nan"/"inf"/"-inf" (else finite numbers only)
  const char* top;         // the top level's name in messages ("" = none)
};

// lock.json, verdict.json, the verify report: kCorrupt, "expected integer,
// got string", "unknown field"; numbers must be finite.
inline constexpr JsonStyle kPinnedStyle{Code::kCorrupt, false, "unknown field", false, ""};
// results.json: kInvalid, "expected an integer, got a string", "unknown key";
// NaN and infinities as strings; the top level is "(top level)".
inline constexpr JsonStyle kMeasuredStyle{Code::kInvalid, true, "unknown key", true,
                                          "(top level)"};

namespace record_internal {

// Implemented in record.cc; shared by every instantiation.
Status MakeError(const JsonStyle& s, const std::string& path, const std::string& detail);
// "string" or "a string" ("null" stays bare).
std::string Named(const JsonStyle& s, const char* base);
// "expected <what>, got <j's type>", the type as nlohmann names it
// ("number" for every number).
template <class J>
Status Expected(const JsonStyle& s, const std::string& path, const char* what, const J& j) {
  return MakeError(s, path, "expected " + Named(s, what) + ", got " + Named(s, j.type_name()));
}
std::string ChoiceError(const std::vector<std::string>& allowed, const std::string& got);
std::string RangeError(double lo, double hi, double got);
std::string RangeError(int64_t lo, int64_t hi, int64_t got);
std::string SubPath(const std::string& path, const char* key);

}  // namespace record_internal

template <class J, class T>
J RecordValueToJson(const T& v, const JsonStyle& s);

namespace record_internal {

template <class J>
struct JsonWriter {
  J* out;
  const JsonStyle* style;
  template <class T, class... As>
  void operator()(const char* key, const T& value, const As&...) {
    if constexpr (IsOptional<T>::value && kHasAttr<OmitIfUnset, As...>) {
      if (!value) return;
    }
    (*out)[key] = RecordValueToJson<J>(value, *style);
  }
};

}  // namespace record_internal

// One member as a JSON value (a record as an object through its Fields).
template <class J, class T>
J RecordValueToJson(const T& v, const JsonStyle& s) {
  if constexpr (std::is_same_v<T, bool> || std::is_integral_v<T> ||
                std::is_same_v<T, std::string>) {
    return J(v);
  } else if constexpr (std::is_same_v<T, double>) {
    if (s.nonfinite_strings && !std::isfinite(v)) {
      return J(std::isnan(v) ? "nan" : v > 0 ? "inf" : "-inf");
    }
    return J(v);
  } else if constexpr (NamedEnum<T>) {
    return J(EnumNames(std::type_identity<T>{})[static_cast<size_t>(v)]);
  } else if constexpr (IsOptional<T>::value) {
    return v ? RecordValueToJson<J>(*v, s) : J(nullptr);
  } else if constexpr (IsVector<T>::value) {
    J a = J::array();
    for (const auto& x : v) a.push_back(RecordValueToJson<J>(x, s));
    return a;
  } else if constexpr (IsStringMap<T>::value) {
    J o = J::object();
    for (const auto& [k, x] : v) o[k] = RecordValueToJson<J>(x, s);
    return o;
  } else {
    static_assert(HasFields<T>, "a record member needs a Fields function");
    J o = J::object();
    record_internal::JsonWriter<J> w{&o, &s};
    Fields(w, v, std::type_identity<T>{});
    return o;
  }
}

// A record as a JSON object. J: nlohmann::json (sorted keys) or
// nlohmann::ordered_json (field-list order).
template <class J = nlohmann::json, class T>
J RecordToJson(const T& record, const JsonStyle& style = kPinnedStyle) {
  static_assert(HasFields<T>);
  return RecordValueToJson<J>(record, style);
}

template <class J, class T>
Status RecordValueFromJson(const J& j, const std::string& path, T* out, const JsonStyle& s);

namespace record_internal {

template <class J>
struct JsonReader {
  const J* obj;
  std::string path;  // of this object ("" at the top level)
  const JsonStyle* style;
  std::set<std::string, std::less<>> known;
  Status status;

  template <class T, class... As>
  void operator()(const char* key, T& value, const As&... attrs) {
    known.emplace(key);
    if (!status.ok()) return;
    const std::string p = SubPath(path, key);
    auto it = obj->find(key);
    if (it == obj->end()) {
      constexpr bool may_be_absent =
          kHasAttr<MayBeAbsent, As...> || (IsOptional<T>::value && kHasAttr<OmitIfUnset, As...>);
      if (!may_be_absent) status = MakeError(*style, p, "missing");
      return;
    }
    status = RecordValueFromJson(*it, p, &value, *style);
    if (status.ok()) status = CheckAttrs(p, value, attrs...);
  }

  template <class T, class... As>
  Status CheckAttrs(const std::string& p, const T& value, const As&... attrs) {
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      if (const IntRange* r = FindAttr<IntRange>(attrs...)) {
        const auto v = static_cast<int64_t>(value);
        if (v < r->lo || v > r->hi) return MakeError(*style, p, RangeError(r->lo, r->hi, v));
      }
    } else if constexpr (std::is_same_v<T, double>) {
      if (const NumRange* r = FindAttr<NumRange>(attrs...)) {
        if (!(value >= r->lo && value <= r->hi)) {
          return MakeError(*style, p, RangeError(r->lo, r->hi, value));
        }
      }
    } else if constexpr (std::is_same_v<T, std::string>) {
      if (const OneOf* o = FindAttr<OneOf>(attrs...)) {
        std::vector<std::string> allowed(o->names.begin(), o->names.end());
        bool found = false;
        for (const auto& a : allowed) found = found || a == value;
        if (!found) return MakeError(*style, p, ChoiceError(allowed, value));
      }
      std::string bad = RunChecks(value, attrs...);
      if (!bad.empty()) return MakeError(*style, p, bad);
    }
    return Status::Ok();
  }
};

template <class J>
Status UnknownKeys(const J& j, const std::string& path, const JsonStyle& s,
                   const std::set<std::string, std::less<>>& known) {
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (known.find(it.key()) == known.end()) {
      return MakeError(s, SubPath(path, it.key().c_str()), s.unknown);
    }
  }
  return Status::Ok();
}

template <class J>
Status ReadInteger(const J& j, const std::string& path, const JsonStyle& s, int64_t lo,
                   uint64_t hi, int64_t* signed_out, uint64_t* unsigned_out) {
  if (!j.is_number_integer()) return Expected(s, path, "integer", j);
  if (j.is_number_unsigned()) {
    const auto v = j.template get<uint64_t>();
    if (v > hi) return MakeError(s, path, "integer out of range");
    *unsigned_out = v;
    *signed_out = v <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())
                      ? static_cast<int64_t>(v)
                      : 0;
    return Status::Ok();
  }
  const auto v = j.template get<int64_t>();
  if (v < lo || (v >= 0 && static_cast<uint64_t>(v) > hi)) {
    return MakeError(s, path, "integer out of range");
  }
  *signed_out = v;
  *unsigned_out = static_cast<uint64_t>(v);
  return Status::Ok();
}

}  // namespace record_internal

// Reads one member from `j`; `path` names it in errors ("gpus[0].name").
template <class J, class T>
Status RecordValueFromJson(const J& j, const std::string& path, T* out, const JsonStyle& s) {
  using record_internal::Expected;
  using record_internal::MakeError;
  if constexpr (std::is_same_v<T, bool>) {
    if (!j.is_boolean()) return Expected(s, path, "boolean", j);
    *out = j.template get<bool>();
  } else if constexpr (std::is_integral_v<T>) {
    int64_t sv = 0;
    uint64_t uv = 0;
    const int64_t lo = static_cast<int64_t>(std::numeric_limits<T>::min());
    const auto hi = static_cast<uint64_t>(std::numeric_limits<T>::max());
    PILOT_RETURN_IF_ERROR(record_internal::ReadInteger(j, path, s, lo, hi, &sv, &uv));
    *out = std::is_signed_v<T> ? static_cast<T>(sv) : static_cast<T>(uv);
  } else if constexpr (std::is_same_v<T, double>) {
    if (j.is_number()) {
      const double v = j.template get<double>();
      if (!s.nonfinite_strings && !std::isfinite(v)) {
        return MakeError(s, path, "number out of range");
      }
      *out = v;
    } else if (s.nonfinite_strings && j.is_string()) {
      const auto& str = j.template get_ref<const std::string&>();
      if (str == "nan") *out = std::nan("");
      else if (str == "inf") *out = INFINITY;
      else if (str == "-inf") *out = -INFINITY;
      else return MakeError(s, path, "expected a number, got the string \"" + str.substr(0, 32) + "\"");
    } else {
      return Expected(s, path, "number", j);
    }
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (!j.is_string()) return Expected(s, path, "string", j);
    *out = j.template get<std::string>();
  } else if constexpr (NamedEnum<T>) {
    if (!j.is_string()) return Expected(s, path, "string", j);
    const auto& names = EnumNames(std::type_identity<T>{});
    const auto& str = j.template get_ref<const std::string&>();
    for (size_t i = 0; i < names.size(); ++i) {
      if (names[i] == str) {
        *out = static_cast<T>(i);
        return Status::Ok();
      }
    }
    return MakeError(s, path, record_internal::ChoiceError(names, str));
  } else if constexpr (IsOptional<T>::value) {
    if (j.is_null()) {
      out->reset();
      return Status::Ok();
    }
    typename T::value_type v{};
    PILOT_RETURN_IF_ERROR(RecordValueFromJson(j, path, &v, s));
    *out = std::move(v);
  } else if constexpr (IsVector<T>::value) {
    if (!j.is_array()) return Expected(s, path, "array", j);
    T v;
    v.reserve(j.size());
    for (size_t i = 0; i < j.size(); ++i) {
      typename T::value_type x{};
      PILOT_RETURN_IF_ERROR(RecordValueFromJson(j[i], path + "[" + std::to_string(i) + "]", &x, s));
      v.push_back(std::move(x));
    }
    *out = std::move(v);
  } else if constexpr (IsStringMap<T>::value) {
    if (!j.is_object()) return Expected(s, path, "object", j);
    T m;
    for (auto it = j.begin(); it != j.end(); ++it) {
      typename T::mapped_type x{};
      PILOT_RETURN_IF_ERROR(RecordValueFromJson(*it, record_internal::SubPath(path, it.key().c_str()), &x, s));
      m.emplace(it.key(), std::move(x));
    }
    *out = std::move(m);
  } else {
    static_assert(HasFields<T>, "a record member needs a Fields function");
    if (!j.is_object()) return Expected(s, path.empty() ? s.top : path, "object", j);
    record_internal::JsonReader<J> r{&j, path, &s, {}, Status::Ok()};
    Fields(r, *out, std::type_identity<T>{});
    PILOT_RETURN_IF_ERROR(r.status);
    return record_internal::UnknownKeys(j, path, s, r.known);
  }
  return Status::Ok();
}

// Reads record T from the JSON object `j`, strictly (see the top of this
// file). `*out` should hold the defaults that kMayBeAbsent keys keep.
template <class T, class J>
Status RecordFromJson(const J& j, T* out, const JsonStyle& style = kPinnedStyle) {
  static_assert(HasFields<T>);
  return RecordValueFromJson(j, "", out, style);
}

// The "schema" member of a top-level object, read and checked before the
// rest so that a file of another format or version is reported as such:
// CheckSchema's messages (core/base/json_util.h). `label` names the file.
template <class J>
Status CheckJsonSchema(const J& j, const std::string& label, const std::string& expected,
                       const JsonStyle& style = kPinnedStyle) {
  if (!j.is_object()) {
    return record_internal::Expected(style, style.top, "object", j).Context(label);
  }
  auto it = j.find("schema");
  if (it == j.end()) return record_internal::MakeError(style, "schema", "missing").Context(label);
  std::string found;
  PILOT_RETURN_IF_ERROR(RecordValueFromJson(*it, "schema", &found, style).Context(label));
  return CheckSchema(label, found, expected);
}

}  // namespace pilot
