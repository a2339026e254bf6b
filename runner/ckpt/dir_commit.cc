// The checkpoint directories' commit.
#include "runner/ckpt/dir_commit.h"

#include <filesystem>
#include <system_error>
#include <utility>

namespace pilot::runner {
namespace fs = std::filesystem;

Result<StagedDir> StagedDir::Begin(const std::string& parent, const std::string& name,
                                   const std::string& temp_name, FileOps& ops) {
  std::error_code ec;
  fs::create_directories(parent, ec);
  if (ec) return Status::IoError(parent, ec.message());
  const std::string temp = parent + "/" + temp_name;
  fs::remove_all(temp, ec);
  fs::create_directory(temp, ec);
  if (ec) return Status::IoError(temp, ec.message());
  return StagedDir(parent, temp, parent + "/" + name, &ops);
}

Status StagedDir::Commit(std::string_view marker) {
  Status s = fs_->SyncDir(temp_);
  std::error_code ec;
  if (s.ok()) {
    fs::remove_all(final_, ec);  // a stale one from an earlier run
    fs::rename(temp_, final_, ec);
    if (ec) s = Status::IoError(final_, "rename: " + ec.message());
  }
  if (!s.ok()) {
    Abort();
    return s;
  }
  s = fs_->SyncDir(parent_);
  if (s.ok()) s = WriteFileAtomic(final_ + "/" + kCompleteMarker, marker, 0644, *fs_);
  // Renamed but never marked complete: no reader takes it, and its bytes
  // are given back rather than left to fill the disk.
  if (!s.ok()) fs::remove_all(final_, ec);
  return s;
}

void StagedDir::Abort() {
  std::error_code ec;
  fs::remove_all(temp_, ec);
}

}  // namespace pilot::runner
