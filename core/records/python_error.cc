#include "core/records/python_error.h"

#include <algorithm>
#include <map>
#include <utility>

#include "core/base/strings.h"
#include "core/base/utf8.h"
#include "core/records/python_traceback.h"
#include "core/records/srun_lines.h"

namespace pilot {
namespace pyerr {
namespace {

constexpr sv kSpawnChild = "-- Process ";  // "-- Process 1 terminated with the following error:"
constexpr sv kChildFailed = "ChildFailedError";
constexpr sv kRootCause = "Root Cause (first observed failure):";
constexpr sv kTerminate = "terminate called after throwing an instance of '";
constexpr sv kFatal = "Fatal Python error: ";

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

}  // namespace
}  // namespace pyerr
namespace {

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
