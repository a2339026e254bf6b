// The safetensors file format, written and read without the Python package:
//   8 bytes    little-endian u64 N, the header's length
//   N bytes    JSON: {"__metadata__": {str: str}, "<name>": {"dtype": "F32",
//              "shape": [..], "data_offsets": [begin, end]}, ...}, padded
//              with spaces to a multiple of 8
//   data       the tensors' raw little-endian bytes, back to back, in header
//              order; offsets are relative to the end of the header
// Any reader of the format (Python's `safetensors`) opens these files.
//
// Writing is one sequential pass: device tensors are staged through two
// pinned buffers, the SHA-256 of the file is computed while the bytes are
// written, write-back to the disk starts chunk by chunk, and the file is
// fsynced before returning. Loading is the same pass in reverse.
//
// Thread-safety: functions are independent; callers may write or load
// different files from different threads at once.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/base/status.h"
#include "runner/ckpt/safetensors_header.h"
#include "runner/train/model.h"

namespace pilot::runner {

struct FileDigest {
  int64_t bytes = 0;
  std::string sha256;  // of the whole file, hex
};

// Writes `tensors` (contiguous, any device) to `path` (created or replaced)
// and fsyncs it. Errors: kIoError naming the file and the system's error
// (ENOSPC, EFBIG, ...), kInvalid (a dtype the format cannot hold, a
// non-contiguous tensor). A file that was opened but not written whole is
// removed before the error (or a throw from the device) is returned.
Result<FileDigest> WriteSafetensors(const std::string& path, const NamedTensors& tensors,
                                    const std::map<std::string, std::string>& metadata);

// Reads and validates the header: known dtypes, sizes equal to
// numel * element size, offsets contiguous from 0 and ending at the file's
// end. Errors: kNotFound, kIoError, kCorrupt (naming the file and the entry).
Result<SafetensorsHeader> ReadSafetensorsHeader(const std::string& path);

// Copies the file's tensors into `dst` (name -> contiguous tensor of the same
// dtype and shape, any device), hashing the whole file on the way. Every
// entry of the file must have a destination and vice versa.
// Errors: kNotFound, kIoError, kCorrupt (missing or extra tensor, shape or
// dtype mismatch: names the file and the tensor).
Result<FileDigest> LoadSafetensors(const std::string& path,
                                   const std::map<std::string, at::Tensor>& dst);

// "F32" for at::kFloat, ...; "" for a dtype the format cannot hold.
std::string SafetensorsDtype(at::ScalarType t);

}  // namespace pilot::runner
