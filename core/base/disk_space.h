// Free space before a large write: a save that cannot fit fails before its
// first byte, with the figures, instead of filling the disk half way.
//
//   std::vector<SpaceNeed> needs = {
//       {"/scratch/x/ckpt", "checkpoint.dir", ckpt_bytes},
//       {"/scratch/x/out", "--out", kResultsReserveBytes}};
//   Status s = CheckFreeSpace("checkpoint", needs);
//   // "pilot: checkpoint: needs 128.5 GB, 63.2 GB free on /scratch/x/ckpt
//   //  (checkpoint.dir)" with a hint
//
// Free space is what an unprivileged writer may use: statvfs's f_bavail
// times f_frsize (the blocks reserved for root are not counted). Needs of
// directories on one filesystem (same st_dev) are added up and compared
// with that filesystem's free space once, so a checkpoint and the results
// beside it are not each compared with the same free bytes.
//
// The arithmetic (SafetensorsFileBound, CheckSpace, FormatSize) is pure;
// MeasureSpace and CheckFreeSpace ask the operating system.
//
// Thread-safety: pure functions, and system calls without shared state.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/base/status.h"

namespace pilot {

// What a write will put into one directory.
struct SpaceNeed {
  std::string dir;    // where; a missing one is measured at its nearest existing parent
  std::string label;  // what moves it, for the message: "checkpoint.dir", "--out"
  int64_t bytes = 0;
  std::string what;   // what it is ("the checkpoint"), listed in its place when
                      // several needs share a filesystem; "" = the label
};

// One directory's filesystem.
struct MeasuredSpace {
  uint64_t device = 0;     // st_dev: needs with the same device share the free bytes
  int64_t free_bytes = 0;  // f_bavail * f_frsize
};

// Kept free for results.json and the small files written after a save
// (metrics, reports): the record of a failure must still fit.
inline constexpr int64_t kResultsReserveBytes = 16ll << 20;

// Room for the checkpoint's small files (state.json, manifest.json,
// COMPLETE) and the directory entries themselves.
inline constexpr int64_t kCheckpointMetaBytes = 1ll << 20;

// An upper bound on the bytes a safetensors file of `tensors` tensors with
// `data_bytes` of data takes on disk: the 8-byte length, a JSON header of
// at most kSafetensorsEntryBytes per tensor (name included, up to
// `name_bytes` of names in all) plus kSafetensorsMetaBytes of metadata, and
// the last block of the file (kFileBlockBytes). Never below the file's size.
inline constexpr int64_t kSafetensorsEntryBytes = 160;
inline constexpr int64_t kSafetensorsMetaBytes = 4096;
inline constexpr int64_t kFileBlockBytes = 64ll << 10;
int64_t SafetensorsFileBound(int64_t data_bytes, int64_t tensors, int64_t name_bytes);

// "128.5 GB", "1.2 MB", "312.0 kB", "512 bytes" (decimal units, as df -H).
std::string FormatSize(int64_t bytes);

// Compares `needs[i]` with `measured[i]` (same length, same order). The first
// filesystem whose needs do not fit gives kIoError "what: needs X, Y free on
// DIR (LABEL)" (DIR and LABEL of that filesystem's largest need; with more
// than one need there, the message lists each) with a hint to free space or
// move LABEL. OK when every filesystem has room.
Status CheckSpace(const std::string& what, const std::vector<SpaceNeed>& needs,
                  const std::vector<MeasuredSpace>& measured);

// statvfs and stat of `dir`, or of its nearest existing parent when it does
// not exist yet. Errors: kIoError naming the directory.
Result<MeasuredSpace> MeasureSpace(const std::string& dir);

// MeasureSpace of every need, then CheckSpace. A directory that cannot be
// measured is an error of its own (kIoError naming it).
Status CheckFreeSpace(const std::string& what, const std::vector<SpaceNeed>& needs);

}  // namespace pilot
