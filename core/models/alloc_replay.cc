#include "core/models/alloc_replay.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <set>
#include <tuple>
#include <utility>

namespace pilot {
namespace {

constexpr int64_t kMinLargeAlloc = int64_t{10} << 20;
constexpr int64_t kRoundLarge = int64_t{2} << 20;
constexpr int64_t kMaxRequest = int64_t{1} << 48;
// Each pool's range of addresses: far more than any device maps.
constexpr int64_t kAddressSpace = int64_t{1} << 52;

int64_t RoundRequest(int64_t n) {
  return n < kAllocRound ? kAllocRound : (n + kAllocRound - 1) / kAllocRound * kAllocRound;
}

// What the allocator checks against its limit before it maps more for a
// request of `size` (rounded) bytes.
int64_t AllocationSize(int64_t size) {
  if (size <= kSmallRequest) return kSmallGranule;
  if (size < kMinLargeAlloc) return kLargeGranule;
  return (size + kRoundLarge - 1) / kRoundLarge * kRoundLarge;
}

struct Block {
  int64_t ptr = 0;
  int64_t size = 0;
  bool allocated = false;
  bool mapped = false;
  int prev = -1;
  int next = -1;
};

// One pool's expandable segment: blocks in address order (prev/next), the
// free mapped ones by (size, address), the unmapped ones by address.
struct Pool {
  int64_t granule = 0;
  std::set<std::tuple<int64_t, int64_t, int>> free;  // size, ptr, block
  std::set<std::pair<int64_t, int>> unmapped;        // ptr, block
};

class Model {
 public:
  explicit Model(int64_t limit) : limit_(limit) {
    pools_[0].granule = kLargeGranule;
    pools_[1].granule = kSmallGranule;
    for (Pool& p : pools_) {
      const int64_t base = PoolBase(p);
      const int b = NewBlock(base, kAddressSpace, false);
      p.unmapped.insert({base, b});
    }
  }

  // The block handed out, or -1 when the request fails under the limit.
  int Malloc(int64_t bytes, bool* released) {
    const int64_t size = RoundRequest(bytes);
    Pool& p = pools_[size <= kSmallRequest ? 1 : 0];
    int b = TakeFree(p, size);
    if (b < 0) {
      const int64_t check = AllocationSize(size);
      if (limit_ > 0 && mapped_ + check > limit_) {
        ReleaseCached();
        *released = true;
        if (mapped_ + check > limit_) return -1;
      }
      b = MapRange(p, size);
      if (b < 0) return -1;  // past the pool's range of addresses
    }
    if (blocks_[b].size - size >= kAllocRound) {
      const int rest = NewBlock(blocks_[b].ptr + size, blocks_[b].size - size, true);
      Link(b, rest);
      blocks_[b].size = size;
      InsertFree(p, rest);
    }
    blocks_[b].allocated = true;
    allocated_ += blocks_[b].size;
    peak_allocated_ = std::max(peak_allocated_, allocated_);
    return b;
  }

  void Free(int b) {
    Pool& p = PoolOf(b);
    blocks_[b].allocated = false;
    allocated_ -= blocks_[b].size;
    Merge(b, blocks_[b].prev);
    Merge(b, blocks_[b].next);
    InsertFree(p, b);
  }

  int64_t peak_mapped() const { return peak_mapped_; }
  int64_t peak_allocated() const { return peak_allocated_; }

 private:
  int NewBlock(int64_t ptr, int64_t size, bool mapped) {
    Block nb;
    nb.ptr = ptr;
    nb.size = size;
    nb.mapped = mapped;
    if (!spare_.empty()) {
      const int b = spare_.back();
      spare_.pop_back();
      blocks_[b] = nb;
      return b;
    }
    blocks_.push_back(nb);
    return static_cast<int>(blocks_.size()) - 1;
  }

  // Puts `b` right after `a` in address order.
  void Link(int a, int b) {
    blocks_[b].prev = a;
    blocks_[b].next = blocks_[a].next;
    if (blocks_[a].next >= 0) blocks_[blocks_[a].next].prev = b;
    blocks_[a].next = b;
  }

