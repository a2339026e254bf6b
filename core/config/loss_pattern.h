// program.loss_pattern (pilot.toml(5), pilot-program(7)): the regular
// expression whose one capturing group is the loss on a line of a user's
// program's standard output, compiled once with RE2.
//
// RE2, not std::regex: the pattern is the user's and the lines are the
// program's, and both reach the root supervisor's only thread. RE2 runs in
// time linear in the line's length whatever the pattern (a backtracking
// engine spends exponential time on "(?:a|aa)*c(\S+)" against a line of
// a's, and recurses once per character), and a pattern needing more than
// RE2's memory budget (8 MiB) is refused when it is compiled. The price is
// RE2's syntax: no backreferences, no lookaround. The config loader checks
// the pattern with this class, so a pattern accepted at submission is the
// one the supervisor runs.
//
// The pattern is UTF-8 (TOML's strings are); a line may hold any bytes:
// "." and negated classes do not match bytes of invalid UTF-8.
//
// Thread-safety: a value; its const methods may run in several threads
// (copies share the compiled expression, which RE2 makes safe to share).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "core/base/status.h"

namespace re2 {
class RE2;
}

namespace pilot {

class LossPattern {
 public:
  // Compiles `pattern`. Never throws for a bad pattern: it gives a
  // LossPattern whose Check() says why and which matches no line.
  explicit LossPattern(std::string_view pattern);

  // OK when RE2 compiled the pattern and it has exactly one capturing group
  // ("(...)" or "(?P<name>...)"; "(?:...)" does not count). Otherwise
  // kInvalid with an empty `what` (the caller names the key), RE2's error
  // text or the group count as the detail, and a hint where one helps (a
  // backreference or a lookaround, which std::regex accepted).
  Status Check() const;
  bool ok() const { return Check().ok(); }

  const std::string& pattern() const { return pattern_; }

  // The text of the first capturing group at the leftmost match of the
  // pattern anywhere in `line` (an unanchored search, as Perl's), a view
  // into `line`; nullopt when the pattern does not match, the group took no
  // part in the match, or the pattern is not ok(). Linear in line.size().
  std::optional<std::string_view> FirstGroup(std::string_view line) const;

 private:
  std::string pattern_;
  std::shared_ptr<const re2::RE2> re_;
};

}  // namespace pilot
