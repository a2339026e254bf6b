#include "core/models/memory_replay.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <utility>

#include "core/base/strings.h"

namespace pilot {
namespace {

// Op index ranges: [0] what comes before the first step mark (the setup),
// then one per step, each starting with its kStep.
std::vector<std::pair<size_t, size_t>> Split(const std::vector<AllocOp>& ops) {
  std::vector<std::pair<size_t, size_t>> segs{{0, 0}};
  for (size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].kind == AllocOp::kStep) {
      segs.back().second = i;
      segs.push_back({i, i});
    }
  }
  segs.back().second = ops.size();
  return segs;
}

// The allocation id each kAlloc makes, and whether anything frees it.
struct Ids {
  std::vector<bool> freed;     // by id
  std::vector<int64_t> id_at;  // by op index: the id a kAlloc makes, else -1
};

Ids IdsOf(const std::vector<AllocOp>& ops) {
  Ids ids;
  ids.id_at.assign(ops.size(), -1);
  for (size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].kind == AllocOp::kAlloc) {
      ids.id_at[i] = static_cast<int64_t>(ids.freed.size());
      ids.freed.push_back(false);
    } else if (ops[i].kind == AllocOp::kFree) {
      ids.freed[static_cast<size_t>(ops[i].value)] = true;
    }
  }
  return ids;
}

bool IsMark(AllocOp::Kind k) { return k != AllocOp::kAlloc && k != AllocOp::kFree; }

// One steady step, repeatable: its requests by size, its frees of its own
// requests and of the previous step's that it frees (named by the index of
// the matching request of this step: a steady step frees what the one
// before made where it makes it again), and its marks.
struct TOp {
  enum Kind : uint8_t { kAlloc, kFreeOwn, kFreePrev, kMark };
  Kind kind = kAlloc;
  int64_t value = 0;  // bytes; index of a request of the step; AllocOp::Kind
};
using Template = std::vector<TOp>;

Template TemplateOf(const std::vector<AllocOp>& ops, const std::vector<std::pair<size_t, size_t>>& segs,
                    const Ids& ids, size_t t) {
  const auto [begin, end] = segs[t];
  // This step's requests, in order, and which of them it does not free.
  std::map<int64_t, int> local;  // id -> index among the step's requests
  std::map<int64_t, std::vector<int>> kept_by_size;
  for (size_t i = begin; i < end; ++i) {
    if (ops[i].kind != AllocOp::kAlloc) continue;
    const int index = static_cast<int>(local.size());
    local[ids.id_at[i]] = index;
  }
  std::set<int64_t> freed_here;
  for (size_t i = begin; i < end; ++i) {
    if (ops[i].kind == AllocOp::kFree && local.count(ops[i].value)) freed_here.insert(ops[i].value);
  }
  for (size_t i = begin; i < end; ++i) {
    if (ops[i].kind == AllocOp::kAlloc && !freed_here.count(ids.id_at[i])) {
      kept_by_size[ops[i].value].push_back(local[ids.id_at[i]]);
    }
  }
  // The previous step's requests this one frees, by size in their order:
  // the k-th of a size is this step's k-th kept request of that size.
  std::map<int64_t, int> prev_rank;  // id -> index of the matching request here
  if (t > 1) {
    std::set<int64_t> freed_in_t;
    for (size_t j = begin; j < end; ++j) {
      if (ops[j].kind == AllocOp::kFree) freed_in_t.insert(ops[j].value);
    }
    std::map<int64_t, size_t> seen;
    const auto [pb, pe] = segs[t - 1];
    for (size_t i = pb; i < pe; ++i) {
      if (ops[i].kind != AllocOp::kAlloc) continue;
      const int64_t id = ids.id_at[i];
      if (!freed_in_t.count(id)) continue;
      const size_t k = seen[ops[i].value]++;
      const auto it = kept_by_size.find(ops[i].value);
      if (it != kept_by_size.end() && k < it->second.size()) prev_rank[id] = it->second[k];
    }
  }
  Template out;
  for (size_t i = begin; i < end; ++i) {
    const AllocOp& op = ops[i];
    if (op.kind == AllocOp::kAlloc) {
      out.push_back({TOp::kAlloc, op.value});
    } else if (op.kind == AllocOp::kFree) {
      if (auto it = local.find(op.value); it != local.end()) {
        out.push_back({TOp::kFreeOwn, it->second});
      } else if (auto p = prev_rank.find(op.value); p != prev_rank.end()) {
        out.push_back({TOp::kFreePrev, p->second});
      }
    } else {
      out.push_back({TOp::kMark, static_cast<int64_t>(op.kind)});
    }
  }
  return out;
}

