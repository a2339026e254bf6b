// Program mode of `pilot-runner verify`: the walk, the manifest comparison
// and the report. Each failed check is printed as
// "pilot: verify: CHECK: FAILED: FILE: DETAIL" and listed in `problems`.
#include "runner/ckpt/program_verify.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <utility>

#include "core/base/atomic_file.h"
#include "core/base/crypto.h"
#include "core/records/exit_codes.h"
#include "core/base/unique_fd.h"
#include "core/records/verify_report.h"
#include "runner/ckpt/program_files.h"

namespace pilot::runner {
namespace {

constexpr int64_t kMaxDirectoryIndex = 256ll << 20;  // program_files.cc says so when larger

// A file name or detail as the report spells it: valid UTF-8 is kept,
// control characters, backslashes and bytes of no UTF-8 sequence become
// \xHH, so that every name has one spelling that JSON can hold.
std::string Spelled(const std::string& s) {
  std::string out;
  auto hex = [&](unsigned char c) {
    static const char* kHex = "0123456789abcdef";
    out += "\\x";
    out += kHex[c >> 4];
    out += kHex[c & 15];
  };
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
      ++i;
      continue;
    }
    const size_t len = (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
    bool valid = len > 0 && c >= 0xc2 && c <= 0xf4 && i + len <= s.size();
    for (size_t k = 1; valid && k < len; ++k)
      valid = (static_cast<unsigned char>(s[i + k]) & 0xc0) == 0x80;
    if (valid) {
      out.append(s, i, len);
      i += len;
    } else {
      hex(c);
      ++i;
    }
  }
  return out;
}

// The files of one directory in a directory format (kProgramFormats).
struct DirectoryFiles {
  std::string index;        // the index file's bytes (DCP's .metadata)
  int64_t index_size = -1;  // -1: no index file here
};

class Verifier {
 public:
  Verifier(const VerifyOptions& o, VerifyReport* rep) : o_(o), rep_(rep) {}

  // `path` and `detail` as the report spells them (Spelled).
  void Problem(const std::string& check, const std::string& path, const std::string& detail) {
    rep_->problems.push_back(path + ": " + detail);
    std::fprintf(stderr, "pilot: verify: %s: FAILED: %s: %s\n", check.c_str(), path.c_str(),
                 detail.c_str());
  }
  void Pass(const std::string& check, const std::string& detail) const {
    if (!o_.json) std::printf("pilot: verify: %s: ok (%s)\n", check.c_str(), detail.c_str());
  }

