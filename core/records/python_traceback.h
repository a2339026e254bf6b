// The traceback half of python_error.h's parser: a Python traceback's
// shape in one stream's lines (frames, the exception's line and message,
// chains, exception groups, a DataLoader worker's error inside another).
// Internal to core/records/: python_error.cc splits a program's stderr into
// its ranks' streams, resolves torchrun's and mp.spawn's reports and C++
// errors, and calls these for each stream.
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/records/python_error.h"

// Named apart: core compiles in unity batches (core/CMakeLists.txt).
namespace pilot::pyerr {

using sv = std::string_view;
inline constexpr size_t kNone = sv::npos;

// How deep groups within groups and tracebacks within torchrun's table
// are followed.
inline constexpr int kMaxDepth = 8;

inline constexpr sv kHeader = "Traceback (most recent call last):";

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

// `File "PATH", line N, in FUNC` (or without ", in FUNC": a SyntaxError's).
struct Frame {
  sv file;
  int64_t line = 0;
  sv function;
};

inline std::string Text(sv s) { return std::string(s); }

inline bool Contains(const std::string& s, sv part) { return s.find(part) != std::string::npos; }

// `s` without trailing whitespace.
sv RightTrim(sv s);

// Digits at s[*i] (at most 9) as a number; false when there are none.
bool Number(sv s, size_t* i, int64_t* out);

// A prefix torch or torchrun puts before a line, "[rank3]: " (torch's, a
// space after it but before its C++ log lines: "[rank3]:[W1204 ..."),
// "[default0]:" (torchrun's, none): its length (0: none), its name
// ("rank") and number.
size_t BracketPrefix(sv s, sv* name, int* number);

// A Python traceback's frame line; faulthandler's (`line N in FUNC`, no
// comma) with `faulthandler`.
bool ParseFrame(sv s, Frame* f, bool faulthandler = false);

// A frame of an installed package or of Python's own library, not of the
// program.
bool LibraryFile(sv file);

// The frame's place in `e`: the innermost, or the program's own innermost.
void SetWhere(const Frame& f, sv source, PythonError* e);
void SetCaller(const Frame& f, PythonError* e);

// A traceback's header line: a plain one, a DataLoader worker's, a group's.
bool PlainHeader(sv s);

// Every traceback of `lines`, in order.
std::vector<Found> Tracebacks(const Lines& lines, int depth);

// The last traceback of `lines` (of a chain, its last: the one that ended
// it), or nullopt.
std::optional<Found> FinalOf(const Lines& lines, int depth);

}  // namespace pilot::pyerr