// The requests of `b`'s step at `n` tokens per micro-batch, each on the
// line through its size in `a` (na tokens) and in `b` (nb tokens).
std::optional<Template> Scale(const Template& a, int64_t na, const Template& b, int64_t nb, int64_t n,
                              std::string* why) {
  auto kinds = [](const Template& t) {
    std::string k;
    for (const TOp& op : t) k += op.kind == TOp::kAlloc ? 'a' : op.kind == TOp::kMark ? 'm' : 'f';
    return k;
  };
  if (kinds(a) != kinds(b)) {
    *why = "the recorded steps at two micro-batches make different requests (" + std::to_string(a.size()) +
           " and " + std::to_string(b.size()) + " events)";
    return std::nullopt;
  }
  Template out = b;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i].kind == TOp::kMark && a[i].value != b[i].value) {
      *why = "the recorded steps at two micro-batches mark their phases differently";
      return std::nullopt;
    }
    if (out[i].kind != TOp::kAlloc) continue;
    const double slope = static_cast<double>(b[i].value - a[i].value) / static_cast<double>(nb - na);
    const double v = static_cast<double>(b[i].value) + slope * static_cast<double>(n - nb);
    out[i].value = std::max<int64_t>(1, std::llround(v));
  }
  return out;
}

// What the reference's first step made for good (no later step frees it):
// each at so many events after the latest mark of its kind (the
// `occurrence`-th of that kind in the step) among the step's other events.
struct Insertion {
  int64_t bytes = 0;
  AllocOp::Kind mark = AllocOp::kStep;
  int occurrence = 0;
  int offset = 0;
};

std::vector<Insertion> FirstStepInsertions(const std::vector<AllocOp>& ops,
                                           const std::vector<std::pair<size_t, size_t>>& segs,
                                           const Ids& ids) {
  std::vector<Insertion> out;
  if (segs.size() < 2) return out;
  std::map<int, int> seen;  // mark kind -> occurrences so far
  AllocOp::Kind mark = AllocOp::kStep;
  int offset = 0;
  for (size_t i = segs[1].first; i < segs[1].second; ++i) {
    const AllocOp& op = ops[i];
    if (op.kind == AllocOp::kAlloc && !ids.freed[static_cast<size_t>(ids.id_at[i])]) {
      out.push_back({op.value, mark, seen[mark] - 1, offset});
      continue;
    }
    if (IsMark(op.kind)) {
      mark = op.kind;
      ++seen[mark];
      offset = 0;
      continue;
    }
    ++offset;
  }
  return out;
}

