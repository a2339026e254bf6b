#include "core/base/utf8.h"

#include <cstdint>

namespace pilot {
namespace {

struct Utf8Scan {
  size_t length;  // valid: the sequence; invalid: its maximal subpart (>= 1)
  bool valid;
};

// RFC 3629's table 3-7: the lead byte fixes the length and the range of the
// second byte (no overlong forms, no surrogates, nothing above U+10FFFF);
// every later byte is 80..BF.
Utf8Scan ScanUtf8(std::string_view s, size_t i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) return {1, true};
  size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    n = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    n = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    n = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return {1, false};
  }
  for (size_t k = 1; k < n; ++k) {
    if (i + k >= s.size()) return {k, false};
    const auto b = static_cast<unsigned char>(s[i + k]);
    if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xBF)) return {k, false};
  }
  return {n, true};
}

bool IsUtf8Continuation(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

// The code point of the valid sequence of `n` bytes at s[i].
uint32_t Utf8CodePoint(std::string_view s, size_t i, size_t n) {
  const auto b = [&](size_t k) { return static_cast<uint32_t>(static_cast<unsigned char>(s[i + k])); };
  switch (n) {
    case 1: return b(0);
    case 2: return (b(0) & 0x1F) << 6 | (b(1) & 0x3F);
    case 3: return (b(0) & 0x0F) << 12 | (b(1) & 0x3F) << 6 | (b(2) & 0x3F);
    default: return (b(0) & 0x07) << 18 | (b(1) & 0x3F) << 12 | (b(2) & 0x3F) << 6 | (b(3) & 0x3F);
  }
}

// Characters outside C0/C1 that still move or reorder what a terminal
// shows: bidi embeddings, overrides, isolates and marks, and the Unicode
// line and paragraph separators.
bool IsBidiOrSeparator(uint32_t cp) {
  return cp == 0x061C || cp == 0x200E || cp == 0x200F || cp == 0x2028 || cp == 0x2029 ||
         (cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069);
}

// \x1b (kind 'x', two digits) or \u009b (kind 'u', four digits).
void AppendHexEscape(std::string* out, char kind, uint32_t value) {
  static constexpr char kHex[] = "0123456789abcdef";
  *out += '\\';
  *out += kind;
  for (int shift = kind == 'x' ? 4 : 12; shift >= 0; shift -= 4) {
    *out += kHex[(value >> shift) & 0xF];
  }
}

}  // namespace

size_t Utf8SequenceAt(std::string_view s, size_t i) {
  const Utf8Scan scan = ScanUtf8(s, i);
  return scan.valid ? scan.length : 0;
}

bool IsValidUtf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const Utf8Scan scan = ScanUtf8(s, i);
    if (!scan.valid) return false;
    i += scan.length;
  }
  return true;
}

std::string ValidUtf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const Utf8Scan scan = ScanUtf8(s, i);
    if (scan.valid) {
      out.append(s, i, scan.length);
    } else {
      out += "\xEF\xBF\xBD";
    }
    i += scan.length;
  }
  return out;
}

std::string_view Utf8Tail(std::string_view s, size_t max_bytes) {
  if (s.size() <= max_bytes) return s;
  size_t start = s.size() - max_bytes;
  // A character is at most four bytes: past three continuation bytes the
  // cut is in no character, only in bytes that were never UTF-8.
  for (int k = 0; k < 3 && start < s.size() && IsUtf8Continuation(s[start]); ++k) ++start;
  return s.substr(start);
}

std::string_view Utf8Head(std::string_view s, size_t max_bytes) {
  if (s.size() <= max_bytes) return s;
  if (max_bytes == 0 || !IsUtf8Continuation(s[max_bytes])) return s.substr(0, max_bytes);
  // The first byte left out continues something: find its lead byte (at
  // most three bytes back) and leave out the whole character when it is
  // one; stray continuation bytes split no character.
  size_t lead = max_bytes - 1;
  while (lead > 0 && max_bytes - lead < 3 && IsUtf8Continuation(s[lead])) --lead;
  if (!IsUtf8Continuation(s[lead])) {
    const Utf8Scan scan = ScanUtf8(s, lead);
    if (scan.valid && lead + scan.length > max_bytes) return s.substr(0, lead);
  }
  return s.substr(0, max_bytes);
}

size_t Utf8IncompleteSuffix(std::string_view s) {
  for (size_t back = 1; back <= 3 && back <= s.size(); ++back) {
    const size_t i = s.size() - back;
    if (IsUtf8Continuation(s[i])) continue;
    const auto lead = static_cast<unsigned char>(s[i]);
    if (lead < 0xC2 || lead > 0xF4) return 0;  // ASCII, or a byte no character starts with
    const Utf8Scan scan = ScanUtf8(s, i);
    // Invalid only because the text ends: the subpart reaches the end.
    return !scan.valid && i + scan.length == s.size() ? back : 0;
  }
  return 0;
}

std::string VisibleText(std::string_view s, Newlines newlines) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const Utf8Scan scan = ScanUtf8(s, i);
    if (!scan.valid) {
      AppendHexEscape(&out, 'x', static_cast<unsigned char>(s[i]));
      ++i;  // the bytes after it are looked at on their own
      continue;
    }
    const uint32_t cp = Utf8CodePoint(s, i, scan.length);
    if (cp == '\n' && newlines == Newlines::kKeep) {
      out += '\n';
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (cp < 0x20 || cp == 0x7F) {
      AppendHexEscape(&out, 'x', cp);
    } else if ((cp >= 0x80 && cp <= 0x9F) || IsBidiOrSeparator(cp)) {
      AppendHexEscape(&out, 'u', cp);
    } else {
      out.append(s, i, scan.length);
    }
    i += scan.length;
  }
  return out;
}

std::string VisibleJsonText(std::string_view json) {
  std::string out;
  out.reserve(json.size());
  for (size_t i = 0; i < json.size();) {
    const Utf8Scan scan = ScanUtf8(json, i);
    if (!scan.valid) {
      AppendHexEscape(&out, 'x', static_cast<unsigned char>(json[i]));
      ++i;
      continue;
    }
    const uint32_t cp = Utf8CodePoint(json, i, scan.length);
    if ((cp < 0x20 && cp != '\n') || (cp >= 0x7F && cp <= 0x9F) || IsBidiOrSeparator(cp)) {
      AppendHexEscape(&out, 'u', cp);
    } else {
      out.append(json, i, scan.length);
    }
    i += scan.length;
  }
  return out;
}

std::string VisibleLines(std::string_view s, std::string_view indent) {
  std::string out;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t nl = s.find('\n', pos);
    if (nl == std::string_view::npos) nl = s.size();
    if (pos > 0) {
      out += '\n';
      out += indent;
    }
    out += VisibleText(s.substr(pos, nl - pos));
    pos = nl + 1;
  }
  return out;
}

}  // namespace pilot
