// safetensors I/O: one sequential pass, hashing overlapped with the disk.
#include "runner/ckpt/safetensors.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <future>
#include <memory>
#include <nlohmann/json.hpp>

#include "core/base/json_util.h"
#include "core/base/unique_fd.h"

namespace pilot::runner {
namespace {

constexpr int64_t kChunk = 64ll << 20;  // bytes per write / read

struct DtypeName {
  at::ScalarType type;
  const char* name;
};
constexpr DtypeName kDtypes[] = {
    {at::kFloat, "F32"}, {at::kBFloat16, "BF16"}, {at::kHalf, "F16"},  {at::kDouble, "F64"},
    {at::kLong, "I64"},  {at::kInt, "I32"},       {at::kShort, "I16"}, {at::kChar, "I8"},
    {at::kByte, "U8"},   {at::kBool, "BOOL"},
};

// Incremental SHA-256 (OpenSSL EVP).
class Sha256 {
 public:
  Sha256() : ctx_(EVP_MD_CTX_new()) { EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr); }
  ~Sha256() { EVP_MD_CTX_free(ctx_); }
  void Update(const void* p, size_t n) { EVP_DigestUpdate(ctx_, p, n); }
  std::string Hex() {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    EVP_DigestFinal_ex(ctx_, md, &len);
    static const char* kHex = "0123456789abcdef";
    std::string s;
    for (unsigned int i = 0; i < len; ++i) {
      s += kHex[md[i] >> 4];
      s += kHex[md[i] & 15];
    }
    return s;
  }

 private:
  EVP_MD_CTX* ctx_;
};

Status Errno(const std::string& path, const char* op) {
  return Status::IoError(path, std::string(op) + ": " + std::strerror(errno));
}

Status WriteAll(int fd, const char* p, int64_t n, const std::string& path) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, static_cast<size_t>(std::min<int64_t>(n, 1ll << 30)));
    if (w < 0) {
      if (errno == EINTR) continue;
      return Errno(path, "write");
    }
    p += w;
    n -= w;
  }
  return Status::Ok();
}

Status ReadAll(int fd, char* p, int64_t n, const std::string& path) {
  while (n > 0) {
    ssize_t r = ::read(fd, p, static_cast<size_t>(std::min<int64_t>(n, 1ll << 30)));
    if (r < 0) {
      if (errno == EINTR) continue;
      return Errno(path, "read");
    }
    if (r == 0) return Status::Corrupt(path, "file ends early");
    p += r;
    n -= r;
  }
  return Status::Ok();
}

// A flat byte view of a contiguous tensor on its own device.
at::Tensor Bytes(const at::Tensor& t) {
  return at::from_blob(t.data_ptr(), {static_cast<int64_t>(t.nbytes())},
                       at::TensorOptions().dtype(at::kByte).device(t.device()));
}

// Streams chunks to a consumer with the hash of chunk i running beside the
// consumer's work on it.
class HashPipe {
 public:
  explicit HashPipe(Sha256* sha) : sha_(sha) {}
  ~HashPipe() { Wait(); }
  void Start(const char* p, int64_t n) {
    Wait();
    pending_ =
        std::async(std::launch::async, [this, p, n] { sha_->Update(p, static_cast<size_t>(n)); });
  }
  void Wait() {
    if (pending_.valid()) pending_.get();
  }

 private:
  Sha256* sha_;
  std::future<void> pending_;
};

// The data part of WriteSafetensors, into the open file `fd`.
Result<FileDigest> WriteOpenFile(UniqueFd& fd, const std::string& path, const std::string& prefix,
                                 const NamedTensors& tensors, bool any_cuda) {
  Sha256 sha;
  sha.Update(prefix.data(), prefix.size());
  PILOT_RETURN_IF_ERROR(
      WriteAll(fd.get(), prefix.data(), static_cast<int64_t>(prefix.size()), path));
  int64_t written = static_cast<int64_t>(prefix.size());
  int64_t flushed = 0;  // bytes whose write-back was started

  // Two staging buffers for device tensors (pinned: fast, async-capable).
  at::Tensor stage[2];
  if (any_cuda) {
    for (auto& s : stage) {
      s = at::empty({kChunk}, at::TensorOptions().dtype(at::kByte).pinned_memory(true));
    }
  }
  HashPipe pipe(&sha);
  int which = 0;
  for (const auto& [name, t] : tensors) {
    const int64_t n = static_cast<int64_t>(t.nbytes());
    at::Tensor src = t.device().is_cpu() ? at::Tensor() : Bytes(t);
    for (int64_t pos = 0; pos < n; pos += kChunk) {
      const int64_t len = std::min(kChunk, n - pos);
      const char* p;
      if (src.defined()) {
        pipe.Wait();  // the buffer about to be filled is no longer hashed
        at::Tensor dst = stage[which].narrow(0, 0, len);
        dst.copy_(src.narrow(0, pos, len));
        p = static_cast<const char*>(stage[which].data_ptr());
        which ^= 1;
      } else {
        p = static_cast<const char*>(t.data_ptr()) + pos;
      }
      pipe.Start(p, len);
      PILOT_RETURN_IF_ERROR(WriteAll(fd.get(), p, len, path));
      written += len;
      if (written - flushed >= 4 * kChunk) {
        // Start write-back now so the final fsync has little left to do.
        ::sync_file_range(fd.get(), flushed, written - flushed, SYNC_FILE_RANGE_WRITE);
        flushed = written;
      }
    }
  }
  pipe.Wait();
  if (::fsync(fd.get()) != 0) return Errno(path, "fsync");
  if (::close(fd.release()) != 0) return Errno(path, "close");
  return FileDigest{written, sha.Hex()};
}

}  // namespace

