// How pilot-runner was asked to run: the parsed command line of `run` and
// `verify` (runner/app/cli.h fills them; pilot-runner(1) documents every
// flag). Plain values, no torch.
#pragma once

#include <string>
#include <vector>

namespace pilot::runner {

struct RunOptions {
  std::string config;
  std::string out;
  std::string lock;
  std::string stage = "single";
  std::vector<std::string> sets;   // --set section.key=value
  int overhead_steps = 0;          // --overhead-steps: instrumentation check
  int nproc = 0;                   // --nproc: node stage processes (0 = parallel.nproc)
  bool keep_reference = false;     // --keep-reference
  std::string trace;               // --trace: Chrome trace of steady steps
  int trace_steps = 3;             // --trace-steps: how many
  // Internal (the fresh process of the restore test):
  std::string resume_checkpoint;   // --resume-from
  std::string reference_params;    // --reference
  // Internal (pilot-supervisor): the report goes to this inherited file
  // descriptor instead of OUT/results.json (OUT/resume.json for the fresh
  // process), and the single stage leaves the fresh process to the
  // supervisor (which starts it, then compares).
  int report_fd = -1;              // --report-fd
  bool supervised = false;         // --supervised
  double single_tokens_per_second = 0;  // --single-tokens-per-second (node stage's scaling)
  double memory_headroom = 0.10;        // --memory-headroom (the site's thresholds.memory_headroom)
};

struct VerifyOptions {
  std::string checkpoint;          // --checkpoint: the builtin checkpoint
  std::string config;
  std::string expect;  // results.json to compare with ("" = none)
  std::vector<std::string> sets;
  bool json = false;
  std::string out;                 // --out: also write the JSON report here
  // Program mode: a program's checkpoint directory, in any format.
  std::string program_checkpoint;  // --program-checkpoint
  std::string expect_manifest;     // --expect-manifest: an earlier report of this mode
};

}  // namespace pilot::runner
