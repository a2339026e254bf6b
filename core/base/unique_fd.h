// UniqueFd: a file descriptor with one owner, closed when the owner goes.
//
// Holds -1 or an open descriptor; the destructor and reset() close the one
// held, release() gives it up unclosed. Moves hand the descriptor over;
// copies are not allowed. A close's error is not reported: a writer that
// must know whether its bytes reached the file calls ::close(release()).
//
// Thread-safety: one object is used by one thread at a time.
#pragma once

#include <unistd.h>

namespace pilot {

class UniqueFd {
 public:
  // Holds `fd` (an open descriptor, or -1 for none).
  explicit UniqueFd(int fd = -1) : fd_(fd) {}
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) reset(other.release());
    return *this;
  }
  ~UniqueFd() { reset(); }

  // The descriptor held, or -1; it stays owned by this object.
  int get() const { return fd_; }
  // Closes the descriptor held, if any, and holds `fd`.
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }
  // Gives up the descriptor without closing it; this object holds -1.
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_;
};

}  // namespace pilot