std::string SafetensorsDtype(at::ScalarType t) {
  for (const auto& d : kDtypes) {
    if (d.type == t) return d.name;
  }
  return "";
}

Result<FileDigest> WriteSafetensors(const std::string& path, const NamedTensors& tensors,
                                    const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json h = nlohmann::ordered_json::object();
  h["__metadata__"] = metadata;
  int64_t off = 0;
  bool any_cuda = false;
  for (const auto& [name, t] : tensors) {
    const std::string dt = SafetensorsDtype(t.scalar_type());
    if (dt.empty()) return Status::Invalid(path, name + ": dtype not representable");
    if (!t.is_contiguous()) return Status::Invalid(path, name + ": not contiguous");
    const int64_t n = static_cast<int64_t>(t.nbytes());
    h[name] = {{"dtype", dt}, {"shape", t.sizes().vec()}, {"data_offsets", {off, off + n}}};
    off += n;
    any_cuda = any_cuda || !t.device().is_cpu();
  }
  std::string header = DumpJson(h);
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string prefix(8, '\0');
  uint64_t hl = header.size();
  for (int i = 0; i < 8; ++i) prefix[i] = static_cast<char>((hl >> (8 * i)) & 0xff);
  prefix += header;

  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (fd.get() < 0) return Errno(path, "open");
  // A file that could not be written whole is removed, whatever stopped it
  // (a full disk, a file-size limit, a device error while staging).
  try {
    Result<FileDigest> r = WriteOpenFile(fd, path, prefix, tensors, any_cuda);
    if (!r.ok()) ::unlink(path.c_str());
    return r;
  } catch (...) {
    ::unlink(path.c_str());
    throw;
  }
}

Result<SafetensorsHeader> ReadSafetensorsHeader(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno == ENOENT) return Status::NotFound(path, "no such file");
    return Errno(path, "open");
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return Errno(path, "stat");
  const int64_t file_size = st.st_size;
  std::string prefix(8, '\0');
  if (file_size < 8) return Status::Corrupt(path, "shorter than the 8-byte header length");
  PILOT_RETURN_IF_ERROR(ReadAll(fd.get(), prefix.data(), 8, path));
  PILOT_ASSIGN_OR_RETURN(int64_t hl, SafetensorsHeaderLength(prefix, file_size, path));
  std::string text(static_cast<size_t>(hl), '\0');
  PILOT_RETURN_IF_ERROR(ReadAll(fd.get(), text.data(), hl, path));
  return ParseSafetensorsHeader(text, file_size, path);
}

Result<FileDigest> LoadSafetensors(const std::string& path,
                                   const std::map<std::string, at::Tensor>& dst) {
  PILOT_ASSIGN_OR_RETURN(SafetensorsHeader h, ReadSafetensorsHeader(path));
  bool any_cuda = false;
  for (const auto& e : h.entries) {
    auto it = dst.find(e.name);
    if (it == dst.end()) return Status::Corrupt(path, "unexpected tensor " + e.name);
    const at::Tensor& t = it->second;
    if (SafetensorsDtype(t.scalar_type()) != e.dtype || t.sizes().vec() != e.shape) {
      return Status::Corrupt(path, "tensor " + e.name + ": dtype/shape differ from the model's");
    }
    any_cuda = any_cuda || !t.device().is_cpu();
  }
  for (const auto& [name, t] : dst) {
    if (!h.Find(name)) return Status::Corrupt(path, "missing tensor " + name);
  }
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return Errno(path, "open");
  ::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_SEQUENTIAL);
  Sha256 sha;
  std::string head(static_cast<size_t>(h.data_start), '\0');
  PILOT_RETURN_IF_ERROR(ReadAll(fd.get(), head.data(), h.data_start, path));
  sha.Update(head.data(), head.size());
  at::Tensor stage[2];
  if (any_cuda) {
    for (auto& s : stage) {
      s = at::empty({kChunk}, at::TensorOptions().dtype(at::kByte).pinned_memory(true));
    }
  }
  HashPipe pipe(&sha);
  int which = 0;
  c10::NoGradGuard no_grad;
  for (const auto& e : h.entries) {
    const at::Tensor& t = dst.at(e.name);
    const int64_t n = e.end - e.begin;
    at::Tensor bytes = Bytes(t);
    for (int64_t pos = 0; pos < n; pos += kChunk) {
      const int64_t len = std::min(kChunk, n - pos);
      if (t.device().is_cpu()) {
        char* p = static_cast<char*>(t.data_ptr()) + pos;
        PILOT_RETURN_IF_ERROR(ReadAll(fd.get(), p, len, path));
        pipe.Start(p, len);
      } else {
        pipe.Wait();
        char* p = static_cast<char*>(stage[which].data_ptr());
        PILOT_RETURN_IF_ERROR(ReadAll(fd.get(), p, len, path));
        pipe.Start(p, len);
        bytes.narrow(0, pos, len).copy_(stage[which].narrow(0, 0, len));
        which ^= 1;
      }
    }
  }
  pipe.Wait();
  return FileDigest{h.file_size, sha.Hex()};
}

}  // namespace pilot::runner
