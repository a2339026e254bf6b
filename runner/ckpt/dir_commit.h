// A directory of files committed as one: the checkpoint formats' way to
// make a step's directory appear whole or not at all (leveldb's way of
// committing a file, applied to a directory).
//
//   StagedDir d = StagedDir::Begin(parent, "step-000040", ".step-000040.tmp");
//   ... write files into d.path(), each fsynced by its writer ...
//   Status s = d.Commit("step 40\n");   // or d.Abort() after a failed write
//
// Commit: fsync the temp directory, remove a stale target of the same
// name, rename the temp directory into place, fsync the parent, then write
// the COMPLETE marker atomically (core/base/atomic_file.h: fsynced, and the
// target directory with it). A checkpoint without COMPLETE does not exist
// (readers check it first). On any failure, and on Abort, the temp
// directory is removed (after the rename, the renamed one: a directory
// without COMPLETE is not left to fill the disk); nothing is committed or
// removed from a destructor.
//
// Thread-safety: one StagedDir per thread; files inside may be written
// concurrently (by threads or by other processes that know path()).
#pragma once

#include <string>
#include <string_view>
#include <utility>

#include "core/base/atomic_file.h"
#include "core/base/status.h"

namespace pilot::runner {

inline constexpr char kCompleteMarker[] = "COMPLETE";

class StagedDir {
 public:
  // Creates `parent` if missing and an empty `<parent>/<temp_name>` (a
  // stale one is removed) for what will become `<parent>/<name>`.
  // Errors: kIoError naming the directory.
  static Result<StagedDir> Begin(const std::string& parent, const std::string& name,
                                 const std::string& temp_name, FileOps& fs = RealFileOps());

  const std::string& path() const { return temp_; }          // where files go
  const std::string& final_path() const { return final_; }  // after Commit

  // See the file comment; `marker` is COMPLETE's content. Errors:
  // kIoError (fsync, rename), those of WriteFileAtomic.
  Status Commit(std::string_view marker);
  // Removes the temp directory and what was written into it.
  void Abort();

 private:
  StagedDir(std::string parent, std::string temp, std::string final_dir, FileOps* fs)
      : parent_(std::move(parent)), temp_(std::move(temp)), final_(std::move(final_dir)), fs_(fs) {}
  std::string parent_, temp_, final_;
  FileOps* fs_;
};

}  // namespace pilot::runner
