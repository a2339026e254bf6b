// Space kept free in the state directory for locks and verdicts.
//
// The state directory's file system may fill up (a user's work folder under
// it, logs, another tenant of the disk). A prolog that cannot write lock.json
// and an epilog that cannot store a verdict would fail, and a failing
// prolog or epilog drains the node. So the state directory keeps a
// preallocated root-only file, STATE/reserve (job/state_layout.h), of the
// policy's state_reserve_mb. A write of a lock, a config copy or a verdict
// that fails with "no space" (ENOSPC) or "quota exceeded" (EDQUOT) removes
// that file and tries once more: the few kilobytes it needs are then free.
// EnsureReserve makes the file again later, when the file system has room for
// it twice over (so the reserve never takes the last free space itself).
//
// One reserve for all is not enough where users write on the same file
// system (work folders under STATE, the default): a user who keeps taking
// every block the file system frees takes the reserve's too, between its
// release and the write it was released for. So each pilot also gets space
// of its own for its verdict: the prolog preallocates JobPaths::verdict_space
// (kVerdictSpaceBytes) before the job's work starts, and the epilog writes
// the verdict into those blocks (job/verdict_history.h, StoreVerdict), so
// storing it needs no free block at that moment. And a new pilot is refused
// (the lock problem kProblemStateSpaceLow, NO-GO; the task does not start it)
// while the file system has less free than the policy's state_floor_mb.
//
// Preallocation uses fallocate(2), else writes zeros; on a file system that
// compresses or deduplicates zeros the reserve holds less than it says.
//
// Thread-safety: no shared state; two processes that release the reserve at
// once both find it gone or unlink it once (the second write retries without).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "core/base/atomic_file.h"
#include "core/base/status.h"
#include "job/state_layout.h"

namespace pilot::job {

// Receives one line for the log (the caller adds its "pilot-prolog: job N: ").
using LogLine = std::function<void(const std::string& line)>;

// True when `s` is a failure for want of space: its message carries the
// system's text for ENOSPC or EDQUOT (core's file functions put strerror()
// in every message; this is the one place that reads it back).
bool IsOutOfSpace(const Status& s);

// Makes layout.ReserveFile() `bytes` long (root, 0600) when it is missing or
// shorter and the file system has at least 2 * `bytes` free; written to a
// temporary name and renamed, so a half-made reserve never stays. `bytes`
// <= 0 removes a reserve that is there. Returns whether the reserve is in
// place afterwards (false with OK: not enough room yet, tried again next
// time). Errors: kIoError (the state directory cannot be read or written).
Result<bool> EnsureReserve(const StateLayout& layout, int64_t bytes);

// The space set aside for one verdict: a verdict is a few KiB (its checks'
// details, one hardware line per GPU type); a larger one is written anew.
inline constexpr int64_t kVerdictSpaceBytes = int64_t{256} << 10;

// The lock problem of a pilot refused because the state directory's file
// system had less free than the policy's state_floor_mb when it started:
// the task does not start the pilot (spank_pilot(8)), the verdict is NO-GO.
inline constexpr char kProblemStateSpaceLow[] = "state_space_low";

// Makes `path` (root, 0600, a new file: O_EXCL, no link followed) with
// kVerdictSpaceBytes preallocated and synced, for StoreVerdict to write the
// job's verdict into. Errors: kIoError (with the system's words, so
// IsOutOfSpace() tells a full file system); no file is left then.
Status SetAsideVerdictSpace(const std::string& path);

// What the state directory's file system has free for its users (statvfs
// f_bavail, beyond the reserve, which is allocated), when that is below
// `floor_bytes`; nullopt when it is not, or `floor_bytes` <= 0. Errors:
// kIoError (statvfs failed).
Result<std::optional<int64_t>> FreeBelowFloor(const StateLayout& layout, int64_t floor_bytes);

// WriteFileAtomic(path, bytes, mode, fs); when that fails for want of space
// (IsOutOfSpace), removes layout.ReserveFile(), logs one line saying so
// and tries once more. The file is whole or absent, never half-written.
// Errors: WriteFileAtomic's (the second attempt's when there was one).
Status WriteWithReserve(const StateLayout& layout, const std::string& path, std::string_view bytes,
                        mode_t mode, const LogLine& log, FileOps& fs = RealFileOps());

}  // namespace pilot::job
