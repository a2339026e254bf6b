// Replaying what a process asked of torch's CUDA caching allocator.
//
// A pilot on a GPU records the requests its process made of the caching
// allocator (sizes, frees, step and phase marks: runner/train/device.h) and
// keeps them in results.json. This file is the allocator's model: given the
// same requests it hands out the same addresses and maps the same device
// pages as torch's allocator with expandable segments
// (PYTORCH_ALLOC_CONF=expandable_segments:True, the runner's default),
// which bench/RESULTS.md shows request by request. Replayed under a limit it
// tells how much device memory the requests need: at all (no request
// fails), and at full speed (the allocator never has to unmap cached pages
// to make room, which stalls the device every step).
//
// The model of torch 2.x's allocator, for one stream:
//   - a request is rounded up to 512 bytes; up to 1 MiB it comes from the
//     small pool, above it from the large one;
//   - each pool is one expandable segment: a range of addresses mapped to
//     device memory in granules of 2 MiB (small) or 20 MiB (large);
//   - a request takes the smallest free mapped block that holds it (ties:
//     the lowest address), preferring, among blocks of about the same
//     size, one that could not grow into unmapped space after it; the rest
//     of the block stays free;
//   - with none, the lowest free range of addresses that holds it (free and
//     unmapped blocks together) is mapped, granule by granule;
//   - under a limit, a request whose rounded size (2 MiB multiples above
//     10 MiB, 20 MiB from 1 to 10 MiB, 2 MiB up to 1 MiB) would take the
//     mapped bytes past it first unmaps every whole free granule of both
//     pools (a release), then fails if it still would;
//   - a freed block merges with free neighbours of the same mapped state.
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/status.h"

namespace pilot {

// One event of a process's dialogue with the allocator.
struct AllocOp {
  enum Kind : uint8_t {
    kAlloc,      // value: bytes asked for; the allocation's id is its index
                 // among the stream's kAlloc ops
    kFree,       // value: the id of the allocation freed
    kStep,       // a training step starts
    kForward,    // a micro-batch's forward starts (its batch is on the device)
    kBackward,   // its backward starts
    kOptimizer,  // the optimizer's part of the step starts
  };
  Kind kind = kAlloc;
  int64_t value = 0;
  bool operator==(const AllocOp&) const = default;
};

// The text form kept in results.json: tokens separated by one space,
// "a<bytes>" (a request), "f<n>" (frees the allocation made n requests ago,
// n >= 1), and the marks "s", "F", "B", "O".
std::string EncodeAllocOps(const std::vector<AllocOp>& ops);
// The strict reader of that form: at most `max_ops` tokens, byte counts
// from 1 to 2^48, every free naming an earlier request not freed yet.
// Errors: kCorrupt with the token's position.
Result<std::vector<AllocOp>> DecodeAllocOps(std::string_view text, size_t max_ops);

// Sizes of the model, as torch's allocator has them.
inline constexpr int64_t kAllocRound = 512;
inline constexpr int64_t kSmallRequest = int64_t{1} << 20;  // at most: small pool
inline constexpr int64_t kSmallGranule = int64_t{2} << 20;
inline constexpr int64_t kLargeGranule = int64_t{20} << 20;

struct ReplayOutcome {
  bool out_of_memory = false;  // a request failed under the limit
  int64_t peak_mapped = 0;     // device bytes mapped at most
  int64_t peak_allocated = 0;  // bytes of blocks handed out at most (rounded)
  int releases = 0;            // times cached pages were unmapped to make room
  int releases_late = 0;       // of those, at or after op `late_from`
};

// Replays `ops` with the mapped bytes held to `limit` (0: no limit). With
// `stop_early`, stops at the first failure, or at the first release at or
// after `late_from`.
ReplayOutcome ReplayAllocator(const std::vector<AllocOp>& ops, int64_t limit, size_t late_from = 0,
                              bool stop_early = false);

// What a request stream needs, in mapped device bytes (the CUDA runtime's
// own memory comes on top).
struct AllocatorNeed {
  int64_t to_run = 0;         // the least limit under which no request fails
  int64_t at_full_speed = 0;  // ... and nothing is released from `late_from` on
  int64_t unlimited = 0;      // mapped at most without a limit (what a
                              // larger device shows)
  int64_t allocated = 0;      // allocated at most
};
// Found by bisection to 2 MiB between the allocated peak and the unlimited
// mapped peak.
AllocatorNeed NeedOf(const std::vector<AllocOp>& ops, size_t late_from);

}  // namespace pilot
