// The allocator requests' text form (core/models/alloc_replay.h DecodeAllocOps),
// read back from its own writing, and replayed through the allocator's
// model without a limit and under one.
#include "core/models/alloc_replay.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto ops = pilot::DecodeAllocOps(pilot::fuzz::Text(data, size), 4096);
  if (!ops.ok()) return 0;
  const std::string once = pilot::EncodeAllocOps(*ops);
  auto again = pilot::DecodeAllocOps(once, 4096);
  pilot::fuzz::Require(again.ok() && *again == *ops, "its own writing does not read back the same", once);
  const pilot::ReplayOutcome free_run = pilot::ReplayAllocator(*ops, 0);
  pilot::fuzz::Require(free_run.peak_mapped >= free_run.peak_allocated || free_run.out_of_memory,
                       "mapped less than it handed out", once);
  (void)pilot::ReplayAllocator(*ops, int64_t{64} << 20, ops->size() / 2, false);
  return 0;
}
