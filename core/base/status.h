// Status and Result<T>: how every expected failure travels in slurm-pilot.
//
// A Status is either OK or carries a code and a message. Messages are written
// for people and follow the house format "pilot: what: detail"; the "pilot: "
// prefix is added by ToString(), never stored, so messages compose:
//   Status::Invalid("cfg.toml:12: training.seq_len", "must be > 0")
//   .ToString() == "pilot: cfg.toml:12: training.seq_len: must be > 0"
// An optional hint ("HINT: ...") tells the user what to do next.
//
// Thread-safety: values; no shared state.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace pilot {

enum class Code {
  kOk = 0,
  kInvalid,      // bad input from a user: config, flag, file contents
  kNotFound,     // a file, job or key that does not exist
  kIoError,      // the operating system said no
  kCorrupt,      // a file exists but its contents fail a check (hash, schema)
  kPermission,   // not allowed (user vs root, signature)
  kUnavailable,  // a remote service did not answer (registry, receiver)
  kInternal,     // a bug in this program
};

class Status {
 public:
  Status() = default;  // OK
  static Status Ok() { return Status(); }
  static Status Invalid(std::string what, std::string detail = {}) {
    return Status(Code::kInvalid, std::move(what), std::move(detail));
  }
  static Status NotFound(std::string what, std::string detail = {}) {
    return Status(Code::kNotFound, std::move(what), std::move(detail));
  }
  static Status IoError(std::string what, std::string detail = {}) {
    return Status(Code::kIoError, std::move(what), std::move(detail));
  }
  static Status Corrupt(std::string what, std::string detail = {}) {
    return Status(Code::kCorrupt, std::move(what), std::move(detail));
  }
  static Status Permission(std::string what, std::string detail = {}) {
    return Status(Code::kPermission, std::move(what), std::move(detail));
  }
  static Status Unavailable(std::string what, std::string detail = {}) {
    return Status(Code::kUnavailable, std::move(what), std::move(detail));
  }
  static Status Internal(std::string what, std::string detail = {}) {
    return Status(Code::kInternal, std::move(what), std::move(detail));
  }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& what() const { return what_; }
  const std::string& detail() const { return detail_; }
  const std::string& hint() const { return hint_; }

  // Returns a copy with a hint attached (printed on its own line).
  Status WithHint(std::string hint) const {
    Status s = *this;
    s.hint_ = std::move(hint);
    return s;
  }
  // Returns a copy whose `what` is prefixed with more context:
  // Invalid("x", "y").Context("file.toml") -> "file.toml: x: y".
  Status Context(const std::string& outer) const {
    Status s = *this;
    s.what_ = what_.empty() ? outer : outer + ": " + what_;
    return s;
  }

  // "what: detail" (no prefix, no hint).
  std::string Message() const {
    if (ok()) return "ok";
    if (detail_.empty()) return what_;
    if (what_.empty()) return detail_;
    return what_ + ": " + detail_;
  }
  // "pilot: what: detail" and, when set, "\nHINT: hint".
  std::string ToString() const {
    if (ok()) return "ok";
    std::string s = "pilot: " + Message();
    if (!hint_.empty()) s += "\nHINT: " + hint_;
    return s;
  }

 private:
  Status(Code c, std::string what, std::string detail)
      : code_(c), what_(std::move(what)), detail_(std::move(detail)) {}
  Code code_ = Code::kOk;
  std::string what_;
  std::string detail_;
  std::string hint_;
};

// Result<T>: a T or a non-OK Status.
// REQUIRES: constructing from a Status only with a non-OK status.
template <typename T>
class Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status s) : v_(std::move(s)) {      // NOLINT
    assert(!std::get<Status>(v_).ok());
  }
  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  // REQUIRES: ok()
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace pilot

#define PILOT_RETURN_IF_ERROR(expr)        \
  do {                                     \
    ::pilot::Status _pilot_s = (expr);     \
    if (!_pilot_s.ok()) return _pilot_s;   \
  } while (0)

#define PILOT_CONCAT_INNER(a, b) a##b
#define PILOT_CONCAT(a, b) PILOT_CONCAT_INNER(a, b)
// PILOT_ASSIGN_OR_RETURN(auto x, F()); returns F()'s status on error.
#define PILOT_ASSIGN_OR_RETURN(lhs, expr)                         \
  auto PILOT_CONCAT(_pilot_r, __LINE__) = (expr);                 \
  if (!PILOT_CONCAT(_pilot_r, __LINE__).ok())                     \
    return PILOT_CONCAT(_pilot_r, __LINE__).status();             \
  lhs = std::move(PILOT_CONCAT(_pilot_r, __LINE__)).value()
