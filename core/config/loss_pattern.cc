#include "core/config/loss_pattern.h"

#include <re2/re2.h>

namespace pilot {
namespace {

constexpr char kExample[] = "e.g. \"loss[=:] *([0-9.eE+-]+)\"";

std::shared_ptr<const re2::RE2> CompileLossPattern(std::string_view pattern) {
  re2::RE2::Options o;
  o.set_log_errors(false);  // the error travels in Check(), not on stderr
  return std::make_shared<const re2::RE2>(re2::StringPiece(pattern.data(), pattern.size()), o);
}

// What a pattern written for std::regex (ECMAScript) may use that RE2 has
// not: RE2's error_arg() is the offending piece ("\1", "(?=", "(?!", "(?<").
std::string HintFor(const re2::RE2& re) {
  const std::string& arg = re.error_arg();
  const bool backreference =
      re.error_code() == re2::RE2::ErrorBadEscape && arg.size() == 2 && arg[1] >= '0' && arg[1] <= '9';
  const bool lookaround = re.error_code() == re2::RE2::ErrorBadPerlOp &&
                          (arg == "(?=" || arg == "(?!" || arg == "(?<");
  if (backreference || lookaround) {
    return "loss_pattern is RE2's syntax, which matches in time linear in the line and so has "
           "no backreferences (\\1) and no lookaround ((?=, (?!, (?<=, (?<!; a named group is "
           "(?P<name>...)): match the loss with one plain group, " +
           std::string(kExample);
  }
  return "loss_pattern is RE2's syntax (pilot.toml(5)), " + std::string(kExample);
}

}  // namespace

LossPattern::LossPattern(std::string_view pattern)
    : pattern_(pattern), re_(CompileLossPattern(pattern)) {}

Status LossPattern::Check() const {
  if (!re_->ok()) {
    return Status::Invalid("", "is not a regular expression: " + re_->error())
        .WithHint(HintFor(*re_));
  }
  const int groups = re_->NumberOfCapturingGroups();
  if (groups != 1) {
    return Status::Invalid("", "must have exactly one group (the loss), has " +
                                   std::to_string(groups))
        .WithHint(kExample);
  }
  return Status::Ok();
}

std::optional<std::string_view> LossPattern::FirstGroup(std::string_view line) const {
  if (!re_->ok() || re_->NumberOfCapturingGroups() != 1) return std::nullopt;
  re2::StringPiece groups[2];
  if (!re_->Match(re2::StringPiece(line.data(), line.size()), 0, line.size(),
                  re2::RE2::UNANCHORED, groups, 2) ||
      groups[1].data() == nullptr) {
    return std::nullopt;
  }
  return std::string_view(groups[1].data(), groups[1].size());
}

}  // namespace pilot