  // The small pool's addresses lie above the large pool's range.
  Pool& PoolOf(int b) { return pools_[blocks_[b].ptr >= kAddressSpace ? 1 : 0]; }

  void InsertFree(Pool& p, int b) { p.free.insert({blocks_[b].size, blocks_[b].ptr, b}); }
  void EraseFree(Pool& p, int b) { p.free.erase({blocks_[b].size, blocks_[b].ptr, b}); }

  int64_t GrowableSize(int b) const {
    const int n = blocks_[b].next;
    return blocks_[b].size + (n >= 0 && !blocks_[n].mapped ? blocks_[n].size : 0);
  }

  // Best fit among free mapped blocks; of a run of larger candidates, one
  // that can grow less is taken first (the room after it stays whole).
  int TakeFree(Pool& p, int64_t size) {
    auto it = p.free.lower_bound({size, std::numeric_limits<int64_t>::min(), -1});
    if (it == p.free.end()) return -1;
    auto next = std::next(it);
    while (next != p.free.end() && GrowableSize(std::get<2>(*next)) < GrowableSize(std::get<2>(*it))) {
      it = next++;
    }
    const int b = std::get<2>(*it);
    p.free.erase(it);
    return b;
  }

  // Absorbs `src` into `dst` when both are free and equally mapped; `dst`
  // is in no set while this runs.
  void Merge(int dst, int src) {
    if (src < 0) return;
    Block& s = blocks_[src];
    Block& d = blocks_[dst];
    if (s.allocated || s.mapped != d.mapped) return;
    Pool& p = PoolOf(src);
    if (s.mapped) {
      EraseFree(p, src);
    } else {
      p.unmapped.erase({s.ptr, src});
    }
    if (d.prev == src) {
      d.ptr = s.ptr;
      d.prev = s.prev;
      if (d.prev >= 0) blocks_[d.prev].next = dst;
    } else {
      d.next = s.next;
      if (d.next >= 0) blocks_[d.next].prev = dst;
    }
    d.size += s.size;
    spare_.push_back(src);
  }

  // Maps the granules under the first `size` bytes of unmapped block `b`;
  // returns the free mapped block they end in (merged with its neighbours).
  int Map(Pool& p, int b, int64_t size) {
    const int64_t ptr = blocks_[b].ptr;
    const int64_t g = p.granule;
    const int64_t base = PoolBase(p);
    const int64_t begin = (ptr - base) / g;
    const int64_t end = (ptr + size - base + g - 1) / g;
    const int64_t n = (end - begin) * g;
    p.unmapped.erase({ptr, b});
    blocks_[b].mapped = true;
    if (n < blocks_[b].size) {
      const int rest = NewBlock(blocks_[b].ptr + n, blocks_[b].size - n, false);
      Link(b, rest);
      blocks_[b].size = n;
      p.unmapped.insert({blocks_[rest].ptr, rest});
    }
    Merge(b, blocks_[b].prev);
    Merge(b, blocks_[b].next);
    InsertFree(p, b);
    mapped_ += n;
    peak_mapped_ = std::max(peak_mapped_, mapped_);
    return b;
  }

  int64_t PoolBase(const Pool& p) const { return &p == &pools_[1] ? kAddressSpace : 0; }

  // The lowest free range of addresses (free mapped and unmapped blocks in
  // a row) that holds `size`, mapped; the block is taken out of the pool.
  // -1 when none does (requests beyond any device's memory).
  int MapRange(Pool& p, int64_t size) {
    int c = -1;
    for (const auto& [ptr, u] : p.unmapped) {
      int start = u;
      const int before = blocks_[u].prev;
      if (before >= 0 && !blocks_[before].allocated) start = before;
      int64_t room = 0;
      for (int x = start; x >= 0 && room < size && !blocks_[x].allocated; x = blocks_[x].next) {
        room += blocks_[x].size;
      }
      if (room >= size) {
        c = start;
        break;
      }
    }
    if (c < 0) return -1;
    if (!blocks_[c].mapped) c = Map(p, c, std::min(blocks_[c].size, size));
    while (blocks_[c].size < size) {
      const int n = blocks_[c].next;
      c = Map(p, n, std::min(size - blocks_[c].size, blocks_[n].size));
    }
    EraseFree(p, c);
    return c;
  }

