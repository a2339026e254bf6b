// Reading one file of a program's checkpoint by what its bytes are, not by
// its name: a safetensors file (header checked against the file), a
// torch.save zip archive (opened with libtorch's archive reader, data.pkl
// read by the restricted pickle reader, every storage record read back and
// its tensors checked against it), a DCP directory's .metadata and shards,
// a torch.save of before the zip format, small text (metadata), anything
// else. One table, kProgramFormats (ProgramFormats() below), says which
// formats there are, how each is recognised and which function reads it.
//
// Thread-safety: functions are independent and keep no state.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

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
// offset is left alone) as the first of kProgramFormats' single-file rows
// that recognises it. `label` names it in details.
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

// What a single-file format's row sees of a file: its descriptor (read with
// pread), its size and its first bytes (at most 16, fewer in a smaller file).
struct FileHead {
  int fd = -1;
  int64_t size = 0;
  std::string_view bytes;
};

// The formats `pilot-runner verify --program-checkpoint` recognises, one row
// each. A single-file row has `recognise` and `read`: ReadProgramFile tries
// them in table order on every regular file, the first row whose recognise
// accepts the file reads it, and a file no row accepts is "other" ("contents
// of no format read independently"). A directory row has `member`, `index`
// and `read_directory`: the verify's walk (program_verify.cc) gathers, per
// directory, the files whose names `member` accepts and the bytes of the
// one named `index`, and once the walk is done the directory's reading
// replaces those files' single-file readings. `checkpoint` rows are the
// formats the report's "format" counts (safetensors, torch, dcp); the
// others describe files of a known kind that are no checkpoint format read
// here (a legacy torch.save, NumPy arrays, small text).
//
// Adding a format:
//   1. its reader in program_files.cc (a FileReading, never an exception;
//      `failed` only when the file claims the format and fails its check),
//      and its row in ProgramFormats() there, before any row that would
//      also accept its files (rows are tried in order);
//   2. its name in core/records/verify_report.cc: the OneOf of a file's
//      "format", and, for a checkpoint format, the report's "format" (and
//      ProgramFile::format's comment, core/records/verify_report.h); where
//      a missing optimizer state should fail rather than warn, the formats
//      core/decide/decide.cc's checkpoint check reads (`read_formats`);
//   3. a test in tests/runner/program_ckpt_test.py (a test_NAME function
//      writing a fixture as a program would save it, readable and damaged)
//      and its NAME in tests/runner/CMakeLists.txt's runner.program_ list;
//   4. its line in pilot-runner(1) under --program-checkpoint (the .IP list
//      of formats), and in pilot-files(5)'s verify.json "format" lists.
struct ProgramFormat {
  const char* name;  // ProgramFile::format (core/records/verify_report.h)
  bool checkpoint;   // the report's "format" counts it
  // Single-file formats.
  bool (*recognise)(const FileHead& f) = nullptr;
  FileReading (*read)(const FileHead& f) = nullptr;
  // Directory formats.
  bool (*member)(const std::string& file_name) = nullptr;
  const char* index = nullptr;  // the file whose bytes read_directory parses
  DcpReading (*read_directory)(const std::string& index_bytes, int64_t index_size,
                               const std::map<std::string, int64_t>& sizes,
                               const std::string& label) = nullptr;
};
const std::vector<ProgramFormat>& ProgramFormats();

// The directory row whose `member` accepts `file_name`, or nullptr.
const ProgramFormat* DirectoryFormatOf(const std::string& file_name);

// True when `format` names a `checkpoint` row.
bool IsCheckpointFormat(const std::string& format);

// True for a DCP shard's file name, "__0_0.distcp".
bool IsDcpShardName(const std::string& name);

}  // namespace pilot::runner
