#include "core/records/srun_lines.h"

#include <cstdint>
#include <cstdlib>

#include "core/base/strings.h"

namespace pilot {
namespace {

constexpr size_t kMaxTasks = 100000;

bool Digits(const std::string& s) {
  return !s.empty() && s.size() <= 9 && s.find_first_not_of("0123456789") == std::string::npos;
}

// "0-1,3" -> 0 1 3.
bool ParseTasks(const std::string& list, std::vector<int>* out) {
  size_t at = 0;
  while (at <= list.size()) {
    size_t comma = list.find(',', at);
    if (comma == std::string::npos) comma = list.size();
    const std::string part = list.substr(at, comma - at);
    const size_t dash = part.find('-');
    const std::string lo = part.substr(0, dash);
    const std::string hi = dash == std::string::npos ? lo : part.substr(dash + 1);
    if (!Digits(lo) || !Digits(hi)) return false;
    const long a = std::strtol(lo.c_str(), nullptr, 10), b = std::strtol(hi.c_str(), nullptr, 10);
    if (b < a || out->size() + static_cast<size_t>(b - a + 1) > kMaxTasks) return false;
    for (long t = a; t <= b; ++t) out->push_back(static_cast<int>(t));
    at = comma + 1;
  }
  return !out->empty();
}

}  // namespace

std::optional<SrunTaskLine> ParseSrunTaskLine(const std::string& line) {
  static const std::string kPrefix = "srun: error: ";
  if (line.compare(0, kPrefix.size(), kPrefix) != 0) return std::nullopt;
  const std::string rest = line.substr(kPrefix.size());
  // NODE: task[s] LIST: WHAT (node names hold no ": ").
  const size_t c1 = rest.find(": task");
  if (c1 == std::string::npos || c1 == 0) return std::nullopt;
  SrunTaskLine t;
  t.node = rest.substr(0, c1);
  if (t.node.find_first_of(" :") != std::string::npos) return std::nullopt;
  size_t at = c1 + 6;  // after ": task"
  if (at < rest.size() && rest[at] == 's') ++at;
  if (at >= rest.size() || rest[at] != ' ') return std::nullopt;
  ++at;
  const size_t c2 = rest.find(": ", at);
  if (c2 == std::string::npos) return std::nullopt;
  if (!ParseTasks(rest.substr(at, c2 - at), &t.tasks)) return std::nullopt;
  t.what = rest.substr(c2 + 2);
  while (!t.what.empty() && (t.what.back() == '\r' || t.what.back() == ' ')) t.what.pop_back();
  if (t.what.empty()) return std::nullopt;
  return t;
}

std::optional<std::pair<int, std::string>> SplitSrunLabel(const std::string& line, int tasks) {
  size_t i = 0;
  while (i < line.size() && i < 8 && line[i] == ' ') ++i;
  const size_t first = i;
  int64_t id = 0;
  while (i < line.size() && i - first < 9 && line[i] >= '0' && line[i] <= '9') {
    id = id * 10 + (line[i++] - '0');
  }
  if (i == first || i >= line.size() || line[i] != ':' || id >= tasks) return std::nullopt;
  ++i;
  if (i < line.size() && line[i] == ' ') ++i;
  return std::make_pair(static_cast<int>(id), line.substr(i));
}

std::string SrunTaskText(std::string_view text, int task, int tasks) {
  std::string out;
  for (std::string_view line : SplitLines(text)) {
    auto split = SplitSrunLabel(std::string(line), tasks);
    if (!split || split->first != task) continue;
    out += split->second;
    out += '\n';
  }
  return out;
}

}  // namespace pilot
