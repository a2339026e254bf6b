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

#include "core/status.h"

namespace pilot {

inline constexpr char kVerifySchema[] = "slurm-pilot/verify/1";
inline constexpr size_t kMaxVerifyBytes = 1u << 20;

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
  bool operator==(const VerifyReport&) const = default;
};

// Pretty JSON ending in a newline.
std::string VerifyReportToJson(const VerifyReport& v);
// Strict parse (kMaxVerifyBytes). Errors: kCorrupt naming the field path.
Result<VerifyReport> ParseVerifyReport(std::string_view text,
                                       const std::string& label = "verify.json");

}  // namespace pilot