// The body index before which a first-step request goes: `offset` events
// after the occurrence-th mark of its kind (else the last such mark, else
// the step's start), moved by `jitter` when it follows a forward or
// backward mark, and kept before the next mark.
size_t PlaceOf(const std::vector<const TOp*>& body, const Insertion& in, int jitter) {
  size_t mark_at = 0;
  int seen = -1;
  for (size_t i = 0; i < body.size(); ++i) {
    if (body[i]->kind == TOp::kMark && body[i]->value == in.mark) {
      mark_at = i;
      if (++seen == in.occurrence) break;
    }
  }
  size_t next_mark = body.size();
  for (size_t i = mark_at + 1; i < body.size(); ++i) {
    if (body[i]->kind == TOp::kMark) {
      next_mark = i;
      break;
    }
  }
  const int shift = in.mark == AllocOp::kForward || in.mark == AllocOp::kBackward ? jitter : 0;
  const int64_t want = static_cast<int64_t>(mark_at) + 1 + in.offset + shift;
  return static_cast<size_t>(
      std::clamp<int64_t>(want, static_cast<int64_t>(mark_at) + 1, static_cast<int64_t>(next_mark)));
}

// The steady steps from which a release counts against full speed: after
// the first few, in which the layout settles.
constexpr int kLateStep = 5;

// One process at the query's shape: the setup, optionally the optimizer's
// state right after it (a restored process loads it), a first step with
// the first step's other requests `jitter` events from their place, then
// steady steps. `late_from`: where step kLateStep begins.
std::vector<AllocOp> Process(const std::vector<AllocOp>& setup, const Template& step,
                             const std::vector<Insertion>& insertions, int steps, int jitter, bool restored,
                             size_t* late_from) {
  std::vector<AllocOp> out = setup;
  int64_t made = 0;
  for (const AllocOp& op : setup) made += op.kind == AllocOp::kAlloc ? 1 : 0;
  auto alloc = [&](int64_t bytes) {
    out.push_back({AllocOp::kAlloc, bytes});
    return made++;
  };
  std::vector<Insertion> at_marks;
  for (const Insertion& in : insertions) {
    if (restored && in.mark == AllocOp::kOptimizer) {
      alloc(in.bytes);
    } else {
      at_marks.push_back(in);
    }
  }
  std::vector<int64_t> prev_ids;
  std::vector<bool> prev_freed;
  *late_from = out.size();
  for (int k = 1; k <= steps; ++k) {
    if (k == std::min(steps, kLateStep)) *late_from = out.size();
    // The step's events; the first step frees nothing of a step before it
    // and makes the first step's other requests too.
    std::vector<const TOp*> body;
    for (const TOp& op : step) {
      if (k == 1 && op.kind == TOp::kFreePrev) continue;
      body.push_back(&op);
    }
    // Where each of the first step's requests goes: after the body event
    // at that index.
    std::vector<std::pair<size_t, int64_t>> place;
    if (k == 1) {
      for (const Insertion& in : at_marks) place.push_back({PlaceOf(body, in, jitter), in.bytes});
      std::stable_sort(place.begin(), place.end(),
                       [](const auto& x, const auto& y) { return x.first < y.first; });
    }
    std::vector<int64_t> ids;
    std::vector<bool> freed;
    size_t next_place = 0;
    for (size_t i = 0; i <= body.size(); ++i) {
      while (next_place < place.size() && place[next_place].first <= i) alloc(place[next_place++].second);
      if (i == body.size()) break;
      const TOp& op = *body[i];
      switch (op.kind) {
        case TOp::kAlloc:
          ids.push_back(alloc(op.value));
          freed.push_back(false);
          break;
        case TOp::kFreeOwn:
          if (static_cast<size_t>(op.value) < ids.size() && !freed[static_cast<size_t>(op.value)]) {
            out.push_back({AllocOp::kFree, ids[static_cast<size_t>(op.value)]});
            freed[static_cast<size_t>(op.value)] = true;
          }
          break;
        case TOp::kFreePrev:
          if (static_cast<size_t>(op.value) < prev_ids.size() && !prev_freed[static_cast<size_t>(op.value)]) {
            out.push_back({AllocOp::kFree, prev_ids[static_cast<size_t>(op.value)]});
            prev_freed[static_cast<size_t>(op.value)] = true;
          }
          break;
        case TOp::kMark:
          out.push_back({static_cast<AllocOp::Kind>(op.value), 0});
          break;
      }
    }
    // What the step before kept and this one did not free goes now (a
    // recorded step frees a few small results after it ends).
    for (size_t j = 0; j < prev_ids.size(); ++j) {
      if (!prev_freed[j]) out.push_back({AllocOp::kFree, prev_ids[j]});
    }
    prev_ids = std::move(ids);
    prev_freed = std::move(freed);
  }
  return out;
}

