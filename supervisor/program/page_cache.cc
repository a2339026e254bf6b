#include "supervisor/program/page_cache.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

namespace pilot::supervisor {

Result<int64_t> CachedBytes(int fd, int64_t size) {
  if (size <= 0) return int64_t{0};
  const int64_t page = sysconf(_SC_PAGESIZE);
  // A window at a time: a checkpoint of hundreds of GiB costs a vector of
  // 256 Ki entries, not one per page of the whole file.
  const int64_t window = int64_t{1} << 30;
  std::vector<unsigned char> vec(static_cast<size_t>(window / page));
  int64_t cached = 0;
  for (int64_t off = 0; off < size; off += window) {
    const int64_t len = std::min(window, size - off);
    void* map = mmap(nullptr, static_cast<size_t>(len), PROT_READ, MAP_SHARED, fd, off);
    if (map == MAP_FAILED) return Status::IoError("page cache", std::string("mmap: ") + std::strerror(errno));
    const int64_t pages = (len + page - 1) / page;
    const int rc = mincore(map, static_cast<size_t>(len), vec.data());
    const int why = errno;
    munmap(map, static_cast<size_t>(len));
    if (rc != 0) return Status::IoError("page cache", std::string("mincore: ") + std::strerror(why));
    for (int64_t i = 0; i < pages; ++i) {
      if (vec[static_cast<size_t>(i)] & 1) cached += std::min(page, len - i * page);
    }
  }
  return cached;
}

Status DropCached(int fd) {
  if (fdatasync(fd) != 0 && errno != EINVAL) {
    return Status::IoError("page cache", std::string("fdatasync: ") + std::strerror(errno));
  }
  const int rc = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  if (rc != 0) return Status::IoError("page cache", std::string("posix_fadvise: ") + std::strerror(rc));
  return Status::Ok();
}

}  // namespace pilot::supervisor