  // Opens the checkpoint directory one component at a time, none a link.
  Status OpenRoot(UniqueFd* out) {
    const std::string& p = o_.program_checkpoint;
    int fd = ::open(p[0] == '/' ? "/" : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    size_t pos = 0;
    while (fd >= 0 && pos < p.size()) {
      const size_t slash = p.find('/', pos);
      const std::string comp =
          p.substr(pos, slash == std::string::npos ? std::string::npos : slash - pos);
      pos = slash == std::string::npos ? p.size() : slash + 1;
      if (comp.empty() || comp == ".") continue;
      const int next = ::openat(fd, comp.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      const int err = errno;
      ::close(fd);
      fd = next;
      errno = err;
    }
    if (fd < 0) {
      if (errno == ENOENT) return Status::NotFound(p, "no such checkpoint directory");
      if (errno == ELOOP || errno == ENOTDIR)
        return Status::Invalid(p, "not a directory (or reached through a link)");
      return Status::IoError(p, std::strerror(errno));
    }
    out->reset(fd);
    return Status::Ok();
  }

  void Walk(int dirfd, const std::string& rel, int depth) {
    int dup = ::dup(dirfd);
    DIR* d = dup < 0 ? nullptr : ::fdopendir(dup);
    if (d == nullptr) {
      if (dup >= 0) ::close(dup);
      Problem("files", Shown(rel), std::string("cannot list: ") + std::strerror(errno));
      return;
    }
    std::vector<std::string> names;
    while (dirent* e = ::readdir(d)) {
      const std::string n = e->d_name;
      if (n != "." && n != "..") names.push_back(n);
      if (static_cast<int64_t>(names.size()) > kMaxProgramFiles) break;
    }
    ::closedir(d);
    std::sort(names.begin(), names.end());
    for (const std::string& n : names) {
      if (stop_) return;
      const std::string path = rel.empty() ? Spelled(n) : rel + "/" + Spelled(n);
      struct stat st {};
      if (::fstatat(dirfd, n.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
        Problem("files", path, std::string("cannot stat: ") + std::strerror(errno));
        continue;
      }
      if (S_ISDIR(st.st_mode)) {
        if (depth + 1 > kMaxProgramDepth) {
          Problem("files", path,
                  "deeper than " + std::to_string(kMaxProgramDepth) + " levels; not read");
          continue;
        }
        UniqueFd sub(::openat(dirfd, n.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
        if (sub.get() < 0) {
          Problem("files", path, std::string("cannot open: ") + std::strerror(errno));
          continue;
        }
        Walk(sub.get(), path, depth + 1);
        continue;
      }
      if (++count_ > kMaxProgramFiles) {
        Problem("files", Shown(rel),
                "more than " + std::to_string(kMaxProgramFiles) + " files; the rest not read");
        stop_ = true;
        return;
      }
      ProgramFile f;
      f.path = path;
      f.size = static_cast<int64_t>(st.st_size);
      if (S_ISLNK(st.st_mode) || !S_ISREG(st.st_mode)) {
        f.format = S_ISLNK(st.st_mode) ? "symlink" : "special";
        f.size = S_ISLNK(st.st_mode) ? f.size : 0;
        f.detail = S_ISLNK(st.st_mode) ? "a symbolic link: not followed" : "not a regular file";
        Problem("files", path, f.detail);
        rep_->files.push_back(std::move(f));
        continue;
      }
      ReadRegular(dirfd, n, rel, std::move(f));
    }
  }

  void ReadRegular(int dirfd, const std::string& name, const std::string& rel, ProgramFile f) {
    auto expected = manifest_.find(f.path);
    if (!o_.expect_manifest.empty() && expected == manifest_.end()) {
      // Added after the supervisor listed the checkpoint: named among the
      // files not in the list, never read (a huge sparse file costs nothing).
      f.format = "other";
      f.detail = "not in the manifest: added after the checkpoint was listed; not read";
      rep_->files.push_back(std::move(f));
      return;
    }
    if (expected != manifest_.end() && expected->second.size != f.size) {
      f.format = expected->second.format;
      f.detail = std::to_string(f.size) + " bytes, the manifest says " +
                 std::to_string(expected->second.size) + "; not read";
      ManifestMismatch(f.path, f.detail);
      rep_->files.push_back(std::move(f));
      return;
    }
    UniqueFd fd(
        ::openat(dirfd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
    struct stat st {};
    if (fd.get() < 0 || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
      f.format = "special";
      f.detail = std::string("cannot open as a regular file: ") + std::strerror(errno);
      Problem("files", f.path, f.detail);
      rep_->files.push_back(std::move(f));
      return;
    }
    f.size = static_cast<int64_t>(st.st_size);
    int64_t hashed = 0;
    Result<std::string> sha = Sha256Fd(fd.get(), f.path, &hashed);
    if (!sha.ok() || hashed != f.size) {
      f.format = "other";
      f.detail = sha.ok() ? "changed while it was read" : sha.status().Message();
      Problem("files", f.path, f.detail);
      rep_->files.push_back(std::move(f));
      return;
    }
    f.sha256 = *sha;
    if (expected != manifest_.end() && expected->second.sha256 != f.sha256) {
      ManifestMismatch(f.path, "sha256 " + f.sha256 + " does not match the manifest's " +
                                   expected->second.sha256);
    }
    if (const ProgramFormat* format = DirectoryFormatOf(name)) {
      DirectoryFiles& d = directories_[{rel, format}];
      if (name == format->index) {
        d.index_size = f.size;
        if (f.size <= kMaxDirectoryIndex) {
          d.index.resize(static_cast<size_t>(f.size));
          if (f.size > 0 && ::pread(fd.get(), d.index.data(), d.index.size(), 0) != f.size)
            d.index.clear();
        }
      }
    }
    FileReading r = ReadProgramFile(fd.get(), f.size, f.path);
    Apply(r, &f);
    if (r.failed) failed_.insert(f.path);
    rep_->optimizer_state = rep_->optimizer_state || r.optimizer_state;
    dir_sizes_[rel][Spelled(name)] = f.size;
    rep_->files.push_back(std::move(f));
  }

  void Apply(const FileReading& r, ProgramFile* f) {
    f->format = r.format;
    f->readable = r.readable;
    f->tensors = r.tensors;
    // (Not `substr(...) + "..."`: GCC 12 warns a false -Warray-bounds on
    // that std::string operator+ when ATen's headers come precompiled.)
    std::string detail = r.detail.substr(0, 400);
    if (r.detail.size() > 400) detail += "...";
    f->detail = Spelled(detail);
  }

  // Files of a directory format (DCP) are read as a group once the walk is
  // done; that reading replaces their single-file readings.
  void ReadDirectories() {
    std::map<std::string, ProgramFile*> by_path;
    for (ProgramFile& f : rep_->files) by_path[f.path] = &f;
    for (auto& [key, d] : directories_) {
      const auto& [rel, format] = key;
      if (d.index_size < 0) continue;  // member-like names without the index file: plain files
      DcpReading r = format->read_directory(d.index, d.index_size, dir_sizes_[rel], Shown(rel));
      rep_->shards += r.shards;
      rep_->optimizer_state = rep_->optimizer_state || r.optimizer_state;
      for (const auto& [name, reading] : r.readings) {
        auto it = by_path.find(rel.empty() ? name : rel + "/" + name);
        if (it != by_path.end() && it->second->format != "symlink" &&
            it->second->format != "special") {
          Apply(reading, it->second);
          if (reading.failed) {
            failed_.insert(it->first);
          } else {
            failed_.erase(it->first);
          }
        }
      }
    }
  }

  void ManifestMismatch(const std::string& path, const std::string& detail) {
    if (rep_->manifest_ok) rep_->manifest_detail = path + ": " + detail;
    rep_->manifest_ok = false;
    Problem("manifest", path, detail);
  }

  int Run() {
    rep_->mode = "program";
    rep_->checkpoint = o_.program_checkpoint;
    if (!o_.expect_manifest.empty()) {
      Result<std::string> text = ReadFileLimited(o_.expect_manifest, kMaxVerifyBytes);
      Result<VerifyReport> m = text.ok() ? ParseVerifyReport(*text, o_.expect_manifest)
                                         : Result<VerifyReport>(text.status());
      if (!m.ok()) return InputError(m.status());
      if (m->mode != "program") {
        return InputError(
            Status::Invalid(o_.expect_manifest, "not a report of --program-checkpoint"));
      }
      for (const ProgramFile& f : m->files) manifest_[f.path] = f;
      rep_->manifest_ok = true;
    }
    UniqueFd root;
    Status s = OpenRoot(&root);
    if (!s.ok()) return InputError(s);
    Walk(root.get(), "", 0);
    ReadDirectories();
    std::set<std::string> formats;
    for (const ProgramFile& f : rep_->files) {
      if (IsCheckpointFormat(f.format)) formats.insert(f.format);
      if (f.readable) rep_->tensors += f.tensors;
      if (f.format == "symlink" || f.format == "special") continue;
      if (failed_.count(f.path)) {
        Problem("read", f.path, f.detail);
      } else if (!f.readable && f.sha256.size() == 64) {
        rep_->not_readable.push_back(f.path);
        std::fprintf(stderr, "pilot: verify: read: warning: %s: not read independently: %s\n",
                     f.path.c_str(), f.detail.c_str());
      }
    }
    rep_->format = rep_->files.empty()  ? "none"
                   : formats.empty()    ? "unknown"
                   : formats.size() > 1 ? "mixed"
                                        : *formats.begin();
    rep_->files_checked = static_cast<int>(rep_->files.size());
    if (rep_->files.empty()) Problem("files", o_.program_checkpoint, "no files at all");
    if (!o_.expect_manifest.empty()) {
      std::set<std::string> here;
      for (const ProgramFile& f : rep_->files) here.insert(f.path);
      for (const auto& [path, f] : manifest_) {
        if (!here.count(path)) ManifestMismatch(path, "missing: listed in the manifest");
      }
      for (const std::string& p : here) {
        if (!manifest_.count(p)) rep_->manifest_extra.push_back(p);
      }
      if (rep_->manifest_ok) {
        Pass("manifest",
             std::to_string(manifest_.size()) + " files, size and sha256" +
                 (rep_->manifest_extra.empty()
                      ? ""
                      : ", " + std::to_string(rep_->manifest_extra.size()) + " files not in it"));
      }
    }
    rep_->ran = true;
    const bool ok = rep_->problems.empty();
    if (ok) {
      Pass("files",
           std::to_string(rep_->files.size()) + " files, format " + rep_->format + ", " +
               std::to_string(rep_->tensors) + " tensors" +
               (rep_->optimizer_state ? ", optimizer state" : ", no optimizer state") +
               (rep_->not_readable.empty() ? ""
                                           : ", " + std::to_string(rep_->not_readable.size()) +
                                                 " not read independently"));
    }
    if (!o_.json) std::printf("pilot: verify: %s\n", ok ? "VERIFIED" : "FAILED");
    return Finish(ok ? kExitOk : kExitFailed);
  }

  int InputError(const Status& s) {
    rep_->error = s.Message();
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return Finish(kExitUsage);
  }

  int Finish(int code) {
    const std::string json = VerifyReportToJson(*rep_);
    if (o_.json) std::printf("%s", json.c_str());
    if (!o_.out.empty()) {
      Status w = WriteFileAtomic(o_.out, json, 0644);
      if (!w.ok()) {
        std::fprintf(stderr, "%s\n", w.ToString().c_str());
        return kExitUsage;
      }
    }
    return code;
  }

  static std::string Shown(const std::string& rel) { return rel.empty() ? "." : rel; }

 private:
  const VerifyOptions& o_;
  VerifyReport* rep_;
  std::map<std::string, ProgramFile> manifest_;
  // By directory and format.
  std::map<std::pair<std::string, const ProgramFormat*>, DirectoryFiles> directories_;
  std::map<std::string, std::map<std::string, int64_t>> dir_sizes_;  // dir -> name -> size
  std::set<std::string> failed_;  // files that claim a known format and fail its check
  int64_t count_ = 0;
  bool stop_ = false;
};

}  // namespace

int RunProgramVerify(const VerifyOptions& opts) {
  VerifyReport rep;
  Verifier v(opts, &rep);
  return v.Run();
}

}  // namespace pilot::runner
