// The rank report: what one rank of a node-stage run tells its launcher.
//
// Each rank writes <phase dir>/rank-NNNNN.json when it ends (pilot-runner,
// node stage); the launcher reads every rank's report back and builds
// stages.node of results.json from them. Written by the job's own
// processes, so read strictly like results.json (core/records/record.h, the
// measured style: kInvalid "path: detail"; NaN and infinities as the
// strings "nan", "inf", "-inf").
//
// Members a rank had not reached when it stopped (a failure during the
// build leaves no "mode", no "losses") are std::optional and are then left
// out of the file, not written as null.
//
// Thread-safety: plain values and pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/base/status.h"
#include "core/records/memory_figures.h"

namespace pilot {

inline constexpr size_t kMaxRankReportBytes = 16u << 20;

// "memory": the allocator and process figures of the measured step: the
// figures of MemoryFigures (core/records/memory_figures.h) that
// kRankMemoryKeys names, in that order, left out when unset.
inline constexpr MemoryKey kRankMemoryKeys[] = {
    {"device"},
    {"step"},
    {"peak_allocated_bytes", MemoryKeyRule::kOmitIfUnset},
    {"peak_reserved_bytes", MemoryKeyRule::kOmitIfUnset},
    {"device_used_bytes", MemoryKeyRule::kOmitIfUnset},
    {"process_device_bytes", MemoryKeyRule::kOmitIfUnset},
    {"process_peak_rss_bytes", MemoryKeyRule::kOmitIfUnset},
    {"process_rss_bytes", MemoryKeyRule::kOmitIfUnset},
    // The activation peak of the forward pass.
    {"forward_peak_allocated_bytes", MemoryKeyRule::kOmitIfUnset},
};
struct RankMemory : MemoryFigures {
  RankMemory() = default;
  // The figures of `f` this record has (KeepFigures).
  explicit RankMemory(const MemoryFigures& f) : MemoryFigures(KeepFigures(f, kRankMemoryKeys)) {}
  // Its figures in kRankMemoryKeys' order.
  RankMemory(std::string device_name, int64_t measured_step, std::optional<int64_t> peak_allocated,
             std::optional<int64_t> peak_reserved, std::optional<int64_t> device_used,
             std::optional<int64_t> process_device, std::optional<int64_t> process_peak_rss,
             std::optional<int64_t> process_rss, std::optional<int64_t> forward_peak_allocated) {
    device = std::move(device_name);
    step = measured_step;
    peak_allocated_bytes = peak_allocated;
    peak_reserved_bytes = peak_reserved;
    device_used_bytes = device_used;
    process_device_bytes = process_device;
    process_peak_rss_bytes = process_peak_rss;
    process_rss_bytes = process_rss;
    forward_peak_allocated_bytes = forward_peak_allocated;
  }
  bool operator==(const RankMemory&) const = default;
};

// "load": the checkpoint a resumed phase started from.
struct RankLoad {
  std::string path;
  int64_t bytes = 0;  // this rank's shard files
  double seconds = 0;
  int from_world_size = 0;  // ranks that wrote it
  bool operator==(const RankLoad&) const = default;
};

// "checkpoint": the checkpoint this rank helped save.
struct RankCheckpoint {
  std::string path;
  int64_t step = 0;
  int64_t bytes = 0;  // this rank's shard files
  double seconds = 0;
  bool operator==(const RankCheckpoint&) const = default;
};

// "comm_probe": the train phase of a node stage across nodes times one
// all-reduce of the gradients' size (at most 64 MiB) within this rank's
// node and between nodes (the ranks at this rank's place on each node).
struct RankCommProbe {
  int64_t bytes = 0;  // the all-reduced buffer
  int nodes = 0;      // nodes the world spans
  std::optional<int> intra_size;     // ranks on this node (absent: one)
  std::optional<double> intra_ms;    // mean of the timed all-reduces
  std::optional<int> inter_size;     // nodes with a rank at this place
  std::optional<double> inter_ms;
  bool operator==(const RankCommProbe&) const = default;
};

// "failure": where an exception stopped the rank.
struct RankFailure {
  std::string phase;  // the session's phase ("build", "communication", ...)
  int64_t step = 0;
  bool out_of_memory = false;
  bool operator==(const RankFailure&) const = default;
};

struct RankReport {
  // Always present.
  int rank = 0;
  int world_size = 0;
  int local_rank = 0;
  int node_id = 0;
  std::string launcher;  // "local" | "srun"
  std::string phase;     // "train" | "resume"
  std::string host;
  std::string status;  // "ok" | "error"
  int exit_code = 0;   // the rank's exit status
  std::optional<std::string> message;  // why it failed (first line)
  // Once the communicator and engine exist.
  std::optional<std::string> backend;  // the communication backend
  std::optional<std::string> mode;     // parallel mode
  std::optional<int> data_ranks;
  std::optional<int> buckets;
  std::optional<int> units;
  // Resumed phases only.
  std::optional<std::string> skipped;  // parts a test switch left out
  std::optional<RankLoad> load;
  // The training loop.
  std::optional<RankMemory> memory;
  std::optional<RankCheckpoint> checkpoint;
  std::optional<int64_t> first_step;
  std::optional<std::vector<double>> losses;      // from first_step on
  std::optional<std::vector<double>> grad_norms;  // same steps
  std::optional<int> timed_steps;
  // Means over the timed steps (absent when none was timed).
  std::optional<double> step_ms;
  std::optional<double> tokens_per_second;
  std::optional<double> data_wait_ms;
  std::optional<double> compute_ms;
  std::optional<double> comm_total_ms;
  std::optional<double> comm_exposed_ms;
  std::optional<double> optimizer_ms;
  std::optional<double> collectives_per_step;
  std::optional<RankCommProbe> comm_probe;  // across nodes, train phase
  // Rank 0 of a resumed phase: final parameters against the reference.
  std::optional<double> max_abs_param_diff;
  std::optional<double> max_rel_param_diff;
  std::optional<int64_t> params_compared;
  std::optional<RankFailure> failure;
  bool operator==(const RankReport&) const = default;
};

// Pretty JSON (2-space indent, field-list order) ending in a newline.
std::string RankReportToJson(const RankReport& r);
// Strict parse of at most kMaxRankReportBytes; `label` names the input.
// Errors: kInvalid naming the field path.
Result<RankReport> ParseRankReport(std::string_view text, const std::string& label);
// ReadFileLimited + ParseRankReport (label = the path). A missing file is
// kNotFound (the rank died before writing it).
Result<RankReport> ReadRankReport(const std::string& path);

// How a rank's message begins when its collective or a peer failed, not
// the rank itself (it waited on a rank that died): the rank that wrote it
// is not the one to blame while another failed.
inline constexpr char kPeerFailedMessage[] = "communication failed";
// `r` exists and its message says so.
bool PeerFailed(const std::optional<RankReport>& r);

}  // namespace pilot
