// What a pin is made of: the bounded walk over a file or folder, git's
// on-disk layout (HEAD, refs, packed-refs, the index) and the Hugging Face
// hub cache's (refs/, snapshots/, blobs/). job/pins.h states the rules.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "core/base/crypto.h"
#include "core/base/strings.h"
#include "job/pin_walk.h"
#include "job/safe_read.h"

namespace pilot::job {
namespace {

constexpr size_t kMaxRefBytes = 4096;
constexpr size_t kMaxPackedRefsBytes = 64u << 20;
constexpr size_t kMaxIndexBytes = 128u << 20;

bool IsHex(std::string_view s, size_t n) {
  return s.size() == n && s.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

std::string KindOf(mode_t mode) {
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  return "not a regular file";
}

// A refusal of safe_read's, in words about pins.
std::string Why(const Status& s) {
  if (s.code() == Code::kPermission && StartsWith(s.detail(), "is a symbolic link")) {
    return s.what() + ": is a symbolic link (not followed: name the file it points to)";
  }
  return s.Message();
}

// One regular file met by a walk: its path below the walk's root, the open
// descriptor (at its end once hashed) and what fstat said.
using FileHook = std::function<void(const std::string& rel, int fd, const struct stat& st)>;
// A link met by a walk: the value its line carries, or an error.
using LinkHook =
    std::function<Result<std::string>(const std::string& rel, const std::string& target)>;

// A walk over one pin, within its limits. Lines are "relative-path value",
// value being the file's sha256 (or what LinkHook made of a link).
class Walk {
 public:
  Walk(const PinLimits& limits, PinDeadline deadline, FileHook on_file, LinkHook on_link)
      : limits_(limits),
        deadline_(deadline),
        on_file_(std::move(on_file)),
        on_link_(std::move(on_link)) {}

  // The sha256 of the regular file open at `fd`, counted against the limits.
  Result<std::string> File(int fd, const struct stat& st, const std::string& label,
                           const std::string& rel) {
    if (std::chrono::steady_clock::now() > deadline_) {
      return Status::Unavailable(label, "pinning took too long; not hashed");
    }
    if (++files_ > limits_.max_files) {
      return Status::Invalid(label, "more than " + std::to_string(limits_.max_files) +
                                        " files to pin (name fewer, or smaller folders)");
    }
    if (bytes_ + st.st_size > limits_.max_bytes) {
      const std::string limit = limits_.max_bytes >= (1 << 20)
                                    ? std::to_string(limits_.max_bytes >> 20) + " MiB"
                                    : std::to_string(limits_.max_bytes) + " bytes";
      return Status::Invalid(label,
                             "more than " + limit + " to pin (name fewer, or smaller folders)");
    }
    int64_t n = 0;
    PILOT_ASSIGN_OR_RETURN(std::string sha, Sha256Fd(fd, label, &n));
    bytes_ += n;
    if (on_file_) on_file_(rel, fd, st);
    return sha;
  }

  // Everything below the folder open at `dirfd` (`label` its path, `rel`
  // its path below the root, "" for the root itself).
  Status Dir(int dirfd, const std::string& label, const std::string& rel, int depth) {
    if (depth > limits_.max_depth) {
      return Status::Invalid(label, "folders deeper than " + std::to_string(limits_.max_depth));
    }
    const int dup_fd = ::dup(dirfd);
    if (dup_fd < 0) return Status::IoError(label, std::strerror(errno));
    DIR* d = ::fdopendir(dup_fd);
    if (d == nullptr) {
      ::close(dup_fd);
      return Status::IoError(label, std::strerror(errno));
    }
    std::vector<std::string> names;
    errno = 0;
    while (struct dirent* e = ::readdir(d)) {
      const std::string n = e->d_name;
      if (n == "." || n == "..") continue;
      // A folder of millions of names is refused before it is sorted.
      if (static_cast<int64_t>(names.size()) >= limits_.max_files) {
        ::closedir(d);
        return Status::Invalid(label,
                               "more than " + std::to_string(limits_.max_files) +
                                   " entries in one folder (name fewer, or smaller folders)");
      }
      names.push_back(n);
    }
    ::closedir(d);
    std::sort(names.begin(), names.end());
    for (const std::string& n : names) {
      PILOT_RETURN_IF_ERROR(
          Entry(dirfd, label + "/" + n, rel.empty() ? n : rel + "/" + n, n, depth));
    }
    return Status::Ok();
  }

  int64_t files() const { return files_; }
  int64_t bytes() const { return bytes_; }
  // The digest of a folder: sha256 over its lines sorted, each ending '\n'.
  std::string Digest() {
    std::sort(lines_.begin(), lines_.end());
    std::string text;
    for (const std::string& l : lines_) text += l + "\n";
    return Sha256Hex(text);
  }

 private:
  Status Entry(int dirfd, const std::string& label, const std::string& rel, const std::string& n,
               int depth) {
    if (std::chrono::steady_clock::now() > deadline_) {
      return Status::Unavailable(label, "pinning took too long; the rest was not hashed");
    }
    struct stat st {};
    if (::fstatat(dirfd, n.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      return Status::IoError(label, std::strerror(errno));
    }
    if (S_ISDIR(st.st_mode)) {
      if (n == ".git" || n == "__pycache__") return Status::Ok();
      const int fd = ::openat(dirfd, n.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (fd < 0) return Status::IoError(label, std::strerror(errno));
      const UniqueFd sub(fd);
      return Dir(sub.get(), label, rel, depth + 1);
    }
    if (S_ISLNK(st.st_mode)) {
      std::string target(4096, '\0');
      const ssize_t len = ::readlinkat(dirfd, n.c_str(), target.data(), target.size());
      if (len < 0) return Status::IoError(label, std::strerror(errno));
      target.resize(static_cast<size_t>(len));
      PILOT_ASSIGN_OR_RETURN(std::string value, on_link_(rel, target));
      lines_.push_back(rel + " " + value);
      return Status::Ok();
    }
    if (!S_ISREG(st.st_mode)) {
      return Status::IoError(label, "is " + KindOf(st.st_mode) + " (not pinned)");
    }
    const int fd =
        ::openat(dirfd, n.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) return Status::IoError(label, std::strerror(errno));
    const UniqueFd file(fd);
    if (::fstat(file.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
      return Status::IoError(label, "changed while being pinned");
    }
    PILOT_ASSIGN_OR_RETURN(std::string sha, File(file.get(), st, label, rel));
    lines_.push_back(rel + " " + sha);
    return Status::Ok();
  }

  const PinLimits& limits_;
  PinDeadline deadline_;
  FileHook on_file_;
  LinkHook on_link_;
  int64_t files_ = 0;
  int64_t bytes_ = 0;
  std::vector<std::string> lines_;
};

// `a/b` joined with `c` and made lexically normal; nullopt when it leaves
// the folder it is relative to ("..", absolute) or is empty.
std::optional<std::string> Inside(const std::string& base_rel, const std::string& target) {
  if (target.empty() || target.front() == '/') return std::nullopt;
  std::filesystem::path p = std::filesystem::path(base_rel) / target;
  p = p.lexically_normal();
  const std::string s = p.string();
  if (s.empty() || s == "." || StartsWith(s, "..") || s.front() == '/') return std::nullopt;
  return s;
}

std::string Parent(const std::string& rel) {
  const size_t slash = rel.rfind('/');
  return slash == std::string::npos ? "" : rel.substr(0, slash);
}

// Reads a ref of the repository whose common folder is `common`: a loose
// ref file, else the line of packed-refs. "" when neither names it.
Result<std::string> ReadRef(const std::string& common, const std::string& name) {
  if (!PinPathProblem(name).empty())
    return Status::Corrupt(common, "ref " + name + " is not a name");
  Result<std::string> loose = ReadFileBeneath(common, name, kMaxRefBytes);
  if (loose.ok()) {
    const std::string v(Trim(*loose));
    if (IsHex(v, 40) || IsHex(v, 64)) return v;
    return Status::Corrupt(common + "/" + name, "not a commit");
  }
  if (loose.status().code() != Code::kNotFound) return loose.status();
  Result<std::string> packed = ReadFileBeneath(common, "packed-refs", kMaxPackedRefsBytes);
  if (!packed.ok()) {
    if (packed.status().code() == Code::kNotFound) return std::string();
    return packed.status();
  }
  size_t at = 0;
  while (at < packed->size()) {
    size_t end = packed->find('\n', at);
    if (end == std::string::npos) end = packed->size();
    std::string_view line(packed->data() + at, end - at);
    at = end + 1;
    const size_t sp = line.find(' ');
    if (sp == std::string_view::npos || line.front() == '#' || line.front() == '^') continue;
    if (line.substr(sp + 1) == name) return std::string(line.substr(0, sp));
  }
  return std::string();
}

// The git folder of the work tree at `top` (`.git` itself, or where a
// `.git` file's "gitdir:" line points).
Result<std::string> GitDirOf(const std::string& top) {
  struct stat st {};
  PILOT_ASSIGN_OR_RETURN(st, StatBeneath(top, ".git"));
  if (S_ISDIR(st.st_mode)) return top + "/.git";
  PILOT_ASSIGN_OR_RETURN(std::string text, ReadFileBeneath(top, ".git", kMaxRefBytes));
  std::string v(Trim(text));
  if (!StartsWith(v, "gitdir:")) return Status::Corrupt(top + "/.git", "no gitdir: line");
  v = std::string(Trim(v.substr(7)));
  if (v.empty()) return Status::Corrupt(top + "/.git", "empty gitdir");
  if (v.front() != '/') v = top + "/" + v;
  return std::filesystem::path(v).lexically_normal().string();
}

uint32_t Be32(std::string_view b, size_t at) {
  return (uint32_t{static_cast<unsigned char>(b[at])} << 24) |
         (uint32_t{static_cast<unsigned char>(b[at + 1])} << 16) |
         (uint32_t{static_cast<unsigned char>(b[at + 2])} << 8) |
         uint32_t{static_cast<unsigned char>(b[at + 3])};
}

// The pinned files' state against git's index, for PinPath.
class DirtyCheck {
 public:
  // `top`: the work tree; `below`: the pin's path below it.
  DirtyCheck(const std::string& top, std::string below) : below_(std::move(below)) {
    Result<std::map<std::string, GitIndexEntry>> idx = ReadGitIndex(top);
    if (idx.ok()) index_ = std::move(idx).value();
  }
  void File(const std::string& rel, int fd, const struct stat& st) {
    if (!index_) return;
    const std::string path = rel.empty() ? below_ : below_ + "/" + rel;
    auto it = index_->find(path);
    if (it == index_->end()) {
      dirty_ = true;  // not in the index: untracked
      return;
    }
    const GitIndexEntry& e = it->second;
    if (e.size == static_cast<uint32_t>(st.st_size) &&
        e.mtime_s == static_cast<uint32_t>(st.st_mtim.tv_sec) &&
        e.mtime_ns == static_cast<uint32_t>(st.st_mtim.tv_nsec)) {
      return;
    }
    if (::lseek(fd, 0, SEEK_SET) != 0) {
      dirty_ = true;
      return;
    }
    Result<std::string> sha1 = GitBlobSha1Fd(fd, st.st_size, path);
    if (!sha1.ok() || *sha1 != e.sha1) dirty_ = true;
  }
  std::string State() const { return !index_ ? "" : dirty_ ? "yes" : "no"; }

 private:
  std::string below_;
  std::optional<std::map<std::string, GitIndexEntry>> index_;
  bool dirty_ = false;
};

}  // namespace

Result<std::map<std::string, GitIndexEntry>> ParseGitIndex(std::string_view b) {
  const std::string label = "git index";
  if (b.size() < 12 || b.substr(0, 4) != "DIRC") return Status::Corrupt(label, "no DIRC header");
  const uint32_t version = Be32(b, 4);
  const uint32_t count = Be32(b, 8);
  if (version < 2 || version > 4) {
    return Status::Corrupt(label, "version " + std::to_string(version) + " is not 2, 3 or 4");
  }
  std::map<std::string, GitIndexEntry> out;
  std::string prev;
  size_t pos = 12;
  for (uint32_t i = 0; i < count; ++i) {
    if (pos + 62 > b.size())
      return Status::Corrupt(label, "entry " + std::to_string(i) + " cut short");
    GitIndexEntry e;
    e.mtime_s = Be32(b, pos + 8);
    e.mtime_ns = Be32(b, pos + 12);
    e.size = Be32(b, pos + 36);
    e.sha1 = HexEncode(b.substr(pos + 40, 20));
    const uint32_t flags = (uint32_t{static_cast<unsigned char>(b[pos + 60])} << 8) |
                           static_cast<unsigned char>(b[pos + 61]);
    size_t name_at = pos + 62;
    if (version >= 3 && (flags & 0x4000) != 0) name_at += 2;
    std::string path;
    if (version == 4) {
      // The path is the previous one less N bytes, then a suffix (git's
      // offset varint for N).
      size_t p = name_at;
      if (p >= b.size()) return Status::Corrupt(label, "entry cut short");
      unsigned char c = static_cast<unsigned char>(b[p++]);
      uint64_t strip = c & 127;
      while ((c & 128) != 0) {
        if (p >= b.size() || strip > (1u << 24)) return Status::Corrupt(label, "bad path prefix");
        c = static_cast<unsigned char>(b[p++]);
        strip = ((strip + 1) << 7) | (c & 127);
      }
      if (strip > prev.size()) return Status::Corrupt(label, "bad path prefix");
      const size_t nul = b.find('\0', p);
      if (nul == std::string_view::npos) return Status::Corrupt(label, "unterminated path");
      path = prev.substr(0, prev.size() - strip) + std::string(b.substr(p, nul - p));
      pos = nul + 1;
    } else {
      const size_t nul = b.find('\0', name_at);
      if (nul == std::string_view::npos) return Status::Corrupt(label, "unterminated path");
      path = std::string(b.substr(name_at, nul - name_at));
      pos += ((name_at - pos) + path.size() + 8) & ~size_t{7};
      if (pos > b.size()) return Status::Corrupt(label, "entry cut short");
    }
    prev = path;
    if (((flags >> 12) & 3) == 0) out[path] = e;  // stage 0: no merge in progress
  }
  return out;
}

Result<std::map<std::string, GitIndexEntry>> ReadGitIndex(const std::string& top) {
  PILOT_ASSIGN_OR_RETURN(std::string gitdir, GitDirOf(top));
  PILOT_ASSIGN_OR_RETURN(std::string bytes, ReadFileBeneath(gitdir, "index", kMaxIndexBytes));
  return ParseGitIndex(bytes);
}

Result<std::string> GitHead(const std::string& path, std::string* top_out) {
  std::filesystem::path dir = std::filesystem::path(path).lexically_normal();
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) dir = dir.parent_path();
  for (int i = 0; i < 64 && !dir.empty(); ++i) {
    if (::lstat((dir / ".git").c_str(), &st) == 0) {
      const std::string top = dir.string();
      if (top_out != nullptr) *top_out = top;
      PILOT_ASSIGN_OR_RETURN(std::string gitdir, GitDirOf(top));
      PILOT_ASSIGN_OR_RETURN(std::string head, ReadFileBeneath(gitdir, "HEAD", kMaxRefBytes));
      const std::string h(Trim(head));
      if (IsHex(h, 40) || IsHex(h, 64)) return h;
      if (!StartsWith(h, "ref:"))
        return Status::Corrupt(gitdir + "/HEAD", "neither a commit nor a ref");
      std::string common = gitdir;
      Result<std::string> cd = ReadFileBeneath(gitdir, "commondir", kMaxRefBytes);
      if (cd.ok()) {
        std::string c(Trim(*cd));
        if (!c.empty() && c.front() != '/') c = gitdir + "/" + c;
        common = std::filesystem::path(c).lexically_normal().string();
      }
      return ReadRef(common, std::string(Trim(h.substr(4))));
    }
    if (dir == dir.root_path()) break;
    dir = dir.parent_path();
  }
  return std::string();
}

std::string HubRepoFolder(const std::string& kind, const std::string& repo) {
  std::string folder = kind == "hub_dataset" ? "datasets--" : "models--";
  for (char c : repo) {
    if (c == '/') {
      folder += "--";
    } else {
      folder += c;
    }
  }
  return folder;
}

LockPin PinPath(const std::string& workdir, const std::string& name, const PinLimits& limits,
                PinDeadline deadline) {
  LockPin pin;
  pin.name = name;
  pin.kind = "file";
  if (const std::string why = PinPathProblem(name); !why.empty()) {
    pin.error = name + ": " + why;
    return pin;
  }
  std::string rel = name;
  while (rel.size() > 1 && rel.back() == '/') rel.pop_back();
  pin.path = workdir + "/" + rel;
  struct stat st {};
  Result<UniqueFd> fd = OpenBeneath(workdir, rel, &st);
  if (!fd.ok()) {
    pin.error = Why(fd.status());
    return pin;
  }
  std::string top;
  Result<std::string> head = GitHead(pin.path, &top);
  std::optional<DirtyCheck> dirty;
  if (head.ok() && !top.empty()) {
    pin.commit = *head;
    std::optional<std::string> below = PathBelow(top, pin.path);
    if (below) dirty.emplace(top, *below);
  }
  FileHook on_file = [&](const std::string& r, int f, const struct stat& s) {
    if (dirty) dirty->File(r, f, s);
  };
  LinkHook on_link = [](const std::string&, const std::string& target) -> Result<std::string> {
    return "link " + target;  // recorded, never followed
  };
  Walk walk(limits, deadline, on_file, on_link);
  if (S_ISREG(st.st_mode)) {
    pin.kind = "file";
    Result<std::string> sha = walk.File(fd->get(), st, pin.path, "");
    if (!sha.ok()) {
      pin.error = Why(sha.status());
      return pin;
    }
    pin.sha256 = *sha;
  } else {
    pin.kind = "folder";
    Status s = walk.Dir(fd->get(), pin.path, "", 0);
    if (!s.ok()) {
      pin.error = Why(s);
      return pin;
    }
    pin.sha256 = walk.Digest();
  }
  pin.files = walk.files();
  pin.bytes = walk.bytes();
  if (dirty) pin.dirty = dirty->State();
  return pin;
}

LockPin PinHub(const std::string& cache, const std::string& kind, const std::string& ref_text,
               const PinLimits& limits, PinDeadline deadline) {
  LockPin pin;
  pin.kind = kind;
  pin.name = ref_text;
  Result<HubRef> ref = ParseHubRef(ref_text);
  if (!ref.ok()) {
    pin.error = ref.status().Message();
    return pin;
  }
  if (cache.empty()) {
    pin.error = ref_text + ": no hub cache folder (HF_HUB_CACHE, HF_HOME or a home folder)";
    return pin;
  }
  const std::string folder = HubRepoFolder(kind, ref->repo);
  const std::string repo_dir = cache + "/" + folder;
  if (IsHex(ref->revision, 40)) {
    pin.commit = ref->revision;
  } else {
    Result<std::string> commit =
        ReadFileBeneath(cache, folder + "/refs/" + ref->revision, kMaxRefBytes);
    if (!commit.ok()) {
      pin.error = ref_text + ": not in the hub cache " + cache + " (" + Why(commit.status()) + ")";
      return pin;
    }
    pin.commit = std::string(Trim(*commit));
    if (!IsHex(pin.commit, 40)) {
      pin.error = repo_dir + "/refs/" + ref->revision + ": not a commit";
      pin.commit.clear();
      return pin;
    }
  }
  const std::string snap_rel = "snapshots/" + pin.commit;
  pin.path = repo_dir + "/" + snap_rel;
  struct stat st {};
  Result<UniqueFd> fd = OpenBeneath(repo_dir, snap_rel, &st);
  if (!fd.ok() || !S_ISDIR(st.st_mode)) {
    pin.error = ref_text + ": commit " + pin.commit.substr(0, 12) +
                " has no snapshot in the hub cache (" +
                (fd.ok() ? pin.path + ": not a folder" : Why(fd.status())) + ")";
    return pin;
  }
  // The snapshot's files are links into the repository's blobs/: followed
  // only there, by path below the repository's folder.
  Walk* self = nullptr;
  LinkHook on_link = [&](const std::string& rel, const std::string& target) -> Result<std::string> {
    std::optional<std::string> at = Inside(Parent(snap_rel + "/" + rel), target);
    if (!at) {
      return Status::Permission(pin.path + "/" + rel,
                                "links to " + target + ", outside " + repo_dir + " (not followed)");
    }
    struct stat bst {};
    PILOT_ASSIGN_OR_RETURN(UniqueFd blob, OpenBeneath(repo_dir, *at, &bst));
    if (!S_ISREG(bst.st_mode)) return Status::IoError(repo_dir + "/" + *at, "not a regular file");
    return self->File(blob.get(), bst, repo_dir + "/" + *at, rel);
  };
  Walk walk(limits, deadline, nullptr, on_link);
  self = &walk;
  Status s = walk.Dir(fd->get(), pin.path, "", 0);
  if (!s.ok()) {
    pin.error = Why(s);
    return pin;
  }
  pin.sha256 = walk.Digest();
  pin.files = walk.files();
  pin.bytes = walk.bytes();
  return pin;
}

}  // namespace pilot::job
