// A Python traceback's shape in one stream's lines (python_traceback.h).
#include "core/records/python_traceback.h"

#include <map>
#include <utility>

#include "core/base/strings.h"

namespace pilot::pyerr {
namespace {

// Continuation lines of a message read at most.
constexpr size_t kMaxMessageLines = 40;

// A DataLoader worker's error inside the message of the one it raised again.
constexpr sv kWorkerHeader = "Original Traceback (most recent call last):";
// A group's, as a line of its parent group ("| Exception Group ...").
constexpr sv kGroupHeader = "Exception Group Traceback (most recent call last):";
constexpr sv kCause = "The above exception was the direct cause of the following exception:";
constexpr sv kContext = "During handling of the above exception, another exception occurred:";

bool Alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool Digit(char c) { return c >= '0' && c <= '9'; }

}  // namespace

sv RightTrim(sv s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\r' || s.back() == '\t')) {
    s.remove_suffix(1);
  }
  return s;
}

bool Number(sv s, size_t* i, int64_t* out) {
  const size_t first = *i;
  int64_t n = 0;
  while (*i < s.size() && *i - first < 9 && Digit(s[*i])) n = n * 10 + (s[(*i)++] - '0');
  *out = n;
  return *i > first;
}

size_t BracketPrefix(sv s, sv* name, int* number) {
  if (s.size() < 4 || s[0] != '[') return 0;
  size_t i = 1;
  while (i < s.size() && i < 40 && Alpha(s[i])) ++i;
  const size_t letters = i;
  int64_t n = 0;
  if (letters == 1 || !Number(s, &i, &n) || i - letters > 6) return 0;
  if (i + 1 >= s.size() || s[i] != ']' || s[i + 1] != ':') return 0;
  *name = s.substr(1, letters - 1);
  *number = static_cast<int>(n);
  i += 2;
  if (*name == "rank" && i < s.size() && s[i] == ' ') ++i;
  return i;
}

bool ParseFrame(sv s, Frame* f, bool faulthandler) {
  static constexpr sv kFile = "  File \"";
  static constexpr sv kLine = "\", line ";
  if (s.substr(0, kFile.size()) != kFile) return false;
  s = RightTrim(s);
  const size_t q = s.rfind(kLine);
  if (q == kNone || q < kFile.size()) return false;
  size_t i = q + kLine.size();
  if (!Number(s, &i, &f->line)) return false;
  f->file = s.substr(kFile.size(), q - kFile.size());
  const sv rest = s.substr(i);
  const sv in = faulthandler ? sv(" in ") : sv(", in ");
  if (rest.empty() && !faulthandler) {
    f->function = {};
    return true;
  }
  if (rest.substr(0, in.size()) != in) return false;
  f->function = rest.substr(in.size());
  return true;
}

bool LibraryFile(sv file) {
  return file.find("/site-packages/") != kNone || file.find("/dist-packages/") != kNone ||
         file.find("/lib/python3") != kNone || file.substr(0, 8) == "<frozen ";
}

void SetWhere(const Frame& f, sv source, PythonError* e) {
  e->file = Text(f.file);
  e->line = f.line;
  e->function = Text(f.function);
  e->source = Text(source);
}

void SetCaller(const Frame& f, PythonError* e) {
  e->caller_file = Text(f.file);
  e->caller_line = f.line;
  e->caller_function = Text(f.function);
}

namespace {

// Python 3.11's marks under a source line: `    ^^^^^`, `    ~~~^^^`.
bool CaretLine(sv s) {
  s = Trim(s);
  return !s.empty() && s.find_first_not_of("^~") == kNone;
}

// `Type: message`, `module.Type: message`, a bare `Type`.
bool ParseExceptionLine(sv s, sv* type, sv* message) {
  s = RightTrim(s);
  if (s.empty() || !Alpha(s[0])) return false;
  size_t i = 1;
  // Names, dots, and a class's "<locals>".
  const auto name = [](char c) { return Alpha(c) || Digit(c) || c == '.' || c == '<' || c == '>'; };
  while (i < s.size() && i < 256 && name(s[i])) ++i;
  if (s[i - 1] == '.') return false;
  if (i == s.size()) {
    *type = s;
    *message = {};
    return true;
  }
  if (s[i] != ':' || (i + 1 < s.size() && s[i + 1] != ' ')) return false;
  *type = s.substr(0, i);
  *message = i + 2 <= s.size() ? s.substr(i + 2) : sv();
  return true;
}

}  // namespace

