// The run identity's own pins: a program's files and folders (program.pin),
// the git commit of the work tree that holds them, and Hugging Face hub
// cache revisions (program.hub_models, program.hub_datasets).
//
// Computed twice with the same code: at submit by the plugin (the user's
// own process) and at job start by the prolog in a child that runs as the
// job's user (pilot-prolog --pins, prolog/prolog.cc), so that root never
// reads, or vouches for, a file the user could not read. The two are
// compared through PinSummary() (core/records/lock.h): an entry that moved
// between them is named by MovedPins() in the verdict's pins_unchanged
// check.
//
// Every read starts at a base folder (program.workdir or the hub cache,
// both resolved with realpath first: the user chose them) and goes down
// with openat() and O_NOFOLLOW (job/safe_read.h): a pinned path that is a
// symbolic link is refused; a link inside a pinned folder is recorded by
// its target's text, never followed; in a hub snapshot a link is resolved
// only to a file of the same repository's folder (blobs/). FIFOs, devices
// and sockets are refused, never opened for reading. Walks are bounded
// (PinLimits: files, bytes, depth, seconds): past a bound the pin gets an
// error naming it, and the caller makes it a reason, never a hang. Folders
// named .git and __pycache__ inside a pinned folder are left out (the
// first is recorded as the commit, the second is written by Python).
//
// Git: the work tree holding a pin is found by looking for .git upwards
// from its folder; HEAD is read from the on-disk layout (HEAD, refs/,
// packed-refs, a worktree's gitdir and commondir), no git program runs.
// `dirty` is git's own first look at a file: a pinned file absent from the
// index, or whose size and mtime differ from the index's and whose blob
// hash differs too, makes it "yes". Changes staged but not committed are
// not seen (that would need HEAD's tree from the object store).
//
// Thread-safety: no shared state.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/base/env_lookup.h"
#include "core/base/status.h"
#include "core/config/config.h"
#include "core/records/lock.h"

namespace pilot::job {

struct PinLimits {
  int64_t max_files = 20000;              // regular files in one pin
  int64_t max_bytes = int64_t{64} << 30;  // their bytes, 64 GiB
  int max_depth = 32;                     // folders below a pinned folder
  double seconds = 100;                   // all pins together
};

struct PinRequest {
  std::string workdir;                  // absolute: program.workdir or the submit folder
  std::vector<std::string> pins;        // program.pin ("" list: the command's script)
  std::vector<std::string> command;     // program.command
  std::string hub_cache;                // absolute; "" = no hub pins resolvable
  std::vector<std::string> hub_models;  // "org/name[@revision]"
  std::vector<std::string> hub_datasets;
};

// The request for `cfg` (a program's config; a builtin one pins nothing):
// workdir is program.workdir, else `submit_dir`.
PinRequest PinRequestFor(const Config& cfg, const std::string& submit_dir,
                         const std::string& hub_cache);
// True when the request names anything to pin, or may (a default script).
bool HasPins(const PinRequest& req);

// The hub cache folder huggingface_hub uses with environment `env`:
// HF_HUB_CACHE, else HF_HOME/hub, else XDG_CACHE_HOME/huggingface/hub,
// else `home`/.cache/huggingface/hub ("" without a home).
std::string HubCacheFolder(const EnvLookup& env, const std::string& home);

// The pins of `req`, read with the caller's permissions. Never fails as a
// whole: a pin that cannot be pinned carries its `error`.
std::vector<LockPin> ComputePins(const PinRequest& req, const PinLimits& limits = {});

// The summary as recorded at submit (one line of JSON) and read back.
// Errors: kCorrupt (not a JSON object of strings).
std::string SummaryToJson(const std::map<std::string, std::string>& summary);
Result<std::map<std::string, std::string>> ParseSummary(const std::string& text);

// Between the prolog and its child (pilot-prolog --pins): the request as
// JSON (the pins travel back as LockPinsToJson, core/records/lock.h).
// Errors: kCorrupt.
std::string PinRequestToJson(const PinRequest& req);
Result<PinRequest> ParsePinRequest(const std::string& text);

// --- readers (pin_sources.cc), exposed for tests ---

// The work tree's HEAD commit for a file or folder at `path` (absolute):
// "" when no .git is found above it or HEAD names no commit yet. Errors:
// kCorrupt (a HEAD or ref that is not a commit), kIoError.
Result<std::string> GitHead(const std::string& path, std::string* top = nullptr);

// What git's index says of the files below work tree `top`: path relative
// to `top` -> entry. Errors: kNotFound (no index), kCorrupt.
struct GitIndexEntry {
  std::string sha1;  // 40 hex
  uint32_t size = 0;
  uint32_t mtime_s = 0;
  uint32_t mtime_ns = 0;
};
Result<std::map<std::string, GitIndexEntry>> ReadGitIndex(const std::string& top);
Result<std::map<std::string, GitIndexEntry>> ParseGitIndex(std::string_view bytes);

// "models--org--name" / "datasets--org--name" for `repo` "org/name".
std::string HubRepoFolder(const std::string& kind, const std::string& repo);

}  // namespace pilot::job
