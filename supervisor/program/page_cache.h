// How much of a file the page cache holds, and dropping it: the supervisor's
// measure of what a resumed process read of its checkpoint (pilot-program(7),
// CHECKPOINT). A page a process read with read(2), pread(2) or through a
// mapping is in the cache afterwards; a file whose cached pages were dropped
// before the process started holds, when it reports its first step, what
// the process (or the kernel's read-ahead for it) read since.
//
// Thread-safety: stateless; any thread.
#pragma once

#include <cstdint>

#include "core/base/status.h"

namespace pilot::supervisor {

// The bytes of the file open at `fd` (its first `size` bytes) whose pages
// are in the page cache now (mmap(2) without touching a page, then
// mincore(2)). Errors: kIoError (a mapping refused: a file system without
// mmap).
Result<int64_t> CachedBytes(int fd, int64_t size);

// Writes the file's dirty pages (a read-only descriptor is enough), then
// asks the kernel to drop its cached pages (posix_fadvise DONTNEED). Whether
// it did is CachedBytes' to tell: tmpfs keeps every page, a page mapped
// elsewhere stays. Errors: kIoError.
Status DropCached(int fd);

}  // namespace pilot::supervisor