  // Unmaps the whole granules inside free block `b`; what is left at
  // either end stays a free mapped block.
  void Unmap(Pool& p, int b) {
    const int64_t g = p.granule;
    const int64_t base = PoolBase(p);
    const int64_t ptr = blocks_[b].ptr;
    const int64_t size = blocks_[b].size;
    const int64_t begin = (ptr - base + g - 1) / g;
    const int64_t end = (ptr + size - base) / g;
    if (begin >= end) return;
    EraseFree(p, b);
    const int64_t lo = base + begin * g;
    const int64_t hi = base + end * g;
    if (lo > ptr) {
      const int head = NewBlock(ptr, lo - ptr, true);
      const int before = blocks_[b].prev;
      blocks_[head].prev = before;
      blocks_[head].next = b;
      if (before >= 0) blocks_[before].next = head;
      blocks_[b].prev = head;
      InsertFree(p, head);
    }
    if (ptr + size > hi) {
      const int tail = NewBlock(hi, ptr + size - hi, true);
      Link(b, tail);
      InsertFree(p, tail);
    }
    blocks_[b].ptr = lo;
    blocks_[b].size = hi - lo;
    blocks_[b].mapped = false;
    Merge(b, blocks_[b].prev);
    Merge(b, blocks_[b].next);
    p.unmapped.insert({blocks_[b].ptr, b});
    mapped_ -= hi - lo;
  }

  void ReleaseCached() {
    for (Pool& p : pools_) {
      std::vector<int> free_blocks;
      free_blocks.reserve(p.free.size());
      for (const auto& f : p.free) free_blocks.push_back(std::get<2>(f));
      for (int b : free_blocks) Unmap(p, b);
    }
  }

