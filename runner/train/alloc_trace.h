// The CUDA caching allocator's own record of this process: what it was
// asked (each request's bytes, each free) and, for the trace file, what it
// mapped. Two uses:
//
//   - recordings kept in results.json (stages.single.allocator_requests)
//     for the memory model's replay (core/models/memory_replay.h): the single
//     stage records the reference process from its start through its first
//     steady step, and the last two steps of each memory calibration and of
//     the recompute check, with the step's phases marked;
//   - PILOT_RUNNER_ALLOC_TRACE=DIR: every event of the process, from its
//     training session on, in DIR/alloc-PID.trace, one line each: "a|r|f
//     ADDR BYTES STREAM" (a request, a free asked for, a free done), "m|u
//     ADDR BYTES STREAM" (device pages mapped, unmapped), "s|x ADDR BYTES
//     STREAM" (a segment allocated, freed), "o FREE BYTES STREAM" (out of
//     memory), with NoteAllocTrace's lines ("# ...") between them
//     (bench/alloc_replay.py reads it).
//
// Both need a CUDA device and torch 2.2 or later (the allocator's trace
// trackers); elsewhere nothing is recorded. The tracker is attached once
// per process and stays (torch cannot detach one); it runs under the
// allocator's lock, appends and returns.
//
// Thread-safety: any thread; a recording is one at a time per process.
#pragma once

#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "core/models/alloc_replay.h"
#include "core/records/results.h"

namespace pilot::runner {

inline constexpr const char* kAllocTraceEnv = "PILOT_RUNNER_ALLOC_TRACE";

// Opens the trace file when the variable names a folder (once per process).
void StartAllocTrace(const at::Device& dev);
// A "# line" in the trace file, when one is open.
void NoteAllocTrace(const std::string& line);

// Starts recording this process's requests; false where nothing can be
// recorded (then Stop gives nothing). With `steps` > 0 the recording ends
// by itself where step `steps` + 1 would begin.
bool StartAllocRecording(const at::Device& dev, int steps = 0);
// A step or phase mark in the recording, when one is on.
void MarkAllocRecording(AllocOp::Kind mark);
// The recording since Start (frees of earlier requests left out); ends it.
std::vector<AllocOp> StopAllocRecording();
// Ends the recording and, when it holds two steps, adds it to `out` as
// `process` at that shape: all of it with `whole` (the reference: its setup
// and first step), else its last two steps (what the replay reads).
void KeepAllocRecording(const std::string& process, int micro_batch, int seq_len, int grad_accum,
                        bool checkpointing, bool whole, std::vector<AllocRecording>* out);

}  // namespace pilot::runner
