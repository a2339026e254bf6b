// Checkpoints: a directory per step, committed atomically.
//
//   <root>/step-000040/
//     model.safetensors            parameters (float32 master weights)
//     optim-<state>.safetensors    optimizer state, one file per kind of
//                                  state ("exp_avg", "exp_avg_sq" for AdamW,
//                                  "momentum" for SGD), same tensor names as
//                                  the model; metadata "step"
//     state.json                   step, seed, data position, schedule,
//                                  loss scaler, RNG states, config sha256,
//                                  eval loss at this step
//     manifest.json                sha256 and size of each file above
//     COMPLETE                     written last; without it the checkpoint
//                                  does not exist
//
// Save: first the free space (core/base/disk_space.h): the checkpoint's size
// (its tensors' bytes, headers and small files) must fit in root's
// filesystem together with what the caller writes next (SaveRoom::after),
// else the save fails before its first byte, naming the figures. Then
// files go to "<root>/.step-000040.tmp-<pid>", each is fsynced (the
// tensor files are written concurrently, one thread each), and the
// directory is committed by runner/ckpt/dir_commit.h (fsynced, renamed,
// the root fsynced, then COMPLETE written).
// Load: COMPLETE and the manifest are checked, files are read concurrently
// and their sha256 compared with the manifest while loading.
//
// Thread-safety: call from the training thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/records/checkpoint_meta.h"
#include "core/base/disk_space.h"
#include "core/base/status.h"
#include "runner/train/model.h"
#include "runner/train/optim.h"

namespace pilot::runner {


// state.json: core's record (core/records/checkpoint_meta.h), written and read by
// its field list.
using TrainState = CheckpointState;

// manifest.json: core's record (core/records/checkpoint_meta.h).
using ManifestFile = CheckpointFile;
using Manifest = CheckpointManifest;

struct CheckpointIo {
  std::string path;  // the committed directory
  int64_t bytes = 0;
  double seconds = 0;
};

// Which parts a restore leaves out: for testing that the restore comparison
// can fail (PILOT_RUNNER_TEST_SKIP_RESTORE=optimizer|rng|data, see
// pilot-runner(1)).
struct RestoreSkips {
  bool optimizer = false;
  bool rng = false;
  bool data = false;
  std::string Describe() const;
  static RestoreSkips FromEnv();
};

std::string StepDirName(int64_t step);  // "step-000040"

// What a save checks room for besides its own files.
struct SaveRoom {
  std::string root_label = "checkpoint.dir";  // what moves `root`, for the message
  std::vector<SpaceNeed> after;               // what the caller writes next, elsewhere
};

// The room a stage's save checks: its checkpoint under checkpoint.dir (or
// --out when that is unset) and, in `out`, `after_bytes` of what the stage
// writes next plus kResultsReserveBytes for its results.
SaveRoom RoomAfterSave(const CheckpointConfig& c, const std::string& out, int64_t after_bytes);

// The size on disk, at most, of a checkpoint of these tensor files: each
// file's SafetensorsFileBound plus kCheckpointMetaBytes.
int64_t CheckpointBytesBound(const std::vector<NamedTensors>& files);

// Saves under `root` (created if missing) and prunes to `keep` checkpoints.
// Errors: kIoError "checkpoint: needs X, Y free on DIR (LABEL)" before
// anything is written; kIoError naming the file that could not be written
// (the temp directory is removed then); those of StagedDir.
Result<CheckpointIo> SaveCheckpoint(const std::string& root, const Model& model,
                                    Optimizer& optim, const TrainState& state, int keep,
                                    const SaveRoom& room = {});

// Restores model weights, optimizer state (and step), RNG states; returns the
// saved TrainState (with data.next_index rewound to 0 when skips.data).
// Errors: kNotFound (no COMPLETE), kCorrupt (hash, size, tensor mismatch,
// naming the file), kIoError.
Result<TrainState> LoadCheckpoint(const std::string& dir, Model* model, Optimizer* optim,
                                  const RestoreSkips& skips, CheckpointIo* io);

Result<Manifest> ReadManifest(const std::string& dir);
Result<TrainState> ReadTrainState(const std::string& dir);

// OK when `dir` holds its COMPLETE marker; kNotFound "no COMPLETE marker:
// the checkpoint was never committed" else (a save that was killed or
// failed): checked before any of its files is read.
Status RequireCommitted(const std::string& dir);

// The depth a checkpoint's state.json names (model.layers: a sharded run's
// single stage at reduced depth), set in `cfg` to rebuild that model.
// Nothing without the member. kCorrupt naming DIR/state.json when it lies
// outside 1..cfg->model.layers.
Status ApplySavedDepth(const TrainState& ts, const std::string& dir, Config* cfg);
// Hex of the default generators' states, for TrainState.rng_*.
std::string CaptureCpuRng();
std::string CaptureCudaRng();  // "" without CUDA

// The optimizer file name for a state ("optim-exp_avg.safetensors").
std::string OptimFileName(const std::string& state);

}  // namespace pilot::runner
