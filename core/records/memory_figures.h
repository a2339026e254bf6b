// Memory figures: what a process's memory looked like at one measured step,
// held the same way by every record that carries them. results.json's
// stages.single memory records (MemoryStats, core/records/results.h), its
// node ranks' (NodeMemoryStats, core/records/results_node.h) and the rank
// report's (RankMemory, core/records/rank_report.h) are MemoryFigures; a
// program's records give theirs through MemoryFiguresOf
// (supervisor/program/metrics.h).
//
// The figures are listed once, in Fields below (core/records/record.h's
// style). Each format keeps the figures it has always written, in its own
// key order and with its own rule for an unset one: a MemoryKey list beside
// the format's struct, and core/records/memory_fields.h drives the format's
// writer and strict reader from that list and this one. So one format's
// figures become another's in one assignment (the conversion keeps the
// figures the target format has, every other one unset), and a file's bytes
// are what they were before the figures were shared.
//
// Adding a figure: a member and its line in Fields here, then its key in
// the MemoryKey list of each format that should write it (and that format's
// documentation line, pilot-files(5) and docs/formats.md; the man-page test
// checks results.json's keys).
//
// Thread-safety: plain values.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

namespace pilot {

// Figures that do not exist on a device (allocator peaks on a CPU) are
// unset; the process_* figures are what the operating system says about
// the process.
struct MemoryFigures {
  std::string device;                             // "cuda" | "cpu"
  int64_t step = 0;                               // the step measured (1-based)
  std::optional<int64_t> peak_allocated_bytes;    // allocator peak (tensors)
  std::optional<int64_t> peak_reserved_bytes;     // allocator peak reserved
  std::optional<int64_t> device_used_bytes;       // device total - free
  std::optional<int64_t> device_total_bytes;      // device total
  std::optional<int64_t> process_device_bytes;    // NVML, this process
  std::optional<int64_t> runtime_overhead_bytes;  // device used - reserved
  std::optional<int64_t> alloc_retries;           // allocator retries (cumulative)
  std::optional<int64_t> ooms;                    // allocator OOMs (cumulative)
  std::optional<int64_t> process_peak_rss_bytes;  // VmHWM
  std::optional<int64_t> process_rss_bytes;       // VmRSS after the step
  // The allocator's peak up to the end of the forward pass.
  std::optional<int64_t> forward_peak_allocated_bytes;
  bool operator==(const MemoryFigures&) const = default;
};

// The one field list of the figures: each key and its member.
template <class V, class S>
void Fields(V& v, S& s, std::type_identity<MemoryFigures>) {
  v("device", s.device);
  v("step", s.step);
  v("peak_allocated_bytes", s.peak_allocated_bytes);
  v("peak_reserved_bytes", s.peak_reserved_bytes);
  v("device_used_bytes", s.device_used_bytes);
  v("device_total_bytes", s.device_total_bytes);
  v("process_device_bytes", s.process_device_bytes);
  v("runtime_overhead_bytes", s.runtime_overhead_bytes);
  v("alloc_retries", s.alloc_retries);
  v("ooms", s.ooms);
  v("process_peak_rss_bytes", s.process_peak_rss_bytes);
  v("process_rss_bytes", s.process_rss_bytes);
  v("forward_peak_allocated_bytes", s.forward_peak_allocated_bytes);
}

// How a format treats one figure's key (core/records/record.h's
// attributes): always written and required; written and read as its
// default when absent (kMayBeAbsent); left out of the file when unset
// (kOmitIfUnset).
enum class MemoryKeyRule { kRequired, kMayBeAbsent, kOmitIfUnset };

// One key of a format's memory record: a key of Fields above.
struct MemoryKey {
  const char* key;
  MemoryKeyRule rule = MemoryKeyRule::kRequired;
};

namespace memory_internal {

// Resets every figure whose key is not among `keys`.
struct Unlisted {
  std::span<const MemoryKey> keys;
  template <class T>
  void operator()(const char* key, T& member) const {
    for (const MemoryKey& k : keys) {
      if (std::string_view(k.key) == key) return;
    }
    member = T{};
  }
};

}  // namespace memory_internal

// `f` with only the figures a format of `keys` has; the others unset.
inline MemoryFigures KeepFigures(MemoryFigures f, std::span<const MemoryKey> keys) {
  memory_internal::Unlisted clear{keys};
  Fields(clear, f, std::type_identity<MemoryFigures>{});
  return f;
}

}  // namespace pilot
