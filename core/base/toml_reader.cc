#include "core/base/toml_reader.h"

#include <cmath>
#include <sstream>

#include "core/base/strings.h"

namespace pilot {

std::optional<toml::table> ParseToml(std::string_view text, const std::string& file,
                                     TomlSyntaxError* error) {
  try {
    return toml::parse(text, std::string_view(file));
  } catch (const toml::parse_error& e) {
    *error = TomlSyntaxError{TomlLine(e.source()), std::string(e.description())};
    return std::nullopt;
  }
}

Result<toml::table> ParseTomlText(std::string_view text, const std::string& file) {
  TomlSyntaxError e;
  std::optional<toml::table> t = ParseToml(text, file, &e);
  if (!t) {
    return Status::Invalid(file + ":" + std::to_string(e.line), "syntax error: " + e.description);
  }
  return std::move(*t);
}

std::string TomlTypeName(const toml::node& n, TomlNaming naming) {
  const bool value = naming == TomlNaming::kTypeAndValue;
  switch (n.type()) {
    case toml::node_type::string:
      return value ? "string " + Quote(n.as_string()->get()) : "a string";
    case toml::node_type::integer:
      return value ? "integer " + std::to_string(n.as_integer()->get()) : "an integer";
    case toml::node_type::floating_point:
      return value ? "float " + FormatDouble(n.as_floating_point()->get()) : "a float";
    case toml::node_type::boolean:
      if (!value) return "a boolean";
      return n.as_boolean()->get() ? "true" : "false";
    case toml::node_type::array:
      return "an array";
    case toml::node_type::table:
      return "a table";
    case toml::node_type::date:
      return value ? "a date" : "a date/time";
    case toml::node_type::time:
      return value ? "a time" : "a date/time";
    case toml::node_type::date_time:
      return value ? "a date-time" : "a date/time";
    default:
      return value ? "nothing" : "a date/time";
  }
}

int TomlLine(const toml::source_region& r) { return static_cast<int>(r.begin.line); }

std::optional<double> TomlNumber(const toml::node& n) {
  if (n.is_floating_point()) return n.as_floating_point()->get();
  if (n.is_integer()) return static_cast<double>(n.as_integer()->get());
  return std::nullopt;
}

TomlReader::TomlReader(const toml::table& table, std::string file, std::string prefix)
    : table_(&table), file_(std::move(file)), prefix_(std::move(prefix)) {}

std::string TomlReader::Name(std::string_view key) const {
  if (key.empty()) return prefix_;
  return prefix_.empty() ? std::string(key) : prefix_ + "." + std::string(key);
}

int TomlReader::LineOf(std::string_view key) const {
  for (auto&& [k, v] : *table_) {
    if (k.str() == key) return TomlLine(k.source());
  }
  return 0;
}

Status TomlReader::Error(std::string_view key, const std::string& detail) const {
  int line = LineOf(key);
  if (line == 0) line = TomlLine(table_->source());
  std::string where = file_;
  if (line > 0) where += ":" + std::to_string(line);
  return Status::Invalid(where + ": " + Name(key), detail);
}

void TomlReader::Fail(std::string_view key, const std::string& detail) {
  Absorb(Error(key, detail));
}

const toml::node* TomlReader::Get(std::string_view key, Need need) {
  if (!error_.ok()) return nullptr;
  seen_.emplace(key);
  const toml::node* n = table_->get(key);
  if (n == nullptr && need == kRequired) Fail(key, "missing (required)");
  return n;
}

TomlReader& TomlReader::Str(std::string_view key, std::string* out, Need need) {
  if (const toml::node* n = Get(key, need)) {
    if (auto v = n->value<std::string>(); v && n->is_string()) {
      *out = *v;
    } else {
      Fail(key, std::string("expected a string, got ") + TomlTypeName(*n));
    }
  }
  return *this;
}

TomlReader& TomlReader::Int64(std::string_view key, int64_t* out, int64_t lo, int64_t hi,
                              Need need) {
  if (const toml::node* n = Get(key, need)) {
    if (!n->is_integer()) {
      Fail(key, std::string("expected an integer, got ") + TomlTypeName(*n));
      return *this;
    }
    int64_t v = n->as_integer()->get();
    if (v < lo || v > hi) {
      Fail(key, "must be between " + std::to_string(lo) + " and " + std::to_string(hi) + ", got " +
                    std::to_string(v));
      return *this;
    }
    *out = v;
  }
  return *this;
}

TomlReader& TomlReader::Int(std::string_view key, int* out, int64_t lo, int64_t hi, Need need) {
  int64_t v = *out;
  Int64(key, &v, lo, hi, need);
  if (ok()) *out = static_cast<int>(v);
  return *this;
}

TomlReader& TomlReader::Num(std::string_view key, double* out, double lo, double hi, Need need) {
  if (const toml::node* n = Get(key, need)) {
    const std::optional<double> number = TomlNumber(*n);
    if (!number) {
      Fail(key, std::string("expected a number, got ") + TomlTypeName(*n));
      return *this;
    }
    const double v = *number;
    if (!std::isfinite(v) || v < lo || v > hi) {
      Fail(key, "must be between " + FormatDouble(lo) + " and " + FormatDouble(hi) + ", got " +
                    FormatDouble(v));
      return *this;
    }
    *out = v;
  }
  return *this;
}

TomlReader& TomlReader::Bool(std::string_view key, bool* out, Need need) {
  if (const toml::node* n = Get(key, need)) {
    if (!n->is_boolean()) {
      Fail(key, std::string("expected a boolean, got ") + TomlTypeName(*n));
    } else {
      *out = n->as_boolean()->get();
    }
  }
  return *this;
}

TomlReader& TomlReader::StrList(std::string_view key, std::vector<std::string>* out, Need need) {
  if (const toml::node* n = Get(key, need)) {
    const toml::array* a = n->as_array();
    if (a == nullptr) {
      Fail(key, std::string("expected an array of strings, got ") + TomlTypeName(*n));
      return *this;
    }
    std::vector<std::string> v;
    for (size_t i = 0; i < a->size(); ++i) {
      const toml::node& e = *a->get(i);
      if (!e.is_string()) {
        Fail(key, "element " + std::to_string(i) + ": expected a string, got " + TomlTypeName(e));
        return *this;
      }
      v.push_back(e.as_string()->get());
    }
    *out = std::move(v);
  }
  return *this;
}

TomlReader& TomlReader::Enum(std::string_view key, std::string* out,
                             const std::vector<std::string>& allowed, Need need) {
  std::string v = *out;
  Str(key, &v, need);
  if (!ok()) return *this;
  for (const auto& a : allowed) {
    if (a == v) {
      *out = v;
      return *this;
    }
  }
  std::vector<std::string> quoted;
  for (const auto& a : allowed) quoted.push_back(Quote(a));
  Fail(key, "must be one of " + Join(quoted, ", ") + ", got " + Quote(v));
  return *this;
}

TomlReader& TomlReader::Table(std::string_view key, const std::function<void(TomlReader&)>& fn,
                              Need need) {
  if (const toml::node* n = Get(key, need)) {
    const toml::table* t = n->as_table();
    if (t == nullptr) {
      Fail(key, std::string("expected a table, got ") + TomlTypeName(*n));
      return *this;
    }
    TomlReader sub(*t, file_, Name(key));
    fn(sub);
    Absorb(sub.Finish());
  }
  return *this;
}

TomlReader& TomlReader::EachTable(const std::function<void(const std::string&, TomlReader&)>& fn) {
  for (auto&& [k, v] : *table_) {
    if (!error_.ok()) break;
    std::string name(k.str());
    seen_.insert(name);
    const toml::table* t = v.as_table();
    if (t == nullptr) {
      Fail(name, std::string("expected a table, got ") + TomlTypeName(v));
      break;
    }
    TomlReader sub(*t, file_, Name(name));
    fn(name, sub);
    Absorb(sub.Finish());
  }
  return *this;
}

Status TomlReader::Finish() {
  if (!error_.ok()) return error_;
  std::vector<std::string> known(seen_.begin(), seen_.end());
  for (auto&& [k, v] : *table_) {
    if (seen_.find(k.str()) != seen_.end()) continue;
    Status s = Error(k.str(), v.is_table() ? "unknown section" : "unknown key");
    if (auto m = ClosestMatch(k.str(), known)) s = s.WithHint("did you mean " + Name(*m) + "?");
    return s;
  }
  return Status::Ok();
}

}  // namespace pilot
