#include "core/base/crypto.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

#include "core/base/atomic_file.h"

namespace pilot {
namespace {

constexpr size_t kChunk = 1 << 20;  // 1 MiB

struct MdCtxFree {
  void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
};

struct PkeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
using Pkey = std::unique_ptr<EVP_PKEY, PkeyFree>;
using Bio = std::unique_ptr<BIO, BioFree>;

// Key files are small; anything larger is not one.
constexpr size_t kMaxKeyFileBytes = 4096;

// Never asks for a passphrase: an encrypted key file is refused.
int NoPassphrase(char*, int, int, void*) { return 0; }

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string HexEncode(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 0xf]);
  }
  return out;
}

Result<std::string> HexDecode(std::string_view hex) {
  if (hex.size() % 2 != 0) return Status::Invalid("hex", "odd number of digits");
  std::string out;
  out.reserve(hex.size() / 2);
  for (size_t i = 0; i < hex.size(); i += 2) {
    int hi = HexValue(hex[i]);
    int lo = HexValue(hex[i + 1]);
    if (hi < 0 || lo < 0) {
      return Status::Invalid("hex",
                             "not a hex digit at offset " + std::to_string(hi < 0 ? i : i + 1));
    }
    out.push_back(static_cast<char>((hi << 4) | lo));
  }
  return out;
}

bool IsSha256Hex(std::string_view s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

std::string Sha256Hex(std::string_view data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), md, &len, EVP_sha256(), nullptr);
  return HexEncode(std::string_view(reinterpret_cast<const char*>(md), len));
}

Result<std::string> Sha256Fd(int fd, const std::string& label, int64_t* bytes_read) {
  std::unique_ptr<EVP_MD_CTX, MdCtxFree> ctx(EVP_MD_CTX_new());
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) {
    return Status::Internal("sha256", "EVP_DigestInit_ex failed");
  }
  std::vector<char> buf(kChunk);
  int64_t total = 0;
  for (;;) {
    ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::IoError(label, std::string("read: ") + std::strerror(errno));
    }
    if (n == 0) break;
    EVP_DigestUpdate(ctx.get(), buf.data(), static_cast<size_t>(n));
    total += n;
  }
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx.get(), md, &len);
  if (bytes_read != nullptr) *bytes_read = total;
  return HexEncode(std::string_view(reinterpret_cast<const char*>(md), len));
}

Result<std::string> GitBlobSha1Fd(int fd, int64_t size, const std::string& label) {
  std::unique_ptr<EVP_MD_CTX, MdCtxFree> ctx(EVP_MD_CTX_new());
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha1(), nullptr) != 1) {
    return Status::Internal("sha1", "EVP_DigestInit_ex failed");
  }
  const std::string header = "blob " + std::to_string(size) + std::string(1, '\0');
  EVP_DigestUpdate(ctx.get(), header.data(), header.size());
  std::vector<char> buf(kChunk);
  int64_t total = 0;
  for (;;) {
    ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::IoError(label, std::string("read: ") + std::strerror(errno));
    }
    if (n == 0) break;
    total += n;
    if (total > size) return Status::IoError(label, "grew while being read");
    EVP_DigestUpdate(ctx.get(), buf.data(), static_cast<size_t>(n));
  }
  if (total != size) return Status::IoError(label, "shrank while being read");
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx.get(), md, &len);
  return HexEncode(std::string_view(reinterpret_cast<const char*>(md), len));
}

Result<std::string> Sha256File(const std::string& path, int64_t* bytes_read) {
  // O_NONBLOCK and the regular-file check: the prolog hashes files users
  // name, and a FIFO or a device there must not hang it.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) {
    int err = errno;
    if (err == ENOENT) return Status::NotFound(path, "no such file");
    return Status::IoError(path, std::strerror(err));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::IoError(path, S_ISDIR(st.st_mode) ? "is a directory" : "not a regular file");
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  Result<std::string> sha = Sha256Fd(fd, path, bytes_read);
  ::close(fd);
  return sha;
}

std::string HmacSha256Hex(std::string_view key, std::string_view data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  // An empty key is legal for HMAC; OpenSSL wants a non-null pointer.
  static const unsigned char kEmpty = 0;
  const void* k = key.empty() ? static_cast<const void*>(&kEmpty) : key.data();
  HMAC(EVP_sha256(), k, static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), md, &len);
  return HexEncode(std::string_view(reinterpret_cast<const char*>(md), len));
}

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  }
  return diff == 0;
}

