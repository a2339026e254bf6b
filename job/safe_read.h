// Reading a file inside a job's folder without trusting the job's user.
//
// STATE/jobs/JOBID/ is root's, but its work/ folder and everything in it
// belong to the job's user (job/state_layout.h). A root process that reads a
// file there by its path follows whatever the user put in its place: a
// symbolic link to a root-only file, a FIFO that never answers, a device.
// ReadFileBeneath reads DIR/RELATIVE the other way: it opens DIR, then each
// component of RELATIVE with openat() and O_NOFOLLOW, so a symbolic link at
// any depth below DIR is refused rather than followed, and only a regular
// file's bytes are returned. DIR itself is the caller's trusted folder (the
// state directory's jobs/ folder or a job's folder); its own last component
// is not followed either.
//
// It lives in job/ and not in core/ because the refusals speak of a job's
// folder: "pilot: /state/jobs/12/work/metrics.jsonl: is a symbolic link (not
// followed: the job's folder belongs to its user)". Any path below the state
// directory is for StateLayout to spell; this file only reads.
//
// Thread-safety: no shared state.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include <sys/stat.h>

#include "core/base/status.h"
#include "core/base/unique_fd.h"

namespace pilot::job {

// The bytes of DIR/RELATIVE, a regular file of at most `max_bytes`.
// RELATIVE is one or more names separated by '/': no leading '/', no empty,
// "." or ".." component. Every component below `dir` is opened with
// O_NOFOLLOW (folders with O_DIRECTORY), the file with O_NONBLOCK, so a FIFO
// does not block the caller; a file larger than `max_bytes` (also one that
// grows past it while being read) is refused, never returned in part.
// Errors: kInvalid (a bad RELATIVE, "larger than N bytes"), kNotFound (a
// component missing), kPermission (a symbolic link, or the system refused),
// kIoError (not a regular file: a FIFO, a device, a socket, a folder; a
// folder in the middle that is not one; a read error).
Result<std::string> ReadFileBeneath(const std::string& dir, const std::string& relative,
                                    size_t max_bytes);

// DIR/RELATIVE opened as ReadFileBeneath reaches it (no link followed below
// `dir`, the last component with O_NOFOLLOW): a folder (O_DIRECTORY) or a
// regular file (O_NONBLOCK, so a FIFO swapped in cannot block); `*st`
// receives what fstat(2) says of the descriptor. RELATIVE "." opens `dir`
// itself. Errors as ReadFileBeneath's (kPermission for a link, kIoError for
// a FIFO, device or socket).
Result<UniqueFd> OpenBeneath(const std::string& dir, const std::string& relative,
                             struct stat* st);

// What lstat(2) says of DIR/RELATIVE, reached as ReadFileBeneath reaches
// it (no link followed below `dir`; the last component itself may be a
// link, which is described, not followed). Errors as ReadFileBeneath's.
Result<struct stat> StatBeneath(const std::string& dir, const std::string& relative);

// The part of `path` below `dir`, both made absolute (against the current
// folder) and lexically normal ("." and ".." removed as written, no link
// resolved): PathBelow("/state/jobs", "/state/jobs/12/work/results.json")
// == "12/work/results.json". nullopt when `path` is `dir` itself or not
// below it.
std::optional<std::string> PathBelow(const std::string& dir, const std::string& path);

}  // namespace pilot::job
