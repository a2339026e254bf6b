// UTF-8 for text that comes from programs: cutting it without splitting a
// character, making any bytes valid UTF-8, and rendering it inert on a
// terminal.
//
// A program's standard error, a record it wrote, a name it chose are bytes,
// not text: a latin-1 byte, a progress bar cut in the middle of a character,
// an escape sequence that repaints the line. What root writes and shows
// must survive all of them: JSON writers replace what is not UTF-8
// (DumpJson, json_util.h), tails are cut on character boundaries (Utf8Tail),
// and what a person reads has every control character spelled out
// (VisibleText).
//
// Valid UTF-8 here is RFC 3629's: no overlong forms, no surrogates
// (U+D800..U+DFFF), nothing above U+10FFFF.
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace pilot {

// The length (1 to 4) of the valid UTF-8 sequence that starts at s[i], or 0
// when the byte there starts none (a continuation byte, an invalid lead, a
// sequence cut short or malformed). REQUIRES: i < s.size().
size_t Utf8SequenceAt(std::string_view s, size_t i);

// True when all of `s` is valid UTF-8.
bool IsValidUtf8(std::string_view s);

// `s` with each ill-formed part replaced by U+FFFD (EF BF BD), the
// "maximal subpart" rule of Unicode (as Python's errors="replace"): a lead
// byte and the continuation bytes that could still have completed it become
// one U+FFFD; any other stray byte becomes one each. Valid input comes back
// unchanged.
std::string ValidUtf8(std::string_view s);

// The last at most `max_bytes` bytes of `s`, starting on a character
// boundary: when the cut falls inside a character, the up to three
// continuation bytes after it are dropped too. `s` itself when it fits.
std::string_view Utf8Tail(std::string_view s, size_t max_bytes);

// The first at most `max_bytes` bytes of `s`, ending on a character
// boundary: a character the cut would split is left out whole.
std::string_view Utf8Head(std::string_view s, size_t max_bytes);

// How many bytes at the end of `s` (0 to 3) begin a character that more
// bytes could still complete: what a writer that sees text in pieces holds
// back until the next piece.
size_t Utf8IncompleteSuffix(std::string_view s);

// `s` with everything a terminal could act on written out as visible text,
// so that what a program wrote can be shown but never repaint the screen:
//   C0 controls   \r \t \n (\n only with kEscape) and \xNN (ESC is \x1b)
//   DEL           \x7f
//   C1 controls   \u0080..\u009f (written as UTF-8), \xNN (a raw byte)
//   bidi controls and line separators: \u061c \u200e \u200f \u2028 \u2029
//                 \u202a..\u202e \u2066..\u2069
//   invalid UTF-8 \xNN for each byte
// Everything else, other characters outside ASCII included, is kept; a
// backslash is kept as it is (the result is for reading, not to be parsed
// back). A tab is written \t: its width would depend on the terminal.
enum class Newlines {
  kEscape,  // '\n' written as \n: one line out
  kKeep,    // '\n' kept: a line break
};
std::string VisibleText(std::string_view s, Newlines newlines = Newlines::kEscape);

// JSON text (as DumpJson writes it: valid UTF-8, control characters in
// strings already escaped) with every character VisibleText would spell
// out written as a JSON \u escape instead (DEL as \u007f, U+009B as
// \u009b): the same JSON value, inert on a terminal. '\n' is kept (the
// whitespace of indented JSON); a byte that is not UTF-8, which DumpJson
// never writes, is written \xNN as VisibleText does.
std::string VisibleJsonText(std::string_view json);

// A multi-line text (a standard error tail) made visible line by line: each
// line as VisibleText, joined by '\n' + `indent`, so that every line after
// the first starts at the same column as the first.
std::string VisibleLines(std::string_view s, std::string_view indent);

}  // namespace pilot
