// A small tmpfs for tests of a full file system: mounted on a fresh folder,
// filled on request, unmounted and removed at the end. Mounting needs root
// (and a kernel that lets this process mount); a test calls Mount() and
// skips with its reason when it is refused.
#pragma once

#include <fcntl.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

namespace pilot::testutil {

class TinyFs {
 public:
  TinyFs() = default;
  TinyFs(const TinyFs&) = delete;
  TinyFs& operator=(const TinyFs&) = delete;
  ~TinyFs() {
    if (mounted_) ::umount2(dir_.c_str(), MNT_DETACH);
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  // Mounts a tmpfs of `kib` KiB on a new folder; "" on success, else why not.
  std::string Mount(int kib) {
    char tmpl[] = "/tmp/pilot-tinyfs-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) return std::string("mkdtemp: ") + std::strerror(errno);
    dir_ = tmpl;
    const std::string opts = "size=" + std::to_string(kib) + "k,mode=0755";
    if (::mount("tmpfs", dir_.c_str(), "tmpfs", 0, opts.c_str()) != 0) {
      return "cannot mount a tmpfs (" + std::string(std::strerror(errno)) +
             "): needs root and a kernel that allows it";
    }
    mounted_ = true;
    return "";
  }

  const std::string& dir() const { return dir_; }

  // Writes DIR/filler until the file system is full (ENOSPC).
  void Fill() const {
    const std::string path = dir_ + "/filler";
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd < 0) return;
    const std::string block(4096, 'x');
    while (::write(fd, block.data(), block.size()) > 0) {
    }
    // The last bytes of a page.
    while (::write(fd, "x", 1) > 0) {
    }
    ::close(fd);
  }

  void Unfill() const { std::filesystem::remove(dir_ + "/filler"); }

 private:
  std::string dir_;
  bool mounted_ = false;
};

}  // namespace pilot::testutil