  int64_t limit_ = 0;
  int64_t mapped_ = 0;
  int64_t peak_mapped_ = 0;
  int64_t allocated_ = 0;
  int64_t peak_allocated_ = 0;
  Pool pools_[2];  // large, small
  std::vector<Block> blocks_;
  std::vector<int> spare_;
};

}  // namespace

std::string EncodeAllocOps(const std::vector<AllocOp>& ops) {
  std::string out;
  out.reserve(ops.size() * 8);
  int64_t made = 0;
  for (const AllocOp& op : ops) {
    if (!out.empty()) out += ' ';
    switch (op.kind) {
      case AllocOp::kAlloc:
        out += 'a' + std::to_string(op.value);
        ++made;
        break;
      case AllocOp::kFree:
        out += 'f' + std::to_string(made - op.value);
        break;
      case AllocOp::kStep: out += 's'; break;
      case AllocOp::kForward: out += 'F'; break;
      case AllocOp::kBackward: out += 'B'; break;
      case AllocOp::kOptimizer: out += 'O'; break;
    }
  }
  return out;
}

Result<std::vector<AllocOp>> DecodeAllocOps(std::string_view text, size_t max_ops) {
  std::vector<AllocOp> ops;
  std::vector<bool> freed;
  size_t at = 0;
  while (at < text.size()) {
    const size_t end = std::min(text.find(' ', at), text.size());
    const std::string_view tok = text.substr(at, end - at);
    const size_t index = ops.size();
    auto bad = [&](const std::string& why) {
      return Status::Corrupt("allocator requests",
                             "token " + std::to_string(index + 1) + " \"" +
                                 std::string(tok.substr(0, 24)) + "\": " + why);
    };
    if (ops.size() >= max_ops) return bad("more than " + std::to_string(max_ops) + " tokens");
    if (tok.empty()) return bad("empty (two spaces, or one at an end)");
    AllocOp op;
    if (tok.size() == 1 && (tok[0] == 's' || tok[0] == 'F' || tok[0] == 'B' || tok[0] == 'O')) {
      op.kind = tok[0] == 's'   ? AllocOp::kStep
                : tok[0] == 'F' ? AllocOp::kForward
                : tok[0] == 'B' ? AllocOp::kBackward
                                : AllocOp::kOptimizer;
    } else if (tok[0] == 'a' || tok[0] == 'f') {
      int64_t v = 0;
      const char* first = tok.data() + 1;
      const char* last = tok.data() + tok.size();
      const auto [ptr, ec] = std::from_chars(first, last, v);
      if (ec != std::errc() || ptr != last || first == last || *first == '-' || *first == '+') {
        return bad("not a whole number after '" + std::string(1, tok[0]) + "'");
      }
      if (tok[0] == 'a') {
        if (v < 1 || v > kMaxRequest) return bad("bytes outside 1..2^48");
        op.kind = AllocOp::kAlloc;
        op.value = v;
        freed.push_back(false);
      } else {
        const int64_t made = static_cast<int64_t>(freed.size());
        if (v < 1 || v > made) return bad("frees a request that was not made");
        const int64_t id = made - v;
        if (freed[static_cast<size_t>(id)]) return bad("frees a request twice");
        freed[static_cast<size_t>(id)] = true;
        op.kind = AllocOp::kFree;
        op.value = id;
      }
    } else {
      return bad("not a request, a free or a mark");
    }
    ops.push_back(op);
    at = end + 1;
    if (end == text.size() - 1) return Status::Corrupt("allocator requests", "ends with a space");
  }
  return ops;
}

ReplayOutcome ReplayAllocator(const std::vector<AllocOp>& ops, int64_t limit, size_t late_from,
                              bool stop_early) {
  Model m(limit);
  ReplayOutcome out;
  std::vector<int> live;  // block of each allocation id, -1 once freed
  for (size_t i = 0; i < ops.size(); ++i) {
    const AllocOp& op = ops[i];
    if (op.kind == AllocOp::kAlloc) {
      bool released = false;
      const int b = m.Malloc(op.value, &released);
      live.push_back(b);
      if (released) {
        ++out.releases;
        if (i >= late_from) ++out.releases_late;
      }
      if (b < 0) out.out_of_memory = true;
      if (stop_early && (b < 0 || (released && i >= late_from))) break;
    } else if (op.kind == AllocOp::kFree) {
      const size_t id = static_cast<size_t>(op.value);
      if (id < live.size() && live[id] >= 0) {
        m.Free(live[id]);
        live[id] = -1;
      }
    }
  }
  out.peak_mapped = m.peak_mapped();
  out.peak_allocated = m.peak_allocated();
  return out;
}

AllocatorNeed NeedOf(const std::vector<AllocOp>& ops, size_t late_from) {
  AllocatorNeed need;
  const ReplayOutcome free_run = ReplayAllocator(ops, 0);
  need.unlimited = free_run.peak_mapped;
  need.allocated = free_run.peak_allocated;
  // The least limit above `*lo` (where `ok` fails) for which `ok` holds,
  // to 2 MiB; `*lo` ends at the largest limit found to fail. The upper
  // end grows until it holds (a limit checks rounded requests, so the
  // unlimited peak itself can fall short).
  auto least = [&](int64_t* lo, auto ok) {
    int64_t hi = std::max(*lo + kSmallGranule, need.unlimited);
    for (int grow = 0; !ok(hi) && grow < 64; ++grow) hi += kLargeGranule;
    while (hi - *lo > kSmallGranule) {
      const int64_t mid = *lo + (hi - *lo) / 2;
      if (ok(mid)) {
        hi = mid;
      } else {
        *lo = mid;
      }
    }
    return hi;
  };
  int64_t fails = need.allocated - 1;
  need.to_run = least(&fails, [&](int64_t limit) {
    return !ReplayAllocator(ops, limit, ops.size(), true).out_of_memory;
  });
  // A limit under which a request fails does not hold at full speed either.
  need.at_full_speed = least(&fails, [&](int64_t limit) {
    const ReplayOutcome r = ReplayAllocator(ops, limit, late_from, true);
    return !r.out_of_memory && r.releases_late == 0;
  });
  return need;
}

}  // namespace pilot