bool HmacVerify(std::string_view key, std::string_view data, std::string_view signature_hex) {
  std::string want = HmacSha256Hex(key, data);
  std::string got(signature_hex);
  for (char& c : got) {
    if (c >= 'A' && c <= 'F') c = static_cast<char>(c - 'A' + 'a');
  }
  return ConstantTimeEquals(want, got);
}

Result<std::string> RandomBytes(size_t n) {
  std::string out(n, '\0');
  if (n > 0 && RAND_bytes(reinterpret_cast<unsigned char*>(out.data()), static_cast<int>(n)) != 1) {
    return Status::Internal("random", "RAND_bytes failed");
  }
  return out;
}

Result<std::string> NewKeyFileContents() {
  PILOT_ASSIGN_OR_RETURN(std::string key, RandomBytes(32));
  return HexEncode(key) + "\n";
}

Result<std::string> ReadKeyFile(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    int err = errno;
    if (err == ENOENT) {
      return Status::NotFound(path, "no signing key")
          .WithHint("create it as root with 'pilot keygen'");
    }
    return Status::IoError(path, std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) return Status::IoError(path, "not a regular file");
  if ((st.st_mode & 077) != 0) {
    return Status::Permission(path, "signing key is accessible to group or others")
        .WithHint("chmod 600 " + path);
  }
  PILOT_ASSIGN_OR_RETURN(std::string text, ReadFileLimited(path, 4096));
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  if (text.size() != 64) {
    return Status::Corrupt(path, "signing key must be 64 hex characters");
  }
  auto key = HexDecode(text);
  if (!key.ok()) return Status::Corrupt(path, "signing key: " + key.status().Message());
  return std::move(key).value();
}

std::string KeyId(std::string_view key) { return Sha256Hex(key).substr(0, 16); }

// ---- Ed25519 ------------------------------------------------------------------

namespace {

Result<Pkey> PrivatePkey(std::string_view private_key) {
  if (private_key.size() != kEd25519KeyBytes) {
    return Status::Invalid("ed25519", "a private key is 32 bytes, got " +
                                          std::to_string(private_key.size()));
  }
  Pkey k(EVP_PKEY_new_raw_private_key(
      EVP_PKEY_ED25519, nullptr, reinterpret_cast<const unsigned char*>(private_key.data()),
      private_key.size()));
  if (!k) return Status::Internal("ed25519", "EVP_PKEY_new_raw_private_key failed");
  return k;
}

Result<std::string> RawPublic(EVP_PKEY* k) {
  std::string out(kEd25519KeyBytes, '\0');
  size_t len = out.size();
  if (EVP_PKEY_get_raw_public_key(k, reinterpret_cast<unsigned char*>(out.data()), &len) != 1 ||
      len != kEd25519KeyBytes) {
    return Status::Internal("ed25519", "EVP_PKEY_get_raw_public_key failed");
  }
  return out;
}

std::string BioText(BIO* b) {
  char* data = nullptr;
  long n = BIO_get_mem_data(b, &data);
  return n > 0 ? std::string(data, static_cast<size_t>(n)) : std::string();
}

// stat() of a key file: a regular file whose mode has none of `forbidden`.
Status CheckKeyFile(const std::string& path, mode_t forbidden, const std::string& what,
                    const std::string& hint) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    int err = errno;
    if (err == ENOENT) {
      return Status::NotFound(path, "no " + what)
          .WithHint("create it as root with 'pilot keygen'");
    }
    return Status::IoError(path, std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) return Status::IoError(path, "not a regular file");
  if ((st.st_mode & forbidden) != 0) {
    return Status::Permission(path, what + " is " +
                                        ((forbidden & 044) != 0 ? "accessible to group or others"
                                                                : "writable by others"))
        .WithHint(hint);
  }
  return Status::Ok();
}

Result<Pkey> ReadPem(const std::string& path, bool is_private) {
  PILOT_ASSIGN_OR_RETURN(std::string text, ReadFileLimited(path, kMaxKeyFileBytes));
  Bio b(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
  if (!b) return Status::Internal("ed25519", "BIO_new_mem_buf failed");
  Pkey k(is_private ? PEM_read_bio_PrivateKey(b.get(), nullptr, &NoPassphrase, nullptr)
                    : PEM_read_bio_PUBKEY(b.get(), nullptr, &NoPassphrase, nullptr));
  const std::string what = is_private ? "private key" : "public key";
  if (!k) {
    return Status::Corrupt(path, "not an unencrypted " + what + " in PEM")
        .WithHint("pilot keygen writes the Ed25519 pair");
  }
  if (EVP_PKEY_get_base_id(k.get()) != EVP_PKEY_ED25519) {
    return Status::Corrupt(path, what + " is not an Ed25519 key");
  }
  return k;
}

}  // namespace

