// The allocator's model: each case a few requests whose outcome follows from
// torch's rules (core/models/alloc_replay.h), worked out by hand in the comments.
#include "core/models/alloc_replay.h"

#include <gtest/gtest.h>

#include <vector>

namespace pilot {
namespace {

constexpr int64_t kMiBAllocReplay = int64_t{1} << 20;

// A small builder: requests get ids in order.
struct Stream {
  std::vector<AllocOp> ops;
  int64_t made = 0;
  int64_t Alloc(int64_t bytes) {
    ops.push_back({AllocOp::kAlloc, bytes});
    return made++;
  }
  void Free(int64_t id) { ops.push_back({AllocOp::kFree, id}); }
  void Mark(AllocOp::Kind k) { ops.push_back({k, 0}); }
};

TEST(AllocReplay, RequestsAreRoundedAndMappedByGranule) {
  Stream s;
  s.Alloc(1);            // small pool: 512 bytes, one 2 MiB granule
  s.Alloc(30 * kMiBAllocReplay);    // large pool: two 20 MiB granules, 10 MiB left free
  s.Alloc(5 * kMiBAllocReplay);     // fits the 10 MiB left: nothing more mapped
  const ReplayOutcome r = ReplayAllocator(s.ops, 0);
  EXPECT_FALSE(r.out_of_memory);
  EXPECT_EQ(r.peak_mapped, 2 * kMiBAllocReplay + 40 * kMiBAllocReplay);
  EXPECT_EQ(r.peak_allocated, 512 + 35 * kMiBAllocReplay);
  EXPECT_EQ(r.releases, 0);
}

TEST(AllocReplay, AFreedBlockIsReusedBestFitFirst) {
  Stream s;
  const int64_t a = s.Alloc(60 * kMiBAllocReplay);  // 0..60, three granules
  s.Alloc(60 * kMiBAllocReplay);                    // 60..120
  s.Free(a);
  s.Alloc(32 * kMiBAllocReplay);  // into a's hole: nothing mapped
  s.Alloc(28 * kMiBAllocReplay);  // the 28 MiB left of it: exactly
  EXPECT_EQ(ReplayAllocator(s.ops, 0).peak_mapped, 120 * kMiBAllocReplay);
}

TEST(AllocReplay, OfTwoFitsTheOneThatCannotGrowIsTaken) {
  // a 0..50, b 50..60 (the rest of a's three granules), c 60..85 in two
  // more granules (85..100 free, then unmapped). With a and c freed there
  // are two free blocks: 0..50 (50 MiB) and 60..100 (40 MiB, which could
  // grow into the unmapped space after it). A 30 MiB request fits both;
  // best fit alone would take 60..100, but a block that can grow counts as
  // larger, so 0..50 is taken. Then a 45 MiB request fits no mapped block
  // (20 MiB left at 30..50, 40 at 60..100): 60..100 grows by a granule.
  Stream s;
  const int64_t a = s.Alloc(50 * kMiBAllocReplay);
  s.Alloc(10 * kMiBAllocReplay);
  const int64_t c = s.Alloc(25 * kMiBAllocReplay);
  s.Free(a);
  s.Free(c);
  s.Alloc(30 * kMiBAllocReplay);
  s.Alloc(45 * kMiBAllocReplay);
  EXPECT_EQ(ReplayAllocator(s.ops, 0).peak_mapped, 120 * kMiBAllocReplay);
}

// a 100 MiB and b 20 MiB allocated, a freed, then a 120 MiB request: no free
// block holds it; unlimited it maps 120 MiB more after b (240 mapped).
Stream ReleaseCase() {
  Stream s;
  const int64_t a = s.Alloc(100 * kMiBAllocReplay);
  s.Alloc(20 * kMiBAllocReplay);
  s.Free(a);
  s.Alloc(120 * kMiBAllocReplay);
  return s;
}

TEST(AllocReplay, UnderALimitCachedPagesAreReleasedFirst) {
  const Stream s = ReleaseCase();
  EXPECT_EQ(ReplayAllocator(s.ops, 0).peak_mapped, 240 * kMiBAllocReplay);
  // Held to 200 MiB: 120 + 120 would pass it, so a's five free granules are
  // unmapped (20 MiB left mapped) and the request maps 120 more after b.
  const ReplayOutcome r = ReplayAllocator(s.ops, 200 * kMiBAllocReplay);
  EXPECT_FALSE(r.out_of_memory);
  EXPECT_EQ(r.releases, 1);
  EXPECT_EQ(r.peak_mapped, 140 * kMiBAllocReplay);
  // Held to 130 MiB: even after the release 20 + 120 passes it.
  EXPECT_TRUE(ReplayAllocator(s.ops, 130 * kMiBAllocReplay).out_of_memory);
}

TEST(AllocReplay, NeedsAreTheLeastLimitsThatHold) {
  const Stream s = ReleaseCase();
  const AllocatorNeed n = NeedOf(s.ops, 0);
  EXPECT_EQ(n.unlimited, 240 * kMiBAllocReplay);
  EXPECT_EQ(n.allocated, 140 * kMiBAllocReplay);
  // To run: 20 MiB still mapped after the release plus the 120 asked for
  // (found to 2 MiB).
  EXPECT_GE(n.to_run, 140 * kMiBAllocReplay);
  EXPECT_LT(n.to_run, 142 * kMiBAllocReplay);
  // At full speed nothing may be released: 120 mapped + 120 asked.
  EXPECT_GE(n.at_full_speed, 240 * kMiBAllocReplay);
  EXPECT_LT(n.at_full_speed, 242 * kMiBAllocReplay);
  // A release before `late_from` does not count against full speed.
  const AllocatorNeed late = NeedOf(s.ops, s.ops.size());
  EXPECT_GE(late.at_full_speed, 140 * kMiBAllocReplay);
  EXPECT_LT(late.at_full_speed, 142 * kMiBAllocReplay);
}

TEST(AllocReplay, TheTextFormRoundTrips) {
  Stream s;
  s.Mark(AllocOp::kStep);
  const int64_t a = s.Alloc(4096);
  s.Mark(AllocOp::kForward);
  const int64_t b = s.Alloc(1);
  s.Mark(AllocOp::kBackward);
  s.Free(a);
  s.Mark(AllocOp::kOptimizer);
  s.Free(b);
  const std::string text = EncodeAllocOps(s.ops);
  EXPECT_EQ(text, "s a4096 F a1 B f2 O f1");
  Result<std::vector<AllocOp>> back = DecodeAllocOps(text, 100);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, s.ops);
}

TEST(AllocReplay, TheReaderRefusesWhatNoAllocatorSaid) {
  const struct {
    const char* text;
    const char* says;
  } cases[] = {
      {"a0", "token 1 \"a0\": bytes outside 1..2^48"},
      {"a281474976710657", "bytes outside 1..2^48"},
      {"f1", "token 1 \"f1\": frees a request that was not made"},
      {"a8 f1 f1", "token 3 \"f1\": frees a request twice"},
      {"a8 f2", "frees a request that was not made"},
      {"a8 f0", "frees a request that was not made"},
      {"a-8", "not a whole number after 'a'"},
      {"a8x", "not a whole number after 'a'"},
      {"a", "not a whole number after 'a'"},
      {"x1", "token 1 \"x1\": not a request, a free or a mark"},
      {"S", "not a request, a free or a mark"},
      {"a8  a8", "token 2 \"\": empty"},
      {" a8", "token 1 \"\": empty"},
      {"a8 ", "ends with a space"},
  };
  for (const auto& c : cases) {
    Result<std::vector<AllocOp>> r = DecodeAllocOps(c.text, 100);
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_NE(r.status().ToString().find(c.says), std::string::npos) << c.text << ": " << r.status().ToString();
  }
  EXPECT_NE(DecodeAllocOps("s s s", 2).status().ToString().find("more than 2 tokens"), std::string::npos);
  EXPECT_TRUE(DecodeAllocOps("", 2).ok());
}

}  // namespace
}  // namespace pilot