const AllocRecording* Find(const SingleStage& s, const std::string& process) {
  for (const AllocRecording& r : s.allocator_requests) {
    if (r.process == process) return &r;
  }
  return nullptr;
}

void Widen(AllocatorNeed* most, AllocatorNeed* least, const AllocatorNeed& n, bool first) {
  auto hi = [&](int64_t AllocatorNeed::*f) { most->*f = first ? n.*f : std::max(most->*f, n.*f); };
  auto lo = [&](int64_t AllocatorNeed::*f) { least->*f = first ? n.*f : std::min(least->*f, n.*f); };
  for (auto f : {&AllocatorNeed::to_run, &AllocatorNeed::at_full_speed, &AllocatorNeed::unlimited,
                 &AllocatorNeed::allocated}) {
    hi(f);
    lo(f);
  }
}

}  // namespace

std::vector<AllocOp> TrimRecording(const std::vector<AllocOp>& ops, bool keep_setup, bool keep_first, int last) {
  const auto segs = Split(ops);
  const Ids ids = IdsOf(ops);
  std::vector<bool> keep(segs.size(), false);
  keep[0] = keep_setup;
  if (segs.size() > 1) keep[1] = keep_first;
  for (size_t s = segs.size(); s > 1 && last > 0; --s, --last) keep[s - 1] = true;
  std::vector<AllocOp> out;
  std::vector<int64_t> renamed(ids.freed.size(), -1);
  int64_t made = 0;
  for (size_t s = 0; s < segs.size(); ++s) {
    if (!keep[s]) continue;
    for (size_t i = segs[s].first; i < segs[s].second; ++i) {
      const AllocOp& op = ops[i];
      if (op.kind == AllocOp::kAlloc) {
        renamed[static_cast<size_t>(ids.id_at[i])] = made++;
        out.push_back(op);
      } else if (op.kind == AllocOp::kFree) {
        const int64_t to = renamed[static_cast<size_t>(op.value)];
        if (to >= 0) out.push_back({AllocOp::kFree, to});
      } else {
        out.push_back(op);
      }
    }
  }
  return out;
}

