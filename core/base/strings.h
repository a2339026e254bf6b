// Small string helpers shared by the config loader and the command line:
// edit distance for "did you mean" hints, quoting for messages, number
// formatting that round-trips.
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pilot {

// Optimal-string-alignment distance between `a` and `b`: insertions,
// deletions, substitutions and swaps of two adjacent characters each cost 1
// ("chekc" -> "check" is 1).
size_t EditDistance(std::string_view a, std::string_view b);

// The candidate closest to `word` by EditDistance, when it is close enough to
// be a plausible typo: distance <= max(1, |word| / 3) and less than |word|.
// Ties go to the earlier candidate. nullopt when none qualifies.
std::optional<std::string> ClosestMatch(std::string_view word,
                                        const std::vector<std::string>& candidates);

// `s` in double quotes with \" and \\ escaped and everything else a
// terminal could act on spelled out as VisibleText does (core/base/utf8.h),
// for messages ("got \"gtp\"").
std::string Quote(std::string_view s);

// `s` with A-Z turned into a-z (bytes outside ASCII unchanged).
std::string AsciiLower(std::string_view s);

// The shortest decimal text that reads back as exactly `v` ("0.0003", "30",
// "1e-08"); "nan" / "inf" / "-inf" for the non-finite values.
std::string FormatDouble(double v);

// `v` with exactly `decimals` digits after the point ("296.4", "0.35").
std::string FormatFixed(double v, int decimals);

// The units FormatBytes may use: down to KiB, down to MiB, or GiB only.
enum class ByteUnit { kKiB, kMiB, kGiB };

// Bytes in binary units for people: GiB with `gib_decimals` digits ("18.2
// GiB"); below 1 GiB by magnitude, MiB with one digit ("812.0 MiB") unless
// `smallest` is kGiB; below 1 MiB by magnitude, whole KiB ("40 KiB") when
// `smallest` is kKiB.
std::string FormatBytes(double bytes, ByteUnit smallest = ByteUnit::kMiB, int gib_decimals = 1);

// Bytes in GiB with one decimal ("53.6 GiB"): FormatBytes in GiB only.
std::string FormatGiB(int64_t bytes);

// Items joined by `sep`.
std::string Join(const std::vector<std::string>& items, std::string_view sep);

// The lines of `text`, without their '\n' (a last line without one
// included, no empty line after a final '\n'); views into `text`.
std::vector<std::string_view> SplitLines(std::string_view text);

// The first line of `s` with leading and trailing whitespace trimmed (a
// helper's error output in a message), cut to `max_bytes` bytes and "..."
// when longer.
std::string FirstLine(std::string_view s, size_t max_bytes = 300);

// The last `lines` lines of `text` (line ends at its end left out), at most
// `bytes` bytes of them, cut on a character boundary (Utf8Tail).
std::string TailLines(std::string_view text, size_t lines, size_t bytes = 4096);

// Leading and trailing ASCII whitespace removed.
std::string_view Trim(std::string_view s);

// The whole of `s` as a number: true when it is 1 to 18 decimal digits and
// nothing else (no sign, no space), which always fit *v.
bool ParseUnsigned(std::string_view s, uint64_t* v);

// True when `s` is 1 to `max_size` characters of A-Z a-z 0-9 . _ - (a GPU
// type's name in the hardware catalog, pilot.toml's name keys, an outbox
// entry's name).
bool IsSimpleName(std::string_view s, size_t max_size = 64);

// True when `s` starts / ends with `fix`.
bool StartsWith(std::string_view s, std::string_view fix);
bool EndsWith(std::string_view s, std::string_view fix);

}  // namespace pilot
