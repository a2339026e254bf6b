// The header of a safetensors file (the format: runner/ckpt/safetensors.h),
// decoded and checked without libtorch, so the unit tests and the fuzz
// harnesses read it as the runner does.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/status.h"

namespace pilot::runner {

struct SafetensorsEntry {
  std::string name;
  std::string dtype;            // "F32", "BF16", ...
  std::vector<int64_t> shape;
  int64_t begin = 0, end = 0;   // relative to the data section
};

struct SafetensorsHeader {
  std::vector<SafetensorsEntry> entries;  // in data order
  std::map<std::string, std::string> metadata;
  int64_t data_start = 0;  // 8 + N
  int64_t file_size = 0;
  const SafetensorsEntry* Find(const std::string& name) const;
};

// The bytes of one element of a dtype the runner reads ("F32" -> 4); 0 for
// any other name.
int64_t SafetensorsDtypeSize(std::string_view dtype);

// N, the header's length, from the file's first 8 bytes (`prefix`, exactly
// 8) of a file of `file_size` bytes. Errors: kCorrupt naming `path` (a file
// shorter than 8 bytes, a length over 100 MiB or past the file's end).
Result<int64_t> SafetensorsHeaderLength(std::string_view prefix, int64_t file_size,
                                        const std::string& path);

// Parses the N bytes of JSON after the length (`text`) of a file of
// `file_size` bytes and checks them: known dtypes, sizes equal to numel *
// element size (a shape whose size overflows is refused), offsets contiguous
// from 0 and ending at the file's end. REQUIRES: 8 + text.size() <=
// file_size (as SafetensorsHeaderLength ensures). Errors: kCorrupt naming
// `path` and the entry.
Result<SafetensorsHeader> ParseSafetensorsHeader(std::string_view text, int64_t file_size,
                                                 const std::string& path);

}  // namespace pilot::runner
