// Checkpoint metadata: the JSON files beside the tensor files of a
// checkpoint directory, as pilot-runner writes them.
//
//   <dir>/state.json     CheckpointState: everything besides the tensors a
//                        single-process run needs to resume exactly
//   <dir>/manifest.json  CheckpointManifest: every file of the directory
//                        with its size and sha256 (state.json included)
//   <node dir>/manifest.json  NodeCheckpointManifest: a node-stage
//                        checkpoint, sharded over the ranks that saved it
//
// Records (core/records/record.h): one field list each drives the writer and the
// strict reader. The writers reproduce the runner's files byte for byte
// (state.json and manifest.json keep their keys in field-list order, the
// node manifest sorts them), so checkpoints written before and after agree.
// The files are written and read back by the job's own processes; a
// reading error is kCorrupt "label: path: detail". NaN and infinities
// (a diverged run's loss or learning rate) are the strings "nan", "inf",
// "-inf".
//
// Thread-safety: plain values and pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/status.h"

namespace pilot {

inline constexpr char kCheckpointSchema[] = "slurm-pilot/checkpoint/1";
// The manifest's name in a checkpoint directory, and the single stage's
// reference parameters in the workload's --out folder (the fresh restore
// process compares against them; the supervisor names both to it).
inline constexpr char kManifestFileName[] = "manifest.json";
inline constexpr char kReferenceParamsFile[] = "reference-final.safetensors";
inline constexpr char kNodeCheckpointSchema[] = "slurm-pilot/node-checkpoint/1";
inline constexpr size_t kMaxCheckpointMetaBytes = 1u << 20;       // state.json, manifest.json
inline constexpr size_t kMaxNodeManifestBytes = size_t{64} << 20;  // lists every shard

struct CheckpointState {
  struct Data {
    std::string format;      // [data].format of the config
    int64_t next_index = 0;  // next training micro-batch index
    bool operator==(const Data&) const = default;
  };
  struct Scheduler {
    std::string kind;     // learning-rate schedule
    int64_t horizon = 0;  // steps the schedule spans
    double lr_last = 0;   // learning rate of step `step`
    bool operator==(const Scheduler&) const = default;
  };
  struct Scaler {
    std::string precision;
    double scale = 0;  // fp16 loss scale (0 otherwise)
    int64_t growth_tracker = 0;
    int64_t skipped = 0;  // steps skipped for non-finite gradients
    bool operator==(const Scaler&) const = default;
  };
  struct Rng {
    std::string cpu;   // hex of torch's CPU generator state
    std::string cuda;  // hex of the CUDA generator state ("" on CPU)
    bool operator==(const Rng&) const = default;
  };
  struct Model {
    std::string kind;
    int64_t params = 0;
    // Layers of the saved model; unset in older files (the config's).
    std::optional<int> layers;
    bool operator==(const Model&) const = default;
  };
  struct Eval {
    int batches = 0;
    double loss = 0;  // eval loss of the weights saved here
    bool operator==(const Eval&) const = default;
  };

  std::string schema = kCheckpointSchema;
  int64_t step = 0;  // optimizer steps completed
  uint64_t seed = 0;
  Data data;
  Scheduler scheduler;
  Scaler scaler;
  Rng rng;
  std::string config_sha256;
  std::string device;
  Model model;
  std::string optimizer;
  Eval eval;
  bool operator==(const CheckpointState&) const = default;
};

struct CheckpointFile {
  std::string name;  // a plain file name in the directory
  int64_t bytes = 0;
  std::string sha256;
  bool operator==(const CheckpointFile&) const = default;
};

struct CheckpointManifest {
  std::string schema = kCheckpointSchema;
  int64_t step = 0;
  std::vector<CheckpointFile> files;
  bool operator==(const CheckpointManifest&) const = default;
};

// One parameter of a node checkpoint: its full shape and the flat chunk
// each rank holds.
struct NodeParamSlot {
  std::string name;
  std::vector<int64_t> shape;
  int64_t numel = 0;
  int64_t chunk = 0;  // elements per rank (the last chunk zero padded)
  bool operator==(const NodeParamSlot&) const = default;
};

struct NodeShardFile {
  std::string name;
  int rank = 0;  // the rank that wrote it
  int64_t bytes = 0;
  std::string sha256;
  bool operator==(const NodeShardFile&) const = default;
};

struct NodeCheckpointManifest {
  std::string schema = kNodeCheckpointSchema;
  int64_t step = 0;
  int world_size = 0;
  int data_ranks = 0;
  std::string mode;  // parallel mode that saved it
  uint64_t seed = 0;
  std::string optimizer;
  int64_t optimizer_step = 0;
  std::vector<std::string> states;  // optimizer state names
  std::vector<NodeParamSlot> params;
  std::vector<NodeShardFile> files;
  bool operator==(const NodeCheckpointManifest&) const = default;
};

// JSON text as the runner writes it: 2-space indent, ending in a newline.
std::string CheckpointStateToJson(const CheckpointState& s);
std::string CheckpointManifestToJson(const CheckpointManifest& m);
std::string NodeCheckpointManifestToJson(const NodeCheckpointManifest& m);

// Strict parses (size limits above); `label` names the input. Errors:
// kCorrupt naming the field path; a schema other than this build's is
// reported as such. The manifests' file names must be plain names (no '/',
// not starting with '.'): "files[2].name: not a plain file name".
Result<CheckpointState> ParseCheckpointState(std::string_view text, const std::string& label);
Result<CheckpointManifest> ParseCheckpointManifest(std::string_view text,
                                                   const std::string& label);
Result<NodeCheckpointManifest> ParseNodeCheckpointManifest(std::string_view text,
                                                           const std::string& label);

}  // namespace pilot