bool PlainHeader(sv s) {
  s = RightTrim(s);
  return s == kHeader || s == kWorkerHeader || s == kGroupHeader;
}

namespace {

// The column of a group's `+` in "  + Exception Group Traceback ...", or kNone.
size_t GroupHeaderColumn(sv s) {
  const size_t c = s.find_first_not_of(' ');
  const bool header =
      c != kNone && s.substr(c, 2) == "+ " && RightTrim(s.substr(c + 2)) == kGroupHeader;
  return header ? c : kNone;
}

// The first column that is not a space, and whether a group's '|' or '+'
// is there.
size_t BarColumn(sv s) {
  const size_t c = s.find_first_not_of(' ');
  return c != kNone && (s[c] == '|' || s[c] == '+') ? c : kNone;
}

}  // namespace

std::optional<Found> FinalOf(const Lines& lines, int depth) {
  std::vector<Found> all = Tracebacks(lines, depth);
  if (all.empty()) return std::nullopt;
  return std::move(all.back());
}

namespace {

// A group's lines, '|' and '+' at column `col` and deeper (its own lines
// "| ...", then "+-+---- 1 ----" and its first sub-exception's lines at
// col + 2, then the others'): the group's exception, or of its first
// sub-exception when the group is the last of its chain.
std::optional<PythonError> GroupError(const Lines& block, size_t col, int depth) {
  Lines own;
  std::map<size_t, Lines> first_sub;  // after which own line
  enum { kOwn, kFirst, kOthers } part = kOwn;
  for (const Line& l : block) {
    const size_t c = BarColumn(l.text);
    if (c == kNone) continue;
    if (c == col && l.text[c] == '|') {
      part = kOwn;
      own.push_back({c + 2 <= l.text.size() ? l.text.substr(c + 2) : sv(), l.at});
    } else if (c == col && l.text.substr(c, 3) == "+-+") {
      part = own.empty() ? kOthers : kFirst;
    } else if (part == kFirst && c == col + 2 && l.text[c] == '+' && l.text.substr(c, 3) != "+-+") {
      part = kOthers;
    } else if (part == kFirst && c >= col + 2) {
      first_sub[own.size() - 1].push_back({l.text.substr(col + 2), l.at});
    }
  }
  std::optional<Found> final = FinalOf(own, depth + 1);
  for (size_t k = 0; !final && k < own.size(); ++k) {
    // An exception printed without a traceback (made, never raised): its line alone.
    sv type, message;
    if (Trim(own[k].text).empty()) continue;
    if (!ParseExceptionLine(own[k].text, &type, &message)) break;
    final.emplace();
    final->begin = final->exc = k;
    final->end = k + 1;
    final->error.type = Text(type);
    final->error.message = Text(Trim(message));
  }
  if (!final) return std::nullopt;
  auto sub = first_sub.find(final->exc);
  if (sub == first_sub.end() || depth >= kMaxDepth) return final->error;
  std::optional<PythonError> inner = GroupError(sub->second, 0, depth + 1);
  if (!inner) return final->error;
  if (inner->file.empty()) {
    // A sub-exception made but never raised: where the group was.
    const PythonError& g = final->error;
    inner->file = g.file;
    inner->line = g.line;
    inner->function = g.function;
    inner->source = g.source;
    inner->caller_file = g.caller_file;
    inner->caller_line = g.caller_line;
    inner->caller_function = g.caller_function;
  }
  return inner;
}

// The lines of the group whose first line is lines[i] ('|' or '+' at
// `col`), up to the first line that is not its; `end` one past them.
Lines GroupBlock(const Lines& lines, size_t i, size_t col, size_t* end) {
  Lines block;
  size_t j = i;
  for (; j < lines.size(); ++j) {
    const size_t c = BarColumn(lines[j].text);
    if (c == kNone || c < col) break;
    block.push_back(lines[j]);
  }
  *end = j;
  return block;
}

// A group starting at lines[i]: "  + Exception Group Traceback ...", or a
// group printed without a traceback ("  | ExceptionGroup: ..." followed by
// its "+-+"). `*skip`: past the lines that are not one.
std::optional<Found> GroupAt(const Lines& lines, size_t i, int depth, size_t* skip) {
  static const std::string kBarHeader = "| " + std::string(kGroupHeader);
  const sv first = lines[i].text;
  size_t col = GroupHeaderColumn(first);
  Lines block;
  size_t end = i + 1;
  if (col != kNone) {
    // The header read as the group's own first line; every line from the
    // group's column on.
    block.push_back({kBarHeader, lines[i].at});
    for (const Line& l : GroupBlock(lines, i + 1, col, &end)) {
      block.push_back({l.text.substr(col), l.at});
    }
    col = 0;
  } else {
    col = BarColumn(first);
    if (col != kNone) block = GroupBlock(lines, i, col, &end);
    bool group = false;
    for (const Line& l : block) group = group || l.text.substr(col, 3) == "+-+";
    if (col == kNone || first[col] != '|' || !group) {
      *skip = end;
      return std::nullopt;
    }
  }
  *skip = end;
  std::optional<PythonError> e = GroupError(block, col, depth);
  if (!e) return std::nullopt;
  Found f;
  f.begin = i;
  f.exc = end - 1;
  f.end = end;
  f.error = std::move(*e);
  return f;
}

// The traceback whose header (or first frame, when the header was cut off
// or never printed) is lines[i].
// `*skip`: past the lines that cannot start one when there is none.
std::optional<Found> TracebackAt(const Lines& lines, size_t i, int depth, size_t* skip) {
  const sv first = lines[i].text;
  if (GroupHeaderColumn(first) != kNone || BarColumn(first) != kNone) {
    return GroupAt(lines, i, depth, skip);
  }
  const bool header = PlainHeader(first);
  size_t j = header ? i + 1 : i;
  Frame last, program;
  bool framed = false, programs = false;
  sv source;
  for (; j < lines.size(); ++j) {
    const sv s = lines[j].text;
    Frame f;
    if (ParseFrame(s, &f)) {
      last = f;
      framed = true;
      source = {};
      if (!LibraryFile(f.file)) {
        program = f;
        programs = true;
      }
    } else if (s.substr(0, 4) == "    ") {
      if (framed && source.empty() && !CaretLine(s)) source = Trim(s);
    } else if (s.substr(0, 26) != "  [Previous line repeated ") {
      break;
    }
  }
  *skip = j;
  if ((!header && !framed) || j >= lines.size()) return std::nullopt;
  sv type, message;
  if (!ParseExceptionLine(lines[j].text, &type, &message)) return std::nullopt;
  Found found;
  found.begin = i;
  found.exc = j;
  PythonError& e = found.error;
  e.type = Text(type);
  e.message = Text(Trim(message));
  // A message of several lines: those indented after the first (a
  // state_dict's "\tMissing key(s) ..."); the next unindented line is
  // someone else's.
  size_t k = j + 1;
  for (; k < lines.size() && k - j <= kMaxMessageLines; ++k) {
    const sv s = lines[k].text;
    Frame f;
    if (s.empty() || (s[0] != ' ' && s[0] != '\t') || Trim(s).empty() || ParseFrame(s, &f) ||
        BarColumn(s) != kNone) {
      break;
    }
    if (e.message.size() > 2 * kMaxErrorText) continue;
    if (!e.message.empty()) e.message += ' ';
    e.message += Trim(s);
  }
  found.end = k;
  if (framed) SetWhere(last, source, &e);
  if (framed && programs && LibraryFile(last.file)) SetCaller(program, &e);
  return found;
}

// Whether a chain's separator comes before lines[i] (blank lines between).
bool Chained(const Lines& lines, size_t i) {
  for (size_t back = 1; back <= 3 && back <= i; ++back) {
    const sv s = Trim(lines[i - back].text);
    if (s.empty()) continue;
    return s == kCause || s == kContext;
  }
  return false;
}

}  // namespace

std::vector<Found> Tracebacks(const Lines& lines, int depth) {
  std::vector<Found> out;
  if (depth > kMaxDepth) return out;
  size_t i = 0;
  while (i < lines.size()) {
    const sv s = lines[i].text;
    Frame f;
    const bool start = PlainHeader(s) || ParseFrame(s, &f) || GroupHeaderColumn(s) != kNone ||
                       (BarColumn(s) != kNone && s[BarColumn(s)] == '|');
    size_t skip = i + 1;
    std::optional<Found> found = start ? TracebackAt(lines, i, depth, &skip) : std::nullopt;
    if (!found) {
      i = std::max(skip, i + 1);
      continue;
    }
    found->chained = Chained(lines, i);
    i = std::max(found->end, i + 1);
    out.push_back(std::move(*found));
  }
  return out;
}

}  // namespace pilot::pyerr