Result<Ed25519KeyFiles> Ed25519KeyFilesOf(std::string_view private_key) {
  PILOT_ASSIGN_OR_RETURN(Pkey k, PrivatePkey(private_key));
  Ed25519KeyFiles f;
  Bio priv(BIO_new(BIO_s_mem()));
  Bio pub(BIO_new(BIO_s_mem()));
  if (!priv || !pub ||
      PEM_write_bio_PrivateKey(priv.get(), k.get(), nullptr, nullptr, 0, nullptr, nullptr) != 1 ||
      PEM_write_bio_PUBKEY(pub.get(), k.get()) != 1) {
    return Status::Internal("ed25519", "cannot write the key pair as PEM");
  }
  f.private_pem = BioText(priv.get());
  f.public_pem = BioText(pub.get());
  PILOT_ASSIGN_OR_RETURN(f.public_key, RawPublic(k.get()));
  return f;
}

Result<Ed25519KeyFiles> NewEd25519KeyFiles() {
  PILOT_ASSIGN_OR_RETURN(std::string seed, RandomBytes(kEd25519KeyBytes));
  return Ed25519KeyFilesOf(seed);
}

Result<std::string> ReadEd25519PrivateKeyFile(const std::string& path) {
  PILOT_RETURN_IF_ERROR(
      CheckKeyFile(path, 077, "Ed25519 signing key", "chmod 600 " + path));
  PILOT_ASSIGN_OR_RETURN(Pkey k, ReadPem(path, /*is_private=*/true));
  std::string out(kEd25519KeyBytes, '\0');
  size_t len = out.size();
  if (EVP_PKEY_get_raw_private_key(k.get(), reinterpret_cast<unsigned char*>(out.data()), &len) !=
          1 ||
      len != kEd25519KeyBytes) {
    return Status::Corrupt(path, "cannot read the Ed25519 private key");
  }
  return out;
}

Result<std::string> ReadEd25519PublicKeyFile(const std::string& path) {
  PILOT_RETURN_IF_ERROR(CheckKeyFile(path, 002, "Ed25519 public key", "chmod 644 " + path));
  PILOT_ASSIGN_OR_RETURN(Pkey k, ReadPem(path, /*is_private=*/false));
  return RawPublic(k.get());
}

Result<std::string> Ed25519PublicKeyOf(std::string_view private_key) {
  PILOT_ASSIGN_OR_RETURN(Pkey k, PrivatePkey(private_key));
  return RawPublic(k.get());
}

Result<std::string> Ed25519SignHex(std::string_view private_key, std::string_view data) {
  PILOT_ASSIGN_OR_RETURN(Pkey k, PrivatePkey(private_key));
  std::unique_ptr<EVP_MD_CTX, MdCtxFree> ctx(EVP_MD_CTX_new());
  unsigned char sig[64];
  size_t len = sizeof sig;
  if (!ctx || EVP_DigestSignInit(ctx.get(), nullptr, nullptr, nullptr, k.get()) != 1 ||
      EVP_DigestSign(ctx.get(), sig, &len, reinterpret_cast<const unsigned char*>(data.data()),
                     data.size()) != 1) {
    return Status::Internal("ed25519", "signing failed");
  }
  return HexEncode(std::string_view(reinterpret_cast<const char*>(sig), len));
}

bool Ed25519Verify(std::string_view public_key, std::string_view data,
                   std::string_view signature_hex) {
  if (public_key.size() != kEd25519KeyBytes || signature_hex.size() != 128) return false;
  Result<std::string> sig = HexDecode(signature_hex);
  if (!sig.ok()) return false;
  Pkey k(EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nullptr,
                                     reinterpret_cast<const unsigned char*>(public_key.data()),
                                     public_key.size()));
  std::unique_ptr<EVP_MD_CTX, MdCtxFree> ctx(EVP_MD_CTX_new());
  if (!k || !ctx || EVP_DigestVerifyInit(ctx.get(), nullptr, nullptr, nullptr, k.get()) != 1) {
    return false;
  }
  return EVP_DigestVerify(ctx.get(), reinterpret_cast<const unsigned char*>(sig->data()),
                          sig->size(), reinterpret_cast<const unsigned char*>(data.data()),
                          data.size()) == 1;
}

}  // namespace pilot
