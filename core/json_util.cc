#include "core/json_util.h"

#include <cmath>
#include <limits>

#include "core/atomic_file.h"

namespace pilot {
namespace {

Status FieldError(const std::string& label, const std::string& field, const std::string& detail) {
  std::string what = label;
  if (!field.empty()) what += ": " + field;
  return Status::Corrupt(what, detail);
}

bool IsInteger(const Json& j) { return j.is_number_integer(); }  // signed or unsigned

}  // namespace

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

Result<Json> ReadJsonFile(const std::string& path, const std::string& label, size_t max_bytes) {
  auto text = ReadFileLimited(path, max_bytes);
  if (!text.ok()) {
    if (text.status().code() == Code::kInvalid) {
      return Status::Corrupt(label, "larger than " + std::to_string(max_bytes) + " bytes");
    }
    return text.status();
  }
  return ParseJsonText(*text, label, max_bytes);
}

std::string DumpJson(const Json& j, int indent) {
  return j.dump(indent, ' ', /*ensure_ascii=*/false, Json::error_handler_t::replace);
}

ObjectReader::ObjectReader(const Json& value, std::string label, std::string path)
    : value_(&value), label_(std::move(label)), path_(std::move(path)) {
  if (!value.is_object()) {
    error_ = FieldError(label_, path_, std::string("expected object, got ") + value.type_name());
  }
}

std::string ObjectReader::FieldPath(std::string_view key) const {
  if (path_.empty()) return std::string(key);
  return path_ + "." + std::string(key);
}

void ObjectReader::Fail(std::string_view key, const std::string& detail) {
  Absorb(FieldError(label_, FieldPath(key), detail));
}

const Json* ObjectReader::Lookup(std::string_view key, Need need, Json::value_t type,
                                 const char* type_name) {
  if (!error_.ok()) return nullptr;
  seen_.emplace(key);
  auto it = value_->find(key);
  if (it == value_->end()) {
    if (need == kRequired) Fail(key, "missing");
    return nullptr;
  }
  bool good;
  switch (type) {
    case Json::value_t::number_integer:
      good = IsInteger(*it);
      break;
    case Json::value_t::number_float:
      good = it->is_number();
      break;
    default:
      good = it->type() == type;
  }
  if (!good) {
    Fail(key, std::string("expected ") + type_name + ", got " + it->type_name());
    return nullptr;
  }
  return &*it;
}

ObjectReader& ObjectReader::Str(std::string_view key, std::string* out, Need need) {
  if (const Json* j = Lookup(key, need, Json::value_t::string, "string")) {
    *out = j->get<std::string>();
  }
  return *this;
}

ObjectReader& ObjectReader::Int(std::string_view key, int64_t* out, Need need) {
  if (const Json* j = Lookup(key, need, Json::value_t::number_integer, "integer")) {
    if (j->is_number_unsigned() &&
        j->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      Fail(key, "integer out of range");
    } else {
      *out = j->get<int64_t>();
    }
  }
  return *this;
}

ObjectReader& ObjectReader::Int(std::string_view key, int* out, Need need) {
  int64_t v = *out;
  Int(key, &v, need);
  if (!error_.ok()) return *this;
  if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max()) {
    Fail(key, "integer out of range");
  } else {
    *out = static_cast<int>(v);
  }
  return *this;
}

ObjectReader& ObjectReader::Uint(std::string_view key, uint32_t* out, Need need) {
  int64_t v = *out;
  Int(key, &v, need);
  if (!error_.ok()) return *this;
  if (v < 0 || v > std::numeric_limits<uint32_t>::max()) {
    Fail(key, "integer out of range");
  } else {
    *out = static_cast<uint32_t>(v);
  }
  return *this;
}

ObjectReader& ObjectReader::Num(std::string_view key, double* out, Need need) {
  if (const Json* j = Lookup(key, need, Json::value_t::number_float, "number")) {
    double v = j->get<double>();
    if (!std::isfinite(v)) {
      Fail(key, "number out of range");
    } else {
      *out = v;
    }
  }
  return *this;
}

ObjectReader& ObjectReader::Bool(std::string_view key, bool* out, Need need) {
  if (const Json* j = Lookup(key, need, Json::value_t::boolean, "boolean")) *out = j->get<bool>();
  return *this;
}

ObjectReader& ObjectReader::StrList(std::string_view key, std::vector<std::string>* out,
                                    Need need) {
  const Json* j = Lookup(key, need, Json::value_t::array, "array");
  if (j == nullptr) return *this;
  std::vector<std::string> v;
  for (size_t i = 0; i < j->size(); ++i) {
    if (!(*j)[i].is_string()) {
      Fail(std::string(key) + "[" + std::to_string(i) + "]",
           std::string("expected string, got ") + (*j)[i].type_name());
      return *this;
    }
    v.push_back((*j)[i].get<std::string>());
  }
  *out = std::move(v);
  return *this;
}

ObjectReader& ObjectReader::StrMap(std::string_view key, std::map<std::string, std::string>* out,
                                   Need need) {
  const Json* j = Lookup(key, need, Json::value_t::object, "object");
  if (j == nullptr) return *this;
  std::map<std::string, std::string> m;
  for (auto it = j->begin(); it != j->end(); ++it) {
    if (!it->is_string()) {
      Fail(std::string(key) + "." + it.key(),
           std::string("expected string, got ") + it->type_name());
      return *this;
    }
    m[it.key()] = it->get<std::string>();
  }
  *out = std::move(m);
  return *this;
}

ObjectReader& ObjectReader::NumMap(std::string_view key, std::map<std::string, double>* out,
                                   Need need) {
  const Json* j = Lookup(key, need, Json::value_t::object, "object");
  if (j == nullptr) return *this;
  std::map<std::string, double> m;
  for (auto it = j->begin(); it != j->end(); ++it) {
    if (!it->is_number() || !std::isfinite(it->get<double>())) {
      Fail(std::string(key) + "." + it.key(),
           std::string("expected number, got ") + it->type_name());
      return *this;
    }
    m[it.key()] = it->get<double>();
  }
  *out = std::move(m);
  return *this;
}

ObjectReader& ObjectReader::Enum(std::string_view key, std::string* out,
                                 const std::vector<std::string>& allowed, Need need) {
  std::string v;
  bool present = value_->is_object() && value_->contains(key);
  Str(key, &v, need);
  if (!error_.ok() || !present) return *this;
  for (const auto& a : allowed) {
    if (a == v) {
      *out = v;
      return *this;
    }
  }
  std::string list;
  for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + ("\"" + a + "\"");
  Fail(key, "expected one of " + list + ", got \"" + v + "\"");
  return *this;
}

ObjectReader& ObjectReader::Object(std::string_view key,
                                   const std::function<void(ObjectReader&)>& fn, Need need) {
  const Json* j = Lookup(key, need, Json::value_t::object, "object");
  if (j == nullptr) return *this;
  ObjectReader sub(*j, label_, FieldPath(key));
  fn(sub);
  Absorb(sub.Finish());
  return *this;
}

ObjectReader& ObjectReader::Ignore(std::string_view key) {
  seen_.emplace(key);
  return *this;
}

ObjectReader& ObjectReader::AllowUnknownKeys() {
  allow_unknown_ = true;
  return *this;
}

Status ObjectReader::Finish() {
  if (!error_.ok() || allow_unknown_) return error_;
  for (auto it = value_->begin(); it != value_->end(); ++it) {
    if (seen_.find(it.key()) == seen_.end()) {
      return FieldError(label_, FieldPath(it.key()), "unknown field");
    }
  }
  return Status::Ok();
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
