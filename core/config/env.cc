#include "core/config/env.h"

#include <algorithm>

#include "core/base/strings.h"

namespace pilot {
namespace {

bool IsNameStart(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; }
bool IsNameChar(char c) { return IsNameStart(c) || (c >= '0' && c <= '9'); }

std::string KnownList() {
  std::vector<std::string> names;
  for (const std::string& n : KnownPathVariables()) names.push_back("$" + n);
  return Join(names, ", ");
}

}  // namespace

const std::vector<std::string>& KnownPathVariables() {
  static const std::vector<std::string> kNames = {"USER", "HOME", "SLURM_JOB_ID",
                                                  "SLURM_SUBMIT_DIR"};
  return kNames;
}

Result<std::string> ExpandVariables(std::string_view text, const VariableLookup* lookup) {
  std::string out;
  size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (c != '$') {
      out += c;
      ++i;
      continue;
    }
    if (i + 1 < text.size() && text[i + 1] == '$') {
      out += '$';
      i += 2;
      continue;
    }
    std::string name;
    size_t next;
    if (i + 1 < text.size() && text[i + 1] == '{') {
      const size_t close = text.find('}', i + 2);
      if (close == std::string_view::npos) {
        return Status::Invalid("", "unterminated ${ in " + Quote(text));
      }
      name = std::string(text.substr(i + 2, close - i - 2));
      next = close + 1;
      if (name.empty() || !IsNameStart(name[0]) ||
          !std::all_of(name.begin(), name.end(), IsNameChar)) {
        return Status::Invalid("", "bad variable name ${" + name + "} in " + Quote(text));
      }
    } else {
      size_t j = i + 1;
      if (j >= text.size() || !IsNameStart(text[j])) {
        return Status::Invalid("", "'$' must be followed by a variable name in " + Quote(text))
            .WithHint("write $$ for a literal '$'");
      }
      while (j < text.size() && IsNameChar(text[j])) ++j;
      name = std::string(text.substr(i + 1, j - i - 1));
      next = j;
    }
    const auto& known = KnownPathVariables();
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      std::string hint = "paths may use " + KnownList();
      if (auto m = ClosestMatch(name, known)) hint = "did you mean $" + *m + "? " + hint;
      return Status::Invalid("", "unknown variable $" + name + " in " + Quote(text)).WithHint(hint);
    }
    if (lookup == nullptr) {
      out.append(text.substr(i, next - i));
    } else {
      std::optional<std::string> value = (*lookup)(name);
      if (!value) {
        Status s = Status::Invalid("", "$" + name + " is not set (in " + Quote(text) + ")");
        if (StartsWith(name, "SLURM_")) {
          s = s.WithHint("$" + name + " is set only inside a Slurm job");
        }
        return s;
      }
      out += *value;
    }
    i = next;
  }
  return out;
}

}  // namespace pilot
