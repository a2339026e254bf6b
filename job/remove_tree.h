// Removing a job's work folder, which belongs to the job's user.
//
// Root removes a folder the user filled as they liked: symbolic links to
// root's files, folders swapped for links while it runs, another file system
// mounted inside (a FUSE mount the user made). RemoveTreeBeneath walks it
// from descriptors only: it opens PARENT (a root-owned folder the caller
// trusts), then NAME and every folder below with openat(O_NOFOLLOW |
// O_DIRECTORY), and removes entries with unlinkat() relative to the folder
// that holds them. A symbolic link is removed as a link, never followed; a
// folder on another device than NAME is left alone (with what contains it),
// and so is NAME when it is on another device than PARENT (a mount on it);
// a folder swapped for something else between looking and opening is
// refused by the kernel, never entered.
//
// Thread-safety: no shared state.
#pragma once

#include <cstdint>
#include <string>

#include "core/base/status.h"

namespace pilot::job {

struct RemovedTree {
  int64_t entries = 0;  // files, links and folders removed
  std::string left;     // why something was left ("" = all of it is gone)
};

// Removes PARENT/NAME and everything in it as described above. NAME is one
// component (no '/', not "." or ".."). A missing NAME (or PARENT) removes
// nothing and is no error. Folders deeper than 256 levels are left (`left` says so).
// Errors: kInvalid (a bad NAME), kIoError (PARENT cannot be opened, NAME is
// not a folder: a link or a file there is not removed).
Result<RemovedTree> RemoveTreeBeneath(const std::string& parent, const std::string& name);

// The same for a path: RemoveTreeBeneath(DirName(path), BaseName(path)).
Result<RemovedTree> RemoveTree(const std::string& path);

}  // namespace pilot::job
