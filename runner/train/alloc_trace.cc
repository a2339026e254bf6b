// The allocator's trace tracker: with device.cc, the only file that speaks
// CUDA directly.
#include "runner/train/alloc_trace.h"

#include "core/models/memory_replay.h"

#include <torch/version.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>

#if defined(PILOT_RUNNER_CUDA) && (TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 2))
#define PILOT_RUNNER_ALLOC_TRACKER 1
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace pilot::runner {
namespace {

// One event as the tracker saw it: 'a' a request, 'f' a free done, or a
// mark (AllocOp's kinds after kFree, stored as 'm' with the kind in bytes).
struct Event {
  char kind;
  uint64_t addr;
  int64_t bytes;
};

// What the tracker writes to. Never destroyed: the allocator may call the
// tracker while the process exits.
struct Sink {
  std::FILE* file = nullptr;  // the trace file; stdio's lock orders its lines
  std::mutex mu;              // guards the recording
  bool recording = false;
  int steps_left = 0;  // step marks still recorded (0: no end)
  std::vector<Event> events;
};

Sink& TheSink() {
  static Sink* sink = new Sink;
  return *sink;
}

// Attaches the tracker once; false where it cannot be.
bool EnsureTracker(const at::Device& dev) {
#ifdef PILOT_RUNNER_ALLOC_TRACKER
  static bool attached = false;
  if (attached) return true;
  if (!dev.is_cuda()) return false;
  // The allocator sets itself up at its first allocation; trackers attach
  // to the devices it has set up.
  (void)at::empty({1}, at::TensorOptions().dtype(at::kByte).device(dev));
  using Entry = c10::cuda::CUDACachingAllocator::TraceEntry;
  c10::cuda::CUDACachingAllocator::attachAllocatorTraceTracker([](const Entry& e) {
    char kind = 0;
    switch (e.action_) {
      case Entry::Action::ALLOC: kind = 'a'; break;
      case Entry::Action::FREE_REQUESTED: kind = 'r'; break;
      case Entry::Action::FREE_COMPLETED: kind = 'f'; break;
      case Entry::Action::SEGMENT_ALLOC: kind = 's'; break;
      case Entry::Action::SEGMENT_FREE: kind = 'x'; break;
      case Entry::Action::SEGMENT_MAP: kind = 'm'; break;
      case Entry::Action::SEGMENT_UNMAP: kind = 'u'; break;
      case Entry::Action::OOM: kind = 'o'; break;
      default: return;
    }
    Sink& sink = TheSink();
    const auto addr = static_cast<uint64_t>(e.addr_);
    const auto bytes = static_cast<int64_t>(e.size_);
    if (sink.file != nullptr) {
      std::fprintf(sink.file, "%c %llu %lld %llu\n", kind, static_cast<unsigned long long>(addr),
                   static_cast<long long>(bytes),
                   static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(e.stream_)));
    }
    if (kind == 'a' || kind == 'f') {
      std::lock_guard<std::mutex> lock(sink.mu);
      if (sink.recording) sink.events.push_back({kind, addr, bytes});
    }
  });
  attached = true;
  return true;
#else
  (void)dev;
  return false;
#endif
}

}  // namespace

void StartAllocTrace(const at::Device& dev) {
  static bool started = false;
  const char* dir = std::getenv(kAllocTraceEnv);
  if (started || !dev.is_cuda() || dir == nullptr || *dir == '\0') return;
  started = true;
  const std::string path = std::string(dir) + "/alloc-" + std::to_string(::getpid()) + ".trace";
  std::FILE* f = std::fopen(path.c_str(), "we");
  if (f == nullptr) {
    std::fprintf(stderr, "pilot: %s: %s: %s\n", kAllocTraceEnv, path.c_str(), std::strerror(errno));
    return;
  }
  std::fprintf(f, "# pid %d device %d\n", static_cast<int>(::getpid()), static_cast<int>(dev.index()));
  TheSink().file = f;
  if (!EnsureTracker(dev)) {
    std::fprintf(stderr, "pilot: %s: this torch cannot trace its allocator (2.2 or later can)\n",
                 kAllocTraceEnv);
  }
}

void NoteAllocTrace(const std::string& line) {
  std::FILE* f = TheSink().file;
  if (f == nullptr) return;
  std::fprintf(f, "# %s\n", line.c_str());
  std::fflush(f);
}

bool StartAllocRecording(const at::Device& dev, int steps) {
  if (!EnsureTracker(dev)) return false;
  Sink& sink = TheSink();
  std::lock_guard<std::mutex> lock(sink.mu);
  sink.events.clear();
  sink.recording = true;
  sink.steps_left = steps > 0 ? steps + 1 : 0;
  return true;
}

void MarkAllocRecording(AllocOp::Kind mark) {
  Sink& sink = TheSink();
  std::lock_guard<std::mutex> lock(sink.mu);
  if (!sink.recording) return;
  if (mark == AllocOp::kStep && sink.steps_left > 0 && --sink.steps_left == 0) {
    sink.recording = false;
    return;
  }
  sink.events.push_back({'m', 0, static_cast<int64_t>(mark)});
}

std::vector<AllocOp> StopAllocRecording() {
  std::vector<Event> events;
  {
    Sink& sink = TheSink();
    std::lock_guard<std::mutex> lock(sink.mu);
    sink.recording = false;
    events.swap(sink.events);
  }
  std::vector<AllocOp> ops;
  ops.reserve(events.size());
  std::unordered_map<uint64_t, int64_t> live;  // address -> request id
  int64_t made = 0;
  for (const Event& e : events) {
    if (e.kind == 'a') {
      live[e.addr] = made++;
      ops.push_back({AllocOp::kAlloc, e.bytes});
    } else if (e.kind == 'f') {
      auto it = live.find(e.addr);
      if (it == live.end()) continue;  // made before the recording
      ops.push_back({AllocOp::kFree, it->second});
      live.erase(it);
    } else {
      ops.push_back({static_cast<AllocOp::Kind>(e.bytes), 0});
    }
  }
  return ops;
}

void KeepAllocRecording(const std::string& process, int micro_batch, int seq_len, int grad_accum,
                        bool checkpointing, bool whole, std::vector<AllocRecording>* out) {
  std::vector<AllocOp> ops = StopAllocRecording();
  int steps = 0;
  for (const AllocOp& op : ops) steps += op.kind == AllocOp::kStep ? 1 : 0;
  if (steps < 2) return;
  if (!whole) ops = TrimRecording(ops, false, false, 2);
  AllocRecording r;
  r.process = process;
  r.micro_batch = micro_batch;
  r.seq_len = seq_len;
  r.grad_accum = grad_accum;
  r.activation_checkpointing = checkpointing;
  r.requests = EncodeAllocOps(ops);
  out->push_back(std::move(r));
}

}  // namespace pilot::runner
