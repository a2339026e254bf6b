// Making the state directory's folders on a node (root only).
//
// The prolog and the epilog both start with EnsureStateDir: whichever runs
// first on a fresh node makes the folders, with the owners and modes
// job/state_layout.h lists. The per-job folder is the prolog's business.
//
// Thread-safety: no shared state; concurrent calls race only on mkdir,
// which either wins or finds the folder (EEXIST).
#pragma once

#include <sys/types.h>

#include <string>

#include "core/base/status.h"
#include "job/state_layout.h"

namespace pilot::job {

// Makes `path` a root-owned folder with `mode` (mkdir unless it exists,
// then chown 0:0 and chmod, so a folder left with other rights is fixed).
// Errors: kIoError (cannot make it, or it is not a folder: a link is not
// followed), kPermission (chown/chmod refused: not root).
Status MakeRootDir(const std::string& path, mode_t mode);

// Makes STATE, STATE/jobs and STATE/verdicts (0755), STATE/outbox and
// STATE/attic (0700), and the work root (0755) when the layout has one,
// when missing, all root's. Errors as MakeRootDir's: the node is broken.
Status EnsureStateDir(const StateLayout& layout);

}  // namespace pilot::job
