// results.json's stages.node: the full-node stage's measurements, filled by
// pilot-runner's launcher (runner/node_launch.cc).
// Field meanings: pilot-files(5), RESULTS.JSON. Plain values; included by
// core/records/results.h, which owns the (strict) JSON reading and writing.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/records/memory_figures.h"

namespace pilot {

// Memory of one rank at one measured step (the figures the device has:
// allocator figures on CUDA, resident set on the CPU): the figures of
// MemoryFigures (core/records/memory_figures.h) that kNodeMemoryKeys names,
// in that order (device_used_bytes and forward_peak_allocated_bytes came
// later, hence their place and their rule).
inline constexpr MemoryKey kNodeMemoryKeys[] = {
    {"step"},
    {"peak_allocated_bytes"},
    {"peak_reserved_bytes"},
    {"process_peak_rss_bytes"},
    // The rank's device, as the system reports it.
    {"device_used_bytes", MemoryKeyRule::kMayBeAbsent},
    {"forward_peak_allocated_bytes", MemoryKeyRule::kMayBeAbsent},
};
struct NodeMemoryStats : MemoryFigures {
  NodeMemoryStats() = default;
  // The figures of `f` this record has (KeepFigures).
  explicit NodeMemoryStats(const MemoryFigures& f)
      : MemoryFigures(KeepFigures(f, kNodeMemoryKeys)) {}
  // Its figures in kNodeMemoryKeys' order.
  NodeMemoryStats(int64_t measured_step, std::optional<int64_t> peak_allocated,
                  std::optional<int64_t> peak_reserved, std::optional<int64_t> process_peak_rss,
                  std::optional<int64_t> device_used,
                  std::optional<int64_t> forward_peak_allocated) {
    step = measured_step;
    peak_allocated_bytes = peak_allocated;
    peak_reserved_bytes = peak_reserved;
    process_peak_rss_bytes = process_peak_rss;
    device_used_bytes = device_used;
    forward_peak_allocated_bytes = forward_peak_allocated;
  }
  bool operator==(const NodeMemoryStats&) const = default;
};

struct NodeRankStats {
  int rank = 0;
  int node_id = 0;                  // SLURM_NODEID (0 for a local spawn)
  std::string host;
  double tokens_per_second = 0;     // tokens this rank processed per second
  double step_ms = 0;               // mean over the timed steps
  double data_wait_ms = 0;          // per step, blocked on the loader
  double comm_total_ms = 0;         // per step, >= 1 collective in flight
  double comm_exposed_ms = 0;       // per step, waiting with no compute left
  std::optional<NodeMemoryStats> memory;          // train phase, steady step
  std::optional<NodeMemoryStats> memory_resumed;  // resume phase, first step
  bool operator==(const NodeRankStats&) const = default;
};

struct NodeScaling {
  double tokens_per_second = 0;            // all ranks
  double tokens_per_second_per_rank = 0;   // mean
  std::optional<double> single_tokens_per_second;  // the single stage's
  std::optional<double> efficiency;        // per rank / single
  bool operator==(const NodeScaling&) const = default;
};

// One all-reduce of the gradients' size over a level of a node stage across
// nodes: within each node, or between the nodes.
struct NodeCommLevel {
  int group_size = 0;        // ranks in each group (the largest)
  int groups = 0;            // groups that ran it at once
  int64_t bytes = 0;
  double allreduce_ms = 0;   // the slowest rank's mean
  double gb_per_second = 0;  // bytes / allreduce_ms (the algorithm's bandwidth)
  bool operator==(const NodeCommLevel&) const = default;
};

struct NodeComm {
  std::string backend;              // "gloo" | "nccl"
  double total_ms_per_step = 0;     // mean over ranks
  double exposed_ms_per_step = 0;
  double exposed_fraction = 0;      // exposed / step time
  double collectives_per_step = 0;
  int buckets = 0;                  // ddp gradient buckets
  int units = 0;                    // sharded units
  std::optional<int> nodes;         // nodes the ranks ran on (absent: older files)
  std::optional<NodeCommLevel> intra_node;  // across nodes only
  std::optional<NodeCommLevel> inter_node;
  bool operator==(const NodeComm&) const = default;
};

struct NodeMemory {
  std::optional<int64_t> fresh_peak_bytes;    // max over ranks, train phase
  std::optional<int64_t> resumed_peak_bytes;  // max over ranks, resume phase
  bool operator==(const NodeMemory&) const = default;
};

struct NodeCheckpoint {
  std::string path;
  int64_t step = 0;
  int64_t bytes = 0;                // all shards
  double save_seconds = 0;          // slowest rank
  int shards = 0;                   // = world size
  bool operator==(const NodeCheckpoint&) const = default;
};

// One restore of the train phase's checkpoint in fresh processes.
struct NodeRestore {
  int world_size = 0;               // processes that restored
  int from_world_size = 0;          // processes that saved
  bool ran = false;
  bool equal = false;               // losses and final parameters within tolerance
  std::string mode;                 // as RestoreInfo's ("" from the runner)
  double tolerance = 0;             // relative (eval.restore_tolerance)
  double first_rel_loss_diff = 0;   // as RestoreInfo's, the largest over ranks
  double first_tolerance = 0;
  double noise_margin = 0;
  double noise_max_ratio = 0;
  int noise_steps = 0;
  double max_abs_loss_diff = 0;
  double max_rel_loss_diff = 0;
  double max_abs_param_diff = 0;
  double max_rel_param_diff = 0;    // ||a - b|| / ||b|| over all parameters
  double load_seconds = 0;
  std::string detail;               // why not equal ("" when equal)
  std::string skipped;              // test switch in effect ("" normally)
  bool operator==(const NodeRestore&) const = default;
};

struct NodeFailure {
  std::string phase;                // "train" | "resume" | "resume-other"
  std::optional<int64_t> rank;      // the rank that failed first
  std::string message;
  bool operator==(const NodeFailure&) const = default;
};

struct NodeStage {
  std::string status;               // "ok" | "failed" (a restore unequal) | "error"
  int world_size = 0;
  std::string mode;                 // "ddp" | "sharded"
  std::string launcher;             // "local" | "srun"
  int data_ranks = 0;               // parallel.nproc: the global batch's split
  int64_t steps = 0;
  std::vector<double> losses;       // global mean loss per step (train phase)
  std::vector<NodeRankStats> ranks;
  NodeScaling scaling;
  NodeComm comm;
  double data_stall_ms_per_step = 0;  // max over ranks
  NodeMemory memory;
  NodeCheckpoint checkpoint;
  std::vector<NodeRestore> restore;   // same world size, then another
  std::optional<NodeFailure> failure;
  bool operator==(const NodeStage&) const = default;
};

}  // namespace pilot