std::optional<ReplayPrediction> PredictByReplay(const SingleStage& s, const std::string& alloc_conf,
                                                const ReplayQuery& q, std::string* why_not) {
  std::string why;
  auto fail = [&](std::string w) -> std::optional<ReplayPrediction> {
    if (why_not) *why_not = std::move(w);
    return std::nullopt;
  };
  if (s.device != "cuda") return fail("the pilot ran on a CPU, which has no caching allocator");
  if (s.allocator_requests.empty()) {
    return fail("the pilot recorded no allocator requests (a runner or torch before this record)");
  }
  if (alloc_conf != kReplayedAllocConf) {
    return fail("the pilot's allocator settings (\"" + alloc_conf + "\") are not the replayed \"" +
                kReplayedAllocConf + "\"");
  }
  const AllocRecording* ref = Find(s, "reference");
  if (ref == nullptr) return fail("no recording of the reference process");
  // The two largest micro-batches recorded at the query's setting.
  std::vector<const AllocRecording*> same;
  for (const AllocRecording& r : s.allocator_requests) {
    if (r.activation_checkpointing == q.activation_checkpointing && r.seq_len == s.shape.seq_len &&
        r.micro_batch > 0) {
      same.push_back(&r);
    }
  }
  std::stable_sort(same.begin(), same.end(),
                   [](const auto* x, const auto* y) { return x->micro_batch > y->micro_batch; });
  const AllocRecording* big = same.empty() ? nullptr : same.front();
  const AllocRecording* small = nullptr;
  for (const AllocRecording* r : same) {
    if (r->micro_batch < big->micro_batch) {
      small = r;
      break;
    }
  }
  const std::string setting = q.activation_checkpointing ? "on" : "off";
  if (big == nullptr || small == nullptr) {
    return fail("no two micro-batches recorded with activation checkpointing " + setting);
  }
  auto decode = [&](const AllocRecording& r) -> Result<std::vector<AllocOp>> {
    Result<std::vector<AllocOp>> ops = DecodeAllocOps(r.requests, kMaxRecordedOps);
    if (!ops.ok()) return ops.status().Context("allocator_requests[" + r.process + "]");
    return ops;
  };
  Result<std::vector<AllocOp>> ref_ops = decode(*ref);
  Result<std::vector<AllocOp>> big_ops = decode(*big);
  Result<std::vector<AllocOp>> small_ops = decode(*small);
  for (const auto* r : {&ref_ops, &big_ops, &small_ops}) {
    if (!r->ok()) return fail(r->status().Message());
  }
  const auto ref_segs = Split(*ref_ops);
  const auto big_segs = Split(*big_ops);
  const auto small_segs = Split(*small_ops);
  if (ref_segs.size() < 3 || big_segs.size() < 3 || small_segs.size() < 3) {
    return fail("a recording holds fewer than two steps");
  }
  const Ids ref_ids = IdsOf(*ref_ops);
  const Template a = TemplateOf(*small_ops, small_segs, IdsOf(*small_ops), small_segs.size() - 1);
  const Template b = TemplateOf(*big_ops, big_segs, IdsOf(*big_ops), big_segs.size() - 1);
  const int64_t na = int64_t{small->micro_batch} * small->seq_len;
  const int64_t nb = int64_t{big->micro_batch} * big->seq_len;
  const int64_t nq = int64_t{q.micro_batch} * q.seq_len;
  std::optional<Template> step = Scale(a, na, b, nb, nq, &why);
  if (!step) return fail(why);
  const std::vector<AllocOp> setup(ref_ops->begin(),
                                   ref_ops->begin() + static_cast<std::ptrdiff_t>(ref_segs[0].second));
  const std::vector<Insertion> insertions = FirstStepInsertions(*ref_ops, ref_segs, ref_ids);

  constexpr int kSteps = 8;
  if (const size_t events = setup.size() + insertions.size() + kSteps * step->size(); events > kMaxReplayedOps) {
    return fail("a process of this shape would make " + std::to_string(events) +
                " allocator events; the replay replays at most " + std::to_string(kMaxReplayedOps));
  }
  ReplayPrediction p;
  p.recorded_grad_accum = big->grad_accum;
  const int first_jitters[] = {0, -2, 2, -4, 4, -8, 8};
  const int restored_jitters[] = {0, -2, 2};
  for (bool restored : {false, true}) {
    for (int jitter : restored ? std::vector<int>(std::begin(restored_jitters), std::end(restored_jitters))
                               : std::vector<int>(std::begin(first_jitters), std::end(first_jitters))) {
      size_t late_from = 0;
      const std::vector<AllocOp> ops = Process(setup, *step, insertions, kSteps, jitter, restored, &late_from);
      Widen(&p.most, &p.least, NeedOf(ops, late_from), p.histories == 0);
      ++p.histories;
    }
  }
  auto mb = [](const AllocRecording& r) { return std::to_string(r.micro_batch); };
  p.basis = "replayed " + std::to_string(p.histories) + " processes through the allocator's model: the " +
            big->process + " and " + small->process + " steps (micro-batches " + mb(*big) + " and " +
            mb(*small) + ", activation checkpointing " + setting + ") moved to " +
            std::to_string(q.micro_batch) + " x " + std::to_string(q.seq_len) + " tokens";
  return p;
}

}  // namespace pilot
