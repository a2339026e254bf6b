#include "core/base/strings.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "core/base/utf8.h"

namespace pilot {

size_t EditDistance(std::string_view a, std::string_view b) {
  // Three rolling rows of the classic dynamic programme: the swap case looks
  // two rows back.
  const size_t n = b.size();
  std::vector<size_t> prev2(n + 1), prev(n + 1), cur(n + 1);
  for (size_t j = 0; j <= n; ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= n; ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        cur[j] = std::min(cur[j], prev2[j - 2] + 1);
      }
    }
    std::swap(prev2, prev);
    std::swap(prev, cur);
  }
  return prev[n];
}

std::optional<std::string> ClosestMatch(std::string_view word,
                                        const std::vector<std::string>& candidates) {
  const size_t limit = std::max<size_t>(1, word.size() / 3);
  std::optional<std::string> best;
  size_t best_distance = limit + 1;
  for (const std::string& c : candidates) {
    const size_t d = EditDistance(word, c);
    if (d < best_distance && d < std::max(word.size(), c.size())) {
      best = c;
      best_distance = d;
    }
  }
  return best;
}

std::string AsciiLower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

std::string Quote(std::string_view s) {
  std::string out = "\"";
  size_t run = 0;  // the text since the last quote or backslash
  for (size_t i = 0; i <= s.size(); ++i) {
    if (i < s.size() && s[i] != '"' && s[i] != '\\') continue;
    out += VisibleText(s.substr(run, i - run));
    if (i < s.size()) {
      out += '\\';
      out += s[i];
    }
    run = i + 1;
  }
  out += '"';
  return out;
}

std::string FormatBytes(double bytes, ByteUnit smallest, int gib_decimals) {
  constexpr double kKiB = 1024.0, kMiB = 1024.0 * 1024, kGiB = 1024.0 * 1024 * 1024;
  const double size = std::fabs(bytes);
  char buf[64];
  if (smallest == ByteUnit::kGiB || size >= kGiB) {
    std::snprintf(buf, sizeof buf, "%.*f GiB", gib_decimals, bytes / kGiB);
  } else if (smallest == ByteUnit::kMiB || size >= kMiB) {
    std::snprintf(buf, sizeof buf, "%.1f MiB", bytes / kMiB);
  } else {
    std::snprintf(buf, sizeof buf, "%.0f KiB", bytes / kKiB);
  }
  return buf;
}

std::string FormatGiB(int64_t bytes) {
  return FormatBytes(static_cast<double>(bytes), ByteUnit::kGiB);
}

std::string FormatFixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string FormatDouble(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  if (ec != std::errc()) return std::to_string(v);
  std::string s(buf, end);
  // "1e-04" -> "1e-4": to_chars pads the exponent to two digits.
  const size_t e = s.find('e');
  if (e != std::string::npos) {
    size_t digits = e + 1;
    if (digits < s.size() && (s[digits] == '-' || s[digits] == '+')) ++digits;
    while (digits + 1 < s.size() && s[digits] == '0') s.erase(digits, 1);
  }
  return s;
}

std::string Join(const std::vector<std::string>& items, std::string_view sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += sep;
    out += items[i];
  }
  return out;
}

std::vector<std::string_view> SplitLines(std::string_view text) {
  std::vector<std::string_view> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    if (nl == std::string_view::npos) nl = text.size();
    lines.push_back(text.substr(start, nl - start));
    start = nl + 1;
  }
  return lines;
}

std::string FirstLine(std::string_view s, size_t max_bytes) {
  s = Trim(s);
  const size_t nl = s.find('\n');
  std::string line(nl == std::string_view::npos ? s : s.substr(0, nl));
  if (line.size() > max_bytes) line = line.substr(0, max_bytes) + "...";
  return line;
}

std::string TailLines(std::string_view text, size_t lines, size_t bytes) {
  size_t end = text.size();
  while (end > 0 && (text[end - 1] == '\n' || text[end - 1] == '\r')) --end;
  size_t pos = end, count = 0;
  while (pos > 0 && count < lines) {
    const size_t nl = text.rfind('\n', pos - 1);
    if (nl == std::string_view::npos) {
      pos = 0;
      break;
    }
    pos = nl;
    ++count;
    if (count < lines) continue;
    ++pos;
  }
  if (pos < end && text[pos] == '\n') ++pos;
  // Cut on a character boundary: half a character is bytes no reader
  // takes as text.
  return std::string(Utf8Tail(text.substr(pos, end - pos), bytes));
}

std::string_view Trim(std::string_view s) {
  const char* ws = " \t\r\n\f\v";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  const size_t e = s.find_last_not_of(ws);
  return s.substr(b, e - b + 1);
}

bool ParseUnsigned(std::string_view s, uint64_t* v) {
  if (s.empty() || s.size() > 18) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
  return ec == std::errc() && p == s.data() + s.size();
}

bool IsSimpleName(std::string_view s, size_t max_size) {
  if (s.empty() || s.size() > max_size) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-';
  });
}

bool StartsWith(std::string_view s, std::string_view fix) { return s.substr(0, fix.size()) == fix; }

bool EndsWith(std::string_view s, std::string_view fix) {
  return s.size() >= fix.size() && s.substr(s.size() - fix.size()) == fix;
}

}  // namespace pilot
