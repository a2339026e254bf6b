#include "core/records/python_error.h"

#include <algorithm>
#include <map>
#include <utility>

#include "core/base/strings.h"
#include "core/base/utf8.h"
#include "core/records/srun_lines.h"

namespace pilot {
namespace {
// Named apart: core compiles in unity batches (core/CMakeLists.txt).
namespace pyerr {

using sv = std::string_view;
constexpr size_t kNone = sv::npos;

// How deep groups within groups and tracebacks within torchrun's table
// are followed.
constexpr int kMaxDepth = 8;
// Continuation lines of a message read at most.
constexpr size_t kMaxMessageLines = 40;

constexpr sv kHeader = "Traceback (most recent call last):";
// A DataLoader worker's error inside the message of the one it raised again.
constexpr sv kWorkerHeader = "Original Traceback (most recent call last):";
// A group's, as a line of its parent group ("| Exception Group ...").
constexpr sv kGroupHeader = "Exception Group Traceback (most recent call last):";
constexpr sv kCause = "The above exception was the direct cause of the following exception:";
constexpr sv kContext = "During handling of the above exception, another exception occurred:";
constexpr sv kSpawnChild = "-- Process ";  // "-- Process 1 terminated with the following error:"
constexpr sv kChildFailed = "ChildFailedError";
constexpr sv kRootCause = "Root Cause (first observed failure):";
constexpr sv kTerminate = "terminate called after throwing an instance of '";
constexpr sv kFatal = "Fatal Python error: ";

// One line of a stream: its text without prefixes, and its place in the
// whole text (which of two ranks' lines came first).
struct Line {
  sv text;
  size_t at = 0;
};
using Lines = std::vector<Line>;

// One traceback found in a stream's lines.
struct Found {
  size_t begin = 0;      // its header, or its first frame
  size_t exc = 0;        // its exception's line
  size_t end = 0;        // one past its message's last line
  bool chained = false;  // a chain's separator comes before it
  PythonError error;
};

std::string Text(sv s) { return std::string(s); }

bool Contains(const std::string& s, sv part) { return s.find(part) != std::string::npos; }

bool Alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool Digit(char c) { return c >= '0' && c <= '9'; }

sv RightTrim(sv s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\r' || s.back() == '\t')) {
    s.remove_suffix(1);
  }
  return s;
}

// Digits at s[*i] (at most 9) as a number; false when there are none.
bool Number(sv s, size_t* i, int64_t* out) {
  const size_t first = *i;
  int64_t n = 0;
  while (*i < s.size() && *i - first < 9 && Digit(s[*i])) n = n * 10 + (s[(*i)++] - '0');
  *out = n;
  return *i > first;
}

// A prefix torch or torchrun puts before a line, "[rank3]: " (torch's, a
// space after it but before its C++ log lines: "[rank3]:[W1204 ..."),
// "[default0]:" (torchrun's, none): its length (0: none), its name
// ("rank") and number.
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

// `File "PATH", line N, in FUNC` (or without ", in FUNC": a SyntaxError's).
struct Frame {
  sv file;
  int64_t line = 0;
  sv function;
};

// A Python traceback's frame line; faulthandler's (`line N in FUNC`, no
// comma) with `faulthandler`.
bool ParseFrame(sv s, Frame* f, bool faulthandler = false) {
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

// A frame of an installed package or of Python's own library, not of the
// program.
bool LibraryFile(sv file) {
  return file.find("/site-packages/") != kNone || file.find("/dist-packages/") != kNone ||
         file.find("/lib/python3") != kNone || file.substr(0, 8) == "<frozen ";
}

// The frame's place in `e`: the innermost, or the program's own innermost.
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

bool PlainHeader(sv s) {
  s = RightTrim(s);
  return s == kHeader || s == kWorkerHeader || s == kGroupHeader;
}

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

std::vector<Found> Tracebacks(const Lines& lines, int depth);

// The last traceback of `lines` (of a chain, its last: the one that ended
// it), or nullopt.
std::optional<Found> FinalOf(const Lines& lines, int depth) {
  std::vector<Found> all = Tracebacks(lines, depth);
  if (all.empty()) return std::nullopt;
  return std::move(all.back());
}

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

// Every traceback of `lines`, in order.
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

// The first traceback of the chain `all[k]` ends.
size_t ChainStart(const std::vector<Found>& all, size_t k) {
  while (k > 0 && all[k].chained) --k;
  return k;
}

// mp.spawn's "-- Process 1 terminated with the following error:" before
// lines[begin]: the child's index.
std::optional<int> SpawnedChild(const Lines& lines, size_t begin) {
  for (size_t back = 1; back <= 3 && back <= begin; ++back) {
    const sv s = RightTrim(lines[begin - back].text);
    if (s.empty()) continue;
    if (s.substr(0, kSpawnChild.size()) != kSpawnChild) return std::nullopt;
    size_t i = kSpawnChild.size();
    int64_t n = 0;
    if (!Number(s, &i, &n) || s.substr(i) != " terminated with the following error:") {
      return std::nullopt;
    }
    return static_cast<int>(n);
  }
  return std::nullopt;
}

// The lines of one rank (or of no prefix), in order.
struct Stream {
  std::string key;  // "rank3", "default0"; "" for lines without a prefix
  std::optional<int> rank;
  Lines lines;
};

// A line's prefixes taken off, into its stream's key and rank.
sv StripPrefixes(sv s, std::string* key, std::optional<int>* rank) {
  for (int round = 0; round < 4; ++round) {
    sv name;
    int number = 0;
    const size_t n = BracketPrefix(s, &name, &number);
    if (n == 0) break;
    if (key->empty()) *key = std::string(name) + std::to_string(number);
    if (name == "rank" || !rank->has_value()) *rank = number;
    s.remove_prefix(n);
  }
  return s;
}

// The text's lines, each in its stream: a terminal would show what follows
// a line's last '\r'; a traceback's header after other output on its line
// (a progress bar without its newline) starts a line of its own.
std::vector<Stream> Streams(sv text) {
  std::vector<Stream> streams;
  std::map<std::string, size_t> index;
  const std::vector<sv> raw = SplitLines(text);
  for (size_t at = 0; at < raw.size(); ++at) {
    sv s = raw[at];
    while (!s.empty() && s.back() == '\r') s.remove_suffix(1);
    if (const size_t cr = s.rfind('\r'); cr != kNone) s.remove_prefix(cr + 1);
    std::string key;
    std::optional<int> rank;
    s = StripPrefixes(s, &key, &rank);
    const sv body = RightTrim(s);
    if (body.size() > kHeader.size() && body.substr(body.size() - kHeader.size()) == kHeader) {
      const size_t p = body.size() - kHeader.size();
      size_t cut = body[p - 1] != ' ' ? p : kNone;
      const size_t lb = body.rfind('[', p - 1);
      sv name;
      int number = 0;
      if (cut == kNone && lb != kNone && lb + BracketPrefix(body.substr(lb), &name, &number) == p) {
        cut = lb;
      }
      if (cut != kNone) s = StripPrefixes(s.substr(cut), &key, &rank);
    }
    auto [it, fresh] = index.emplace(key, streams.size());
    if (fresh) streams.push_back(Stream{key, rank, {}});
    if (!streams[it->second].rank) streams[it->second].rank = rank;
    streams[it->second].lines.push_back({s, at});
  }
  return streams;
}

// The final traceback of a stream, with the rank it names.
std::optional<Found> StreamFinal(const Stream& stream, int depth) {
  std::vector<Found> all = Tracebacks(stream.lines, depth);
  if (all.empty()) return std::nullopt;
  const size_t last = all.size() - 1;
  const std::optional<int> child = SpawnedChild(stream.lines, all[last].begin);
  Found f = std::move(all[last]);
  // Where its chain began, in the whole text: which rank failed first.
  f.begin = stream.lines[all[ChainStart(all, last)].begin].at;
  if (!f.error.rank) f.error.rank = stream.rank;
  if (child) f.error.rank = child;
  return f;
}

// torchrun's table of a ChildFailedError, its root cause:
//   Root Cause (first observed failure):
//   [1]:
//     rank      : 1 (local_rank: 1)
//     exitcode  : 1 (pid: 41822)
//     traceback : Traceback (most recent call last):
//       File "...", line 4, in load      (indented by two more)
//     FileNotFoundError: ...
struct RootCause {
  int rank = 0;
  int64_t exitcode = 0;
  Lines traceback;  // its first line "Traceback ..." or a signal's sentence
};

std::optional<RootCause> ParseRootCause(const Lines& lines, size_t from) {
  size_t i = from;
  while (i < lines.size() && RightTrim(lines[i].text) != kRootCause) ++i;
  if (i >= lines.size()) return std::nullopt;
  RootCause root;
  bool ranked = false;
  for (++i; i < lines.size(); ++i) {
    const sv s = RightTrim(lines[i].text);
    if (s.substr(0, 1) == "=") break;
    const size_t colon = s.find(':');
    if (s.substr(0, 2) != "  " || colon == kNone) continue;
    const sv key = Trim(s.substr(0, colon));
    size_t at = s.find_first_not_of(' ', colon + 1);
    const sv value = at == kNone ? sv() : s.substr(at);
    int64_t n = 0;
    size_t k = 0;
    const bool negative = !value.empty() && value[0] == '-';
    if (negative) k = 1;
    if (key == "rank" && Number(value, &k, &n)) {
      root.rank = static_cast<int>(n);
      ranked = true;
    } else if (key == "exitcode" && Number(value, &k, &n)) {
      root.exitcode = negative ? -n : n;
    } else if (key == "traceback") {
      root.traceback.push_back({value, lines[i].at});
      for (++i; i < lines.size(); ++i) {
        const sv t = lines[i].text;
        if (t.substr(0, 2) != "  ") break;
        root.traceback.push_back({t.substr(2), lines[i].at});
      }
      break;
    }
  }
  if (!ranked) return std::nullopt;
  return root;
}

// torchrun's ChildFailedError (in `agent`, the stream of torchrun's own
// lines) resolved to the rank that failed first (see the header).
PythonError ChildFailed(const std::vector<Stream>& streams, const Stream& agent, const Found& own,
                        size_t own_index, int depth) {
  std::optional<RootCause> root = ParseRootCause(agent.lines, own_index);
  if (!root) return own.error;
  if (depth < kMaxDepth && !root->traceback.empty() && PlainHeader(root->traceback.front().text)) {
    if (std::optional<Found> f = FinalOf(root->traceback, depth + 1)) {
      f->error.rank = root->rank;
      return f->error;
    }
  }
  for (const Stream& s : streams) {
    if (&s == &agent || s.key.empty() || s.rank != root->rank) continue;
    if (std::optional<Found> f = StreamFinal(s, depth + 1)) return f->error;
  }
  // torchrun's own stream: the first chain before its own traceback.
  std::vector<Found> all = Tracebacks(agent.lines, depth + 1);
  for (size_t k = 0; k < all.size() && all[k].begin < own.begin; ++k) {
    if (Contains(all[k].error.type, kChildFailed)) continue;
    while (k + 1 < all.size() && all[k + 1].chained && all[k + 1].begin < own.begin) ++k;
    PythonError e = all[k].error;
    e.rank = root->rank;
    return e;
  }
  PythonError e;
  e.type = own.error.type;
  e.message = "rank " + std::to_string(root->rank) + " exited with exitcode " +
              std::to_string(root->exitcode);
  const sv said = root->traceback.empty() ? sv() : Trim(root->traceback.front().text);
  if (said.substr(0, 7) == "Signal ") e.message += ": " + Text(said);
  e.rank = root->rank;
  return e;
}

// "Exception raised from checkTimeout at /pytorch/.../ProcessGroupNCCL.cpp:609
// (most recent call first):" (one line)
void RaisedFrom(sv s, PythonError* e) {
  static constexpr sv kFrom = "Exception raised from ";
  static constexpr sv kTail = " (most recent call first):";
  s = RightTrim(s);
  if (s.substr(0, kFrom.size()) != kFrom || s.size() < kFrom.size() + kTail.size() ||
      s.substr(s.size() - kTail.size()) != kTail) {
    return;
  }
  const sv body = s.substr(kFrom.size(), s.size() - kFrom.size() - kTail.size());
  const size_t at = body.find(" at ");
  const size_t colon = body.rfind(':');
  if (at == kNone || colon == kNone || colon < at) return;
  size_t i = colon + 1;
  int64_t n = 0;
  if (!Number(body, &i, &n) || i != body.size()) return;
  e->function = Text(body.substr(0, at));
  e->file = Text(body.substr(at + 4, colon - at - 4));
  e->line = n;
}

// faulthandler's current thread's innermost frame (it lists the innermost
// first), in the lines after "Fatal Python error: ..." at `from`.
bool FaultFrame(const std::vector<sv>& lines, size_t from, PythonError* e) {
  for (size_t i = from + 1; i < lines.size() && i <= from + 8; ++i) {
    const sv s = lines[i];
    if (s.substr(0, 15) != "Current thread " && s.substr(0, 6) != "Stack ") continue;
    Frame f;
    if (i + 1 >= lines.size() || !ParseFrame(lines[i + 1], &f, true)) return false;
    SetWhere(f, {}, e);
    // Below a library's frame, the program's that called it.
    for (size_t k = i + 2; LibraryFile(f.file) && k < lines.size(); ++k) {
      if (!ParseFrame(lines[k], &f, true)) break;
      if (!LibraryFile(f.file)) SetCaller(f, e);
    }
    return true;
  }
  return false;
}

// A C++ exception nothing caught, or faulthandler's report (the first of
// each; faulthandler's frame to a C++ exception that aborted Python).
std::optional<PythonError> FatalError(const std::vector<Stream>& streams) {
  std::vector<std::pair<size_t, sv>> all;  // every stream's lines, in the text's order
  for (const Stream& s : streams) {
    for (const Line& l : s.lines) all.emplace_back(l.at, l.text);
  }
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<sv> lines;
  lines.reserve(all.size());
  for (const auto& [at, text] : all) lines.push_back(RightTrim(text));
  std::optional<PythonError> cxx;
  for (size_t i = 0; i < lines.size(); ++i) {
    const sv s = lines[i];
    if (!cxx && s.substr(0, kTerminate.size()) == kTerminate) {
      const size_t q = s.find('\'', kTerminate.size());
      if (q == kNone || q == kTerminate.size()) continue;
      PythonError e;
      e.kind = PythonError::Kind::kCxxException;
      e.type = Text(s.substr(kTerminate.size(), q - kTerminate.size()));
      for (size_t k = i + 1; k < lines.size() && k <= i + 40; ++k) {
        const sv t = Trim(lines[k]);
        if (t.substr(0, 7) == "what():" && e.message.empty()) e.message = Text(Trim(t.substr(7)));
        if (t.substr(0, 22) == "Exception raised from ") {
          RaisedFrom(t, &e);
          break;
        }
      }
      cxx = std::move(e);
    } else if (s.substr(0, kFatal.size()) == kFatal) {
      PythonError e;
      e.kind = PythonError::Kind::kFatal;
      e.type = "Fatal Python error";
      e.message = Text(Trim(s.substr(kFatal.size())));
      if (cxx) {
        // terminate() aborted Python: the C++ error, where Python was.
        PythonError where = *cxx;
        if (FaultFrame(lines, i, &where)) return where;
        return cxx;
      }
      FaultFrame(lines, i, &e);
      return e;
    }
  }
  return cxx;
}

// Valid UTF-8, cut to `max` bytes on a character boundary ("..." after).
std::string Cut(const std::string& s, size_t max) {
  std::string v = ValidUtf8(s);
  if (v.size() <= max) return v;
  return std::string(Utf8Head(v, max)) + "...";
}

// A path the same way, keeping its end: the file's name.
std::string CutPath(const std::string& s) {
  std::string v = ValidUtf8(s);
  if (v.size() <= kMaxErrorText) return v;
  return "..." + std::string(Utf8Tail(v, kMaxErrorText));
}

PythonError Finish(PythonError e) {
  e.type = Cut(e.type, 200);
  e.message = Cut(e.message, kMaxErrorText);
  e.file = CutPath(e.file);
  e.function = Cut(e.function, 200);
  e.source = Cut(e.source, kMaxErrorText);
  e.caller_file = CutPath(e.caller_file);
  e.caller_function = Cut(e.caller_function, 200);
  return e;
}

}  // namespace pyerr

// Known warnings of training frameworks, as they print them (matched
// without regard to case), and what they mean for a restore. A row is
// the framework's own wording and where it prints it; a warning every run
// prints whether or not its restore works (torch's "destroy_process_group()
// was not called", a base model's "newly initialized" head) is noise and
// has no row.
struct StderrHint {
  std::string_view says;
  std::string_view hint;
};
constexpr std::string_view kLoaderHint =
    "hint: the program printed that its data loader cannot resume mid-epoch: the data position is "
    "probably not restored";
constexpr std::string_view kMissingKeysHint =
    "hint: the program printed that keys were missing from the model's checkpoint (expected "
    "for tied weights such as lm_head.weight; any other was not restored)";
constexpr StderrHint kStderrHints[] = {
    // Lightning's training_epoch_loop.py, resuming a checkpoint saved
    // mid-epoch without a stateful data loader (2.x: "... and your
    // dataloader is not resumable"; 1.x: "ended mid-epoch").
    {"resuming from a checkpoint that ended before the epoch ended", kLoaderHint},
    {"resuming from a checkpoint that ended mid-epoch", kLoaderHint},
    // transformers' Trainer, loading the model's weights from a checkpoint.
    {"there were missing keys in the checkpoint model loaded", kMissingKeysHint},
    {"there were unexpected keys in the checkpoint model loaded",
     "hint: the model's checkpoint held keys the model does not have: was it saved from another "
     "model?"},
    // Lightning's load_from_checkpoint(strict=False).
    {"found keys that are in the model state dict but not in the checkpoint", kMissingKeysHint},
    // transformers' Trainer, restoring the device's random number generators.
    {"didn't manage to set back the rng states",
     "hint: the program could not restore its random number generators' state: random draws after "
     "the restore differ"},
};

}  // namespace

std::optional<PythonError> ParsePythonError(std::string_view text) {
  using namespace pyerr;
  const std::vector<Stream> streams = Streams(text);
  // torchrun's ChildFailedError names the rank that failed first.
  for (const Stream& s : streams) {
    std::vector<Found> all = Tracebacks(s.lines, 0);
    if (all.empty() || !Contains(all.back().error.type, kChildFailed)) continue;
    return Finish(ChildFailed(streams, s, all.back(), all.back().end, 0));
  }
  // Each rank's final traceback; of several ranks, the one whose chain
  // began first. Lines without a prefix count only when no rank's do.
  std::optional<Found> best;
  bool best_ranked = false;
  for (const Stream& s : streams) {
    std::optional<Found> f = StreamFinal(s, 0);
    if (!f) continue;
    const bool ranked = !s.key.empty();
    const bool earlier = ranked && best_ranked && f->begin < best->begin;
    if (!best || (ranked && !best_ranked) || earlier) {
      best = std::move(f);
      best_ranked = ranked;
    }
  }
  if (best) return Finish(std::move(best->error));
  if (std::optional<PythonError> fatal = FatalError(streams)) return Finish(std::move(*fatal));
  return std::nullopt;
}

std::optional<PythonError> ParsePythonErrorOfSrunTask(std::string_view text, int task, int tasks) {
  std::optional<PythonError> e = ParsePythonError(SrunTaskText(text, task, tasks));
  if (e && !e->rank) e->rank = task;
  return e;
}

std::string DescribePythonError(const PythonError& e) {
  std::string s = e.type;
  if (!e.message.empty()) s += ": " + e.message;
  if (!e.file.empty()) {
    s += " (at " + e.file + ":" + std::to_string(e.line);
    if (!e.function.empty()) s += " in " + e.function;
    if (!e.caller_file.empty()) {
      s += ", from " + e.caller_file + ":" + std::to_string(e.caller_line);
      if (!e.caller_function.empty()) s += " in " + e.caller_function;
    }
    s += ")";
  }
  return s;
}

bool IsOutOfMemoryError(const PythonError& e) {
  using pyerr::Contains;
  if (e.type == "torch.OutOfMemoryError" || e.type == "torch.cuda.OutOfMemoryError" ||
      e.type == "MemoryError" || e.type == "std::bad_alloc") {
    return true;
  }
  const std::string m = AsciiLower(e.message);
  return Contains(m, "out of memory") || Contains(m, "can't allocate memory") ||
         Contains(m, "cannot allocate memory") || Contains(m, "not enough memory");
}

std::vector<std::string> StderrHints(std::string_view text) {
  const std::string lower = AsciiLower(text);
  std::vector<std::string> out;
  for (const StderrHint& h : kStderrHints) {
    if (lower.find(h.says) == std::string::npos) continue;
    bool seen = false;
    for (const std::string& o : out) seen = seen || o == h.hint;
    if (!seen) out.emplace_back(h.hint);
  }
  return out;
}

}  // namespace pilot
