// A toy training process's allocator requests, as the runner records
// them (core/models/alloc_replay.h): the tests of the replay (core/models/memory_replay.h)
// and of the commands that show it know its requests at every shape.
#pragma once

#include <cstdint>
#include <vector>

#include "core/models/alloc_replay.h"

namespace pilot::toy {

constexpr int64_t kMiB = int64_t{1} << 20;
constexpr int kLayers = 6;

inline int64_t ParamBytes(int l) { return (8 + l) * kMiB; }

// A toy process, as the runner records it: the parameters; then each step
// frees the step before's gradients, runs a forward (an input and one
// activation per layer, sized by tokens, and the logits) and a backward (a
// temporary and a gradient per layer, freeing the activations), and an
// optimizer part. The first step also makes a workspace early in its
// forward and the optimizer's two moments per parameter, kept for good.
inline std::vector<AllocOp> Toy(int64_t tokens, int steps, int extra_alloc_at = -1) {
  std::vector<AllocOp> ops;
  int64_t made = 0;
  auto alloc = [&](int64_t bytes) {
    ops.push_back({AllocOp::kAlloc, bytes});
    return made++;
  };
  auto free = [&](int64_t id) { ops.push_back({AllocOp::kFree, id}); };
  auto mark = [&](AllocOp::Kind k) { ops.push_back({k, 0}); };
  for (int l = 0; l < kLayers; ++l) alloc(ParamBytes(l));
  std::vector<int64_t> grads;
  for (int step = 1; step <= steps; ++step) {
    mark(AllocOp::kStep);
    for (int64_t g : grads) free(g);
    grads.clear();
    mark(AllocOp::kForward);
    const int64_t x = alloc(tokens * 8);
    if (step == 1) alloc(32 * kMiB);  // a library's workspace, at its first use
    std::vector<int64_t> acts;
    for (int l = 0; l < kLayers; ++l) {
      acts.push_back(alloc(tokens * 4096 * (1 + l % 3)));
      if (l == extra_alloc_at) free(alloc(kMiB * 3));
    }
    const int64_t logits = alloc(tokens * 1000);
    mark(AllocOp::kBackward);
    const int64_t dlogits = alloc(tokens * 1000);
    free(logits);
    for (int l = kLayers - 1; l >= 0; --l) {
      const int64_t tmp = alloc(tokens * 2048);
      grads.push_back(alloc(ParamBytes(l)));
      free(tmp);
      free(acts[static_cast<size_t>(l)]);
    }
    free(dlogits);
    free(x);
    mark(AllocOp::kOptimizer);
    if (step == 1) {
      for (int l = 0; l < kLayers; ++l) {
        alloc(ParamBytes(l));
        alloc(ParamBytes(l));
      }
    }
    free(alloc(kMiB));
  }
  return ops;
}

}  // namespace pilot::toy
