// Collectives for the node stage over c10d: a TCPStore rendezvous, then
// ProcessGroupGloo on the CPU or ProcessGroupNCCL on CUDA (when the build
// has NCCL). Every wait is bounded by the group's timeout; a peer that died
// makes the next collective fail (Gloo: "connection closed"; NCCL: its
// watchdog) instead of hanging.
//
// Timing: each asynchronous collective records when it was launched and
// when it completed (a callback on its future). Busy() is the union of
// those intervals: time during which at least one collective was in
// flight. Exposed time is measured by the caller around Wait().
//
// Thread-safety: one thread issues collectives; completion callbacks run on
// the backend's threads and only touch the interval list under a mutex.
#pragma once

#include <ATen/ATen.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/base/status.h"
#include "launch/rank_env.h"

namespace pilot::runner {

class Comm {
 public:
  // Rendezvous at info.master_addr:master_port (rank 0 hosts the store) and
  // builds the process group for `device`. `timeout` bounds the rendezvous
  // and every collective. Errors: kUnavailable (rendezvous timed out or
  // failed, naming the address), kInvalid (no backend for the device).
  static Result<std::unique_ptr<Comm>> Create(const launch::RankInfo& info,
                                              const at::Device& device,
                                              std::chrono::milliseconds timeout);
  ~Comm();

  // A group of some of this group's ranks, `members` (this group's ranks,
  // in the new group's rank order; this rank must be one), over the same
  // store under `name`. Every member calls it with the same name and
  // members, and no other rank does. Errors as Create's.
  Result<std::unique_ptr<Comm>> Subgroup(const std::string& name, const std::vector<int>& members,
                                         const at::Device& device, std::chrono::milliseconds timeout);

  struct Handle {
    size_t id = 0;
  };

  int rank() const { return rank_; }
  int world() const { return world_; }
  const std::string& backend() const { return backend_; }

  // In-place sum of `t` over the ranks (asynchronous; Wait before reading).
  Handle AllReduceAsync(at::Tensor t);
  // Gathers every rank's `shard` (same numel) into `full` (world * numel,
  // rank-major).
  Handle AllGatherAsync(at::Tensor full, at::Tensor shard);
  // Sums `full` (world * numel) over the ranks and leaves this rank's part
  // in `shard`. Gloo has no reduce-scatter: it all-reduces `full` and the
  // caller's part is copied by Wait().
  Handle ReduceScatterAsync(at::Tensor shard, at::Tensor full);
  // Waits for one collective / all of them. Throws on failure or timeout
  // (c10::Error), the message names the collective.
  void Wait(Handle h);
  void WaitAll();
  // NCCL: while on, each Wait also measures how long the current stream
  // waits for the collective (timing events around the stream wait); the
  // sum since the last call, in ms, once the device has passed them. 0 on
  // Gloo, where Wait blocks the host and the caller's clock sees it.
  void MeasureStreamStalls(bool on);
  double TakeStreamStallMs();

  // Synchronous helpers.
  void AllReduce(at::Tensor t) { Wait(AllReduceAsync(std::move(t))); }
  void Barrier();

  // Seconds with at least one collective in flight since the last call, and
  // the count of collectives; resets the record.
  double TakeBusySeconds(int64_t* count);

  // The rendezvous store (for small key/value exchanges).
  void StoreSet(const std::string& key, const std::string& value);
  std::string StoreGet(const std::string& key);

 private:
  struct Impl;
  Comm() = default;
  // The process group over impl_->store under `prefix`.
  Status BuildGroup(const std::string& prefix, int rank, int world, const at::Device& device,
                    std::chrono::milliseconds timeout);
  std::unique_ptr<Impl> impl_;
  int rank_ = 0, world_ = 1;
  std::string backend_;
};

}  // namespace pilot::runner
