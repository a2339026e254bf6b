// What a pilot trains, as the stages see it. The pilot's driver
// (runner/app/pilot.h) runs the single stage and its restore process
// through a Workload, and every rank of the node stage runs one; the node
// stage's launching process (runner/node/stage.h) and results.json are the
// same for every workload.
//
// Today there is one: the builtin models (runner/workload/builtin.h, the
// GPT and Llama families of runner/train/). Another builtin kind is one
// more folder or file implementing this interface and its case in
// SelectWorkload(). A user's own training program is not a workload: the
// supervisor runs it itself as the job's user (supervisor/program/), and
// the runner's only part in it is reading its checkpoint
// (`pilot-runner verify --program-checkpoint`, runner/ckpt/program_verify.h).
//
// Contract for an implementation: every method returns an exit status of
// pilot-runner(1) (core/records/exit_codes.h) and throws nothing; RunSingle
// fills stages.single, RunResumed writes <out>/resume.json, RunNodeRank
// writes its rank report (runner/node/rank.h describes its fields).
//
// Thread-safety: process-level entry points, one at a time.
#pragma once

#include <cstdio>
#include <memory>

#include "core/config/config.h"
#include "core/records/results.h"
#include "runner/run_options.h"
#include "runner/train/inputs.h"

namespace pilot::runner {

class Workload {
 public:
  virtual ~Workload() = default;

  // The single stage in this process, the restore test included (which
  // starts this executable again with opts.resume_checkpoint set). Fills
  // `st`; `metrics` (may be null) gets the per-step lines.
  virtual int RunSingle(const RunOptions& opts, const Config& cfg, const Pins& pins, SingleStage* st,
                        FILE* metrics) = 0;

  // The single stage's fresh process: restore opts.resume_checkpoint,
  // resume, compare with opts.reference_params.
  virtual int RunResumed(const RunOptions& opts) = 0;

  // One rank of one node-stage phase (the rank variables are in the
  // environment, launch/rank_env.h's RankFromEnv).
  virtual int RunNodeRank(const RunOptions& opts) = 0;
};

// The workload of this run: the builtin models.
std::unique_ptr<Workload> SelectWorkload();

}  // namespace pilot::runner
