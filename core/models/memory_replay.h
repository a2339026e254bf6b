// The memory a shape needs, by replaying the pilot's own allocator requests.
//
// On a GPU the runner records what its process asked of the caching
// allocator (results.json stages.single.allocator_requests, one recording
// per process part: the reference from its start, and the steps of the
// memory calibrations and the recompute check). For a query shape this file
// builds the requests that shape's training process would make and replays
// them through the allocator's model (core/models/alloc_replay.h):
//
//   - the recorded steps of one activation-checkpointing setting at two
//     micro-batches (the same seq_len) have the same requests in the same
//     order; each request's size is taken as a line in the tokens of a
//     micro-batch through the two, and moved to the query's tokens;
//   - a process is its start (the model and its parameters, as recorded),
//     a first step, then steady steps; the first step makes what the
//     reference's first step made and no later step did (the optimizer's
//     state, the math libraries' workspaces), each at the same place: so
//     many requests after the same mark (step, forward, backward,
//     optimizer);
//   - the same run needs different memory in different processes: which
//     free block a request gets depends on everything before it, and a
//     workspace made a few requests earlier or later can move a step's
//     peak by a few per cent (bench/RESULTS.md). So the prediction replays
//     several histories: the first process with the first step's
//     workspaces a few requests either side of their recorded place, and a
//     restored process (which loads the optimizer's state before its first
//     step), and reports the most any of them needed, and the least.
//
// Replay applies where it models what ran: a CUDA pilot with the allocator
// settings "expandable_segments:True" (training.alloc_conf's default), a
// single process per GPU, the pilot's own depth. Otherwise it says why not
// and the caller keeps the memory model's estimate (core/models/memory_model.h).
//
// Thread-safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/models/alloc_replay.h"
#include "core/records/results.h"

namespace pilot {

// The allocator settings the model replays.
inline constexpr const char* kReplayedAllocConf = "expandable_segments:True";
// Most tokens one recording may hold (a pilot's step makes a few thousand
// requests).
inline constexpr size_t kMaxRecordedOps = size_t{4} << 20;
// Most events one replayed process may hold (setup and eight steps; a
// 1.3B-parameter GPT's is about 45,000): what bounds a replay's time, about
// a second per 100,000 on one core.
inline constexpr size_t kMaxReplayedOps = size_t{1} << 20;

struct ReplayQuery {
  int seq_len = 0;
  int micro_batch = 0;
  bool activation_checkpointing = false;
};

struct ReplayPrediction {
  AllocatorNeed most;   // the most each figure came to over the histories
  AllocatorNeed least;  // the least
  int histories = 0;
  int recorded_grad_accum = 1;  // micro-batches per step in the recordings
  // What was replayed and from which recordings, for people.
  std::string basis;
};

// Nullopt (and `why_not`, when given) when the recordings cannot answer the
// query: no recordings, another allocator setting, not two micro-batches of
// the query's setting, recordings that do not decode or whose steps differ.
std::optional<ReplayPrediction> PredictByReplay(const SingleStage& s, const std::string& alloc_conf,
                                                const ReplayQuery& q, std::string* why_not = nullptr);

// Keeps a recording's setup (what comes before its first step mark) when
// `keep_setup`, its first step when `keep_first`, and its last `last`
// steps; the requests of what is dropped and their frees go. The runner
// keeps what PredictByReplay reads and no more.
std::vector<AllocOp> TrimRecording(const std::vector<AllocOp>& ops, bool keep_setup, bool keep_first,
                                   int last);

}  // namespace pilot
