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
// Preallocation uses fallocate(2), else writes zeros; on a file system that
// compresses or deduplicates zeros the reserve holds less than it says.
//
// Thread-safety: no shared state; two processes that release the reserve at
// once both find it gone or unlink it once (the second write retries without).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
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

// WriteFileAtomic(path, bytes, mode, fs); when that fails for want of space
// (IsOutOfSpace), removes layout.ReserveFile(), logs one line saying so
// and tries once more. The file is whole or absent, never half-written.
// Errors: WriteFileAtomic's (the second attempt's when there was one).
Status WriteWithReserve(const StateLayout& layout, const std::string& path, std::string_view bytes,
                        mode_t mode, const LogLine& log, FileOps& fs = RealFileOps());

}  // namespace pilot::job
