// The node stage's checkpoint: every rank writes its shard, the manifest
// records the layout, and a restore rebuilds whole tensors from all shards,
// so it works at any world size.
//
//   <root>/step-000006/
//     model-rank00000-of-00002.safetensors        rank 0's part of every
//                                                 parameter: 1-D, chunk =
//                                                 ceil(numel / world)
//                                                 elements, zero padded
//     optim-exp_avg-rank00000-of-00002.safetensors  same for each state
//     ...
//     manifest.json   schema "slurm-pilot/node-checkpoint/1", step, world
//                     size, mode, data ranks, seed, optimizer and its step,
//                     every parameter (name, shape, numel, chunk) and every
//                     file (name, rank, bytes, sha256)
//     COMPLETE        written last
//
// Save is collective: rank 0 creates "<root>/.step-000006.tmp", every rank
// writes and fsyncs its files and publishes their digests through the
// rendezvous store, rank 0 writes the manifest and commits the directory
// as the single stage's format does (runner/ckpt/dir_commit.h: fsync,
// rename, fsync of the root, COMPLETE), or removes it when a rank failed. Load checks COMPLETE, every file's size and sha256
// against the manifest and every tensor's name, shape and dtype.
//
// Thread-safety: call from the training thread of every rank.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <map>
#include <string>

#include "core/records/checkpoint_meta.h"
#include "core/base/status.h"
#include "runner/ckpt/checkpoint.h"
#include "runner/node/comm.h"
#include "runner/node/engine.h"
#include "runner/train/model.h"

namespace pilot::runner {

struct NodeCheckpointInfo {
  int64_t step = 0;
  int world_size = 0;
  int data_ranks = 0;
  std::string mode;
  uint64_t seed = 0;
  int64_t optimizer_step = 0;
};

struct NodeCheckpointIo {
  std::string path;
  int64_t bytes = 0;     // this rank's files
  double seconds = 0;
};

// Collective save of step `info.step` under `root`. Before any rank writes,
// rank 0 checks that every rank's files (world times its own, which are
// all the same size) fit in root's filesystem together with `room.after`
// (core/base/disk_space.h); when they do not, every rank returns kIoError and
// nothing is written (rank 0's status carries the figures and a hint).
Result<NodeCheckpointIo> SaveNodeCheckpoint(const std::string& root, NodeEngine& e, Comm& comm,
                                            const NodeCheckpointInfo& info, const SaveRoom& room = {});

Result<NodeCheckpointInfo> ReadNodeManifest(const std::string& dir);

// Reads every shard of `dir` and loads the whole tensors into `e` (at its
// own world size). Errors: kNotFound (no COMPLETE), kCorrupt (hash, size,
// layout or tensor mismatch, naming the file), kIoError.
Result<NodeCheckpointIo> LoadNodeCheckpoint(const std::string& dir, NodeEngine& e,
                                            NodeCheckpointInfo* info);

}  // namespace pilot::runner
