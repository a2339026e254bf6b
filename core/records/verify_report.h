// The report of `pilot-runner verify`: what the epilog re-checked itself,
// in a fresh process running as the job's user, from the checkpoint files.
//
// The runner writes it (JSON, schema "slurm-pilot/verify/1") to the path
// the epilog names; the epilog reads it with a size limit (the process ran
// as the user, so the file is untrusted like results.json) and hands it to
// Decide(). When verify did not run or did not finish (timeout, crash), the
// epilog builds a report with ran = false and `error` set.
//
// Thread-safety: plain values.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/status.h"

namespace pilot {

struct RecordKey;  // core/records/record.h

inline constexpr char kVerifySchema[] = "slurm-pilot/verify/1";
// A program-mode report lists every file (up to 100000 of them), and an
// earlier report is read back as the manifest to compare with.
inline constexpr size_t kMaxVerifyBytes = 32u << 20;

// One file of a program's checkpoint directory (program mode).
struct ProgramFile {
  std::string path;     // relative to the checkpoint directory
  int64_t size = 0;     // bytes
  std::string sha256;   // of its contents; "" when not hashed (a link, a special file)
  // How it was read, from its contents: "safetensors", "torch" (a torch.save
  // zip archive), "dcp" (a file of a torch.distributed.checkpoint directory),
  // "torch-legacy" (a torch.save of before the zip format), "metadata"
  // (small text), "other", "symlink", "special".
  std::string format;
  bool readable = false;  // read and checked without the program's code
  int64_t tensors = 0;    // tensors it holds (as far as it was read)
  std::string detail;     // what was found, or what is wrong
  bool operator==(const ProgramFile&) const = default;
};

struct VerifyReport {
  std::string schema = kVerifySchema;
  bool ran = false;              // verify ran to the end
  std::string error;             // why it did not ("" when ran)
  std::string checkpoint;        // directory verified
  int64_t step = 0;              // its step
  bool complete_marker = false;  // the COMPLETE marker exists
  int files_checked = 0;
  bool manifest_ok = false;     // every file's size and sha256 match manifest.json
  std::string manifest_detail;  // first mismatch, for people
  int64_t params = 0;           // parameter tensors in the checkpoint
  int64_t params_with_optimizer_state = 0;
  bool eval_recomputed = false;  // eval loss recomputed from restored weights
  double eval_loss_recorded = 0;
  double eval_loss_recomputed = 0;
  double eval_rel_diff = 0;   // |recomputed - recorded| / max(|recorded|, tiny)
  double eval_tolerance = 0;  // relative tolerance applied (0 = bitwise)
  bool eval_within = false;
  // Program mode (--program-checkpoint): a checkpoint in a program's own
  // format, read file by file. "builtin" reports leave these at defaults.
  std::string mode = "builtin";     // "builtin" | "program"
  std::string format = "none";      // safetensors | torch | dcp | mixed | unknown | none
  int64_t tensors = 0;              // tensors in the readable files
  bool optimizer_state = false;     // an optimizer's state was found
  int64_t shards = 0;               // .distcp files of DCP directories
  std::vector<ProgramFile> files;   // every file, in path order
  std::vector<std::string> not_readable;    // paths not read independently (warnings)
  std::vector<std::string> problems;        // "path: detail" of each failed check
  std::vector<std::string> manifest_extra;  // files absent from --expect-manifest
  bool operator==(const VerifyReport&) const = default;
};

// Every top-level key of the report, in field-list order (pilot-files(5)
// documents each; a test checks it).
const std::vector<RecordKey>& VerifyReportKeys();

// Pretty JSON ending in a newline.
std::string VerifyReportToJson(const VerifyReport& v);
// Strict parse (kMaxVerifyBytes). Errors: kCorrupt naming the field path.
Result<VerifyReport> ParseVerifyReport(std::string_view text,
                                       const std::string& label = "verify.json");

}  // namespace pilot
