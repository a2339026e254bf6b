// Host lists and the rendezvous port of the node stage.
#include "core/records/hostlist.h"

#include "core/base/strings.h"

namespace pilot {
namespace {

constexpr size_t kMaxHosts = 100000;

Status Bad(const std::string& list, const std::string& why) {
  return Status::Invalid("host list \"" + list + "\"", why);
}

// Splits at commas outside brackets.
Result<std::vector<std::string>> SplitTop(const std::string& list) {
  std::vector<std::string> parts;
  std::string cur;
  int depth = 0;
  for (char c : list) {
    if (c == '[') ++depth;
    if (c == ']' && --depth < 0) return Bad(list, "']' without '['");
    if (c == ',' && depth == 0) {
      parts.push_back(cur);
      cur.clear();
      continue;
    }
    cur.push_back(c);
  }
  if (depth != 0) return Bad(list, "'[' without ']'");
  parts.push_back(cur);
  return parts;
}

// Expands one name with zero or more bracket groups into `out`.
Status ExpandOne(const std::string& list, const std::string& name, std::vector<std::string>* out) {
  const size_t open = name.find('[');
  if (open == std::string::npos) {
    if (name.find(']') != std::string::npos) return Bad(list, "']' without '['");
    out->push_back(name);
    return Status::Ok();
  }
  const size_t close = name.find(']', open);
  if (close == std::string::npos) return Bad(list, "'[' without ']'");
  const std::string prefix = name.substr(0, open);
  const std::string body = name.substr(open + 1, close - open - 1);
  const std::string rest = name.substr(close + 1);
  if (body.empty()) return Bad(list, "empty brackets in \"" + name + "\"");
  std::vector<std::string> heads;
  size_t start = 0;
  while (start <= body.size()) {
    size_t comma = body.find(',', start);
    if (comma == std::string::npos) comma = body.size();
    const std::string item = body.substr(start, comma - start);
    start = comma + 1;
    if (item.empty()) return Bad(list, "empty range in \"" + name + "\"");
    const size_t dash = item.find('-');
    const std::string lo_s = item.substr(0, dash);
    const std::string hi_s = dash == std::string::npos ? lo_s : item.substr(dash + 1);
    uint64_t lo = 0, hi = 0;
    if (!ParseUnsigned(lo_s, &lo) || !ParseUnsigned(hi_s, &hi)) {
      return Bad(list, "\"" + item + "\" is not a number or a range a-b");
    }
    if (hi < lo) return Bad(list, "range \"" + item + "\" ends before it starts");
    if (hi - lo >= kMaxHosts) return Bad(list, "more than 100000 hosts");
    const size_t width = lo_s.size() > 1 && lo_s[0] == '0' ? lo_s.size() : 0;
    for (uint64_t v = lo; v <= hi; ++v) {
      std::string num = std::to_string(v);
      if (num.size() < width) num.insert(0, width - num.size(), '0');
      heads.push_back(prefix + num);
      if (heads.size() > kMaxHosts) return Bad(list, "more than 100000 hosts");
    }
  }
  std::vector<std::string> tails;
  PILOT_RETURN_IF_ERROR(ExpandOne(list, rest, &tails));
  for (const auto& h : heads) {
    for (const auto& t : tails) {
      out->push_back(h + t);
      if (out->size() > kMaxHosts) return Bad(list, "more than 100000 hosts");
    }
  }
  return Status::Ok();
}

}  // namespace

Result<std::vector<std::string>> ExpandHostlist(const std::string& list) {
  if (list.empty()) return Bad(list, "empty");
  PILOT_ASSIGN_OR_RETURN(std::vector<std::string> parts, SplitTop(list));
  std::vector<std::string> hosts;
  for (const auto& p : parts) {
    if (p.empty()) return Bad(list, "empty host name");
    PILOT_RETURN_IF_ERROR(ExpandOne(list, p, &hosts));
  }
  for (const auto& h : hosts) {
    if (h.empty()) return Bad(list, "empty host name");
  }
  return hosts;
}

int MasterPortForJob(uint64_t job_id) { return kPortBase + static_cast<int>(job_id % kPortSpan); }

}  // namespace pilot
