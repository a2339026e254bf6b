#include "supervisor/work_guard.h"

#include <ftw.h>
#include <sys/stat.h>

#include "core/base/strings.h"
#include "job/reserve.h"

namespace pilot::supervisor {
namespace {

constexpr double kEverySeconds = 2.0;

// nftw's callback takes no context: the walk in progress (one thread).
int64_t walk_bytes = 0;
int64_t walk_left = 0;

int AddEntry(const char*, const struct stat* st, int type, struct FTW*) {
  if (type == FTW_F || type == FTW_D || type == FTW_DP || type == FTW_SL) walk_bytes += st->st_blocks * 512;
  return --walk_left > 0 ? 0 : 1;
}

}  // namespace

std::optional<int64_t> FolderBytes(const std::string& dir, int64_t max_entries) {
  walk_bytes = 0;
  walk_left = max_entries;
  const int rc = nftw(dir.c_str(), AddEntry, 16, FTW_PHYS | FTW_MOUNT);
  if (rc < 0) return std::nullopt;
  return walk_bytes;
}

WorkGuard::WorkGuard(const job::StateLayout& state, const std::string& work_dir, int64_t floor_bytes)
    : state_(state), work_dir_(work_dir), floor_(floor_bytes) {
  struct stat s{}, w{};
  shared_ = floor_ > 0 && stat(state.root().c_str(), &s) == 0 && stat(work_dir.c_str(), &w) == 0 &&
            s.st_dev == w.st_dev;
  last_ = std::chrono::steady_clock::now();
}

std::optional<std::string> WorkGuard::Check() {
  if (!shared_) return std::nullopt;
  const auto now = std::chrono::steady_clock::now();
  if (std::chrono::duration<double>(now - last_).count() < kEverySeconds) return std::nullopt;
  last_ = now;
  // The prolog's own test of the floor.
  const Result<std::optional<int64_t>> free = job::FreeBelowFloor(state_, floor_);
  if (!free.ok() || !*free) return std::nullopt;
  const std::optional<int64_t> held = FolderBytes(work_dir_);
  if (!held || *held <= floor_) return std::nullopt;
  return "the pilot's work folder " + work_dir_ + " holds " + FormatBytes(static_cast<double>(*held)) +
         " on the state directory's file system, which it took below the site's floor: " +
         FormatBytes(static_cast<double>(**free)) + " free, " + FormatBytes(static_cast<double>(floor_)) +
         " kept for every user's locks and verdicts (state_floor_mb); a site puts work_root on another "
         "file system, or bounds it with work_quota_command";
}

}  // namespace pilot::supervisor
