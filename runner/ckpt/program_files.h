// Reading one file of a program's checkpoint by what its bytes are, not by
// its name: a safetensors file (header checked against the file), a
// torch.save zip archive (opened with libtorch's archive reader, data.pkl
// read by the restricted pickle reader, every storage record read back and
// its tensors checked against it), a DCP directory's .metadata and shards,
// a torch.save of before the zip format, small text (metadata), anything
// else.
//
// Thread-safety: functions are independent and keep no state.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "core/base/status.h"

namespace pilot::runner {

struct FileReading {
  std::string format;            // as ProgramFile::format (core/records/verify_report.h)
  bool readable = false;         // read and checked independently
  bool failed = false;           // it claims a known format and fails its check
  int64_t tensors = 0;
  bool optimizer_state = false;  // an optimizer's state_dict was found in it
  std::string detail;
};

// Reads the regular file open as `fd` (`size` bytes; read with pread, the
// offset is left alone). `label` names it in details.
FileReading ReadProgramFile(int fd, int64_t size, const std::string& label);

// The files of one directory holding a DCP checkpoint (a `.metadata` file
// and `__N_M.distcp` shards): `metadata` is .metadata's contents (empty when
// it was too large to read), `sizes` every regular file of that directory
// by name. Fills `readings` (by name) for .metadata and each .distcp file.
struct DcpReading {
  int64_t tensors = 0;
  int64_t shards = 0;
  bool optimizer_state = false;
  std::map<std::string, FileReading> readings;
};
DcpReading ReadDcpDirectory(const std::string& metadata, int64_t metadata_size,
                            const std::map<std::string, int64_t>& sizes, const std::string& label);

// True for a DCP shard's file name, "__0_0.distcp".
bool IsDcpShardName(const std::string& name);

}  // namespace pilot::runner
